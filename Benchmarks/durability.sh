#!/usr/bin/env bash
# The bounded-loss mode's cost: one thread logging 3-scalar records with sync_interval_ms 0 and
# INTERVAL (default 100), interleaved pairs (default 7) at full speed and paced at 1 M records/s;
# prints the medians and spreads of ns/record inside the log calls, the ratio pair by pair, and the
# bytes the disk wrote (Benchmarks/Durability/durability_bench.c). Run on an idle machine:
#   Benchmarks/durability.sh [INTERVAL_MS] [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
interval="${1:-100}"
pairs="${2:-7}"
out="$(mktemp -d "${TMPDIR:-/var/tmp}/durability.XXXXXX")"
trap 'rm -rf "$out"' EXIT
make -s -C CSources O="$out/c"  # the one C recipe
cc -O2 -pthread -I CSources/CLogbook/include Benchmarks/Durability/durability_bench.c \
  "$out/c/liblogbook-read.a" "$out/c/liblogbook.a" -lzstd -o "$out/bench"
run() {  # run RECORDS RATE
  for _ in $(seq 1 "$pairs"); do
    rm -rf "$out"/*.logbook
    a=$("$out/bench" "$out/a.logbook" "$1" 0 "$2")
    b=$("$out/bench" "$out/b.logbook" "$1" "$interval" "$2")
    echo "$a $b"
  done | python3 -c '
import statistics as s, sys
rows = [line.split() for line in sys.stdin]
a = [float(r[0]) for r in rows]; b = [float(r[4]) for r in rows]; q = [y / x for x, y in zip(a, b)]
wa = [int(r[2]) for r in rows]; wb = [int(r[6]) for r in rows]
print("  off %.2f ns/record (%.2f-%.2f), every '"$interval"' ms %.2f ns/record (%.2f-%.2f), ratio %.3f (%.3f-%.3f); disk wrote %.0f MB vs %.0f MB (medians), %d pairs" % (
    s.median(a), min(a), max(a), s.median(b), min(b), max(b), s.median(q), min(q), max(q),
    s.median(wa) / 1e6, s.median(wb) / 1e6, len(rows)))'
}
echo "full speed, 30 M records:"
run 30000000 0
echo "paced at 1 M records/s, 5 M records:"
run 5000000 1000000
