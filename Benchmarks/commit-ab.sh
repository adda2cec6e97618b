#!/usr/bin/env bash
# The writer's fast path, two revisions A/B: the C core of each built at -O2, one thread logging
# 20 M records (LB_INFO, three scalars), 11 interleaved pairs; prints the medians, their spread and
# the ratio B/A pair by pair. Usage: Benchmarks/commit-ab.sh REV_A [REV_B (default: the work tree)]
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
build() {  # build NAME SOURCE_DIR
  cc -O2 -pthread -I"$2/CSources/CLogbook/include" Benchmarks/Commit/commit_bench.c "$2"/CSources/CLogbook/src/*.c \
    -lzstd -o "$out/$1"
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
for _ in $(seq 1 11); do
  rm -rf "$out"/*.logbook
  a=$("$out/a" "$out/a.logbook" 20000000 | cut -d' ' -f1)
  b=$("$out/b" "$out/b.logbook" 20000000 | cut -d' ' -f1)
  echo "$a $b"
done | python3 -c '
import statistics as s, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin]
a = [r[0] for r in rows]; b = [r[1] for r in rows]; q = [y / x for x, y in rows]
print("A %.2f ns/record (%.2f-%.2f), B %.2f ns/record (%.2f-%.2f), B/A %.3f (%.3f-%.3f), %d pairs" % (
    s.median(a), min(a), max(a), s.median(b), min(b), max(b), s.median(q), min(q), max(q), len(rows)))'
