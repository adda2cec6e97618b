#!/usr/bin/env bash
# The writer's fast path and the reader, two revisions A/B, each revision's C libraries built by
# its own CSources/Makefile at -O2 (the writer linked alone: libc only).
#   write: one thread logging 20 M records (LB_INFO, three scalars) into a 64 MiB overwrite ring;
#   read:  the C reader streaming that ring (its last ~1.5 M records), best of 3 passes.
# 11 interleaved pairs each; prints the medians, their spread and the ratio B/A pair by pair.
# Usage: Benchmarks/commit-ab.sh REV_A [REV_B (default: the work tree)]
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
build() {  # build NAME SOURCE_DIR
  make -s -C "$2/CSources" O="$out/lib-$1" CFLAGS=-O2 "$out/lib-$1/liblogbook.a" "$out/lib-$1/liblogbook-read.a" > /dev/null
  cc -O2 -pthread -I"$2/CSources/CLogbook/include" Benchmarks/Commit/commit_bench.c "$out/lib-$1/liblogbook.a" \
    -o "$out/write-$1"
  cc -O2 -pthread -I"$2/CSources/CLogbook/include" Benchmarks/Read/read_bench.c "$out/lib-$1/liblogbook-read.a" \
    "$out/lib-$1/liblogbook.a" -lzstd -o "$out/read-$1"
}
mkdir "$out/src-a"
git archive "$1" CSources | tar -x -C "$out/src-a"
build a "$out/src-a"
if [ $# -ge 2 ]; then
  mkdir "$out/src-b"
  git archive "$2" CSources | tar -x -C "$out/src-b"
  build b "$out/src-b"
else
  build b .
fi
summary() {
  python3 -c '
import statistics as s, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin]
a = [r[0] for r in rows]; b = [r[1] for r in rows]; q = [y / x for x, y in rows]
print("%s: A %.2f ns/record (%.2f-%.2f), B %.2f ns/record (%.2f-%.2f), B/A %.3f (%.3f-%.3f), %d pairs" % (
    sys.argv[1], s.median(a), min(a), max(a), s.median(b), min(b), max(b), s.median(q), min(q), max(q), len(rows)))' "$1"
}
for _ in $(seq 1 11); do
  rm -rf "$out"/*.logbook
  a=$("$out/write-a" "$out/a.logbook" 20000000 | cut -d' ' -f1)
  b=$("$out/write-b" "$out/b.logbook" 20000000 | cut -d' ' -f1)
  echo "$a $b"
done | summary write
for _ in $(seq 1 11); do
  a=$("$out/read-a" "$out/b.logbook" | cut -d' ' -f1)
  b=$("$out/read-b" "$out/b.logbook" | cut -d' ' -f1)
  echo "$a $b"
done | summary read
