#!/usr/bin/env bash
# A/B of the archiver against an earlier revision, interleaved in one run (the VM's speed changes
# by 2x from hour to hour; pairs taken back to back do not): PAIRS (default 10) pairs of each
#   sustained  10 M records through a 16 MiB lossless ring: as fast as the archiver persists
#   hot-off    4 M records into a 256 MiB ring, no archiver
#   hot-on     the same with the archiver persisting as chunks fill
# Prints medians with their range, and the paired new/old time ratio.
#   Benchmarks/archive-ab.sh REVISION [PAIRS] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
rev="$1"; pairs="${2:-10}"; dir="${3:-/var/tmp/logbook-archive-ab}"
scripts/install-deps
work="$(mktemp -d)"
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work" "$dir/bench.logbook"' EXIT
mkdir -p "$dir"
git worktree add --detach "$work/old" "$rev" >/dev/null 2>&1
for side in old new; do
  src=.; [ "$side" = old ] && src="$work/old"
  # Each side's C libraries from its own CSources/Makefile (the one C recipe).
  make -s -C "$src/CSources" O="$work/lib-$side" CFLAGS=-O2 "$work/lib-$side/liblogbook-archive.a" \
    "$work/lib-$side/liblogbook-read.a" "$work/lib-$side/liblogbook.a" > /dev/null
  cc -O2 -pthread -I"$src/CSources/CLogbook/include" -I"$src/CSources/CLogbookArchive/include" \
    Benchmarks/Archive/ab_bench.c "$work/lib-$side/liblogbook-archive.a" "$work/lib-$side/liblogbook-read.a" \
    "$work/lib-$side/liblogbook.a" -luring -lzstd -o "$work/ab_$side"
done
for _ in $(seq "$pairs"); do
  for side in old new; do
    echo "$side sustained $("$work/ab_$side" "$dir" 1 10000000 16)"
    echo "$side hot-off $("$work/ab_$side" "$dir" 0 4000000 256)"
    echo "$side hot-on $("$work/ab_$side" "$dir" 1 4000000 256)"
  done
done > "$work/results"
python3 - "$work/results" "$rev" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, scenario, ns, mbs = line.split()[:4]
    d[(side, scenario)].append((float(ns), float(mbs)))
print(f"| scenario | {sys.argv[2]} | working tree | new/old time (paired) |")
print("|---|---:|---:|---:|")
for scenario in ["sustained", "hot-off", "hot-on"]:
    cells = []
    for side in ["old", "new"]:
        ns = [x[0] for x in d[(side, scenario)]]; mb = [x[1] for x in d[(side, scenario)]]
        cells.append(f"{statistics.median(ns):.2f} ns/record ({min(ns):.2f}-{max(ns):.2f}), {statistics.median(mb):.0f} MB/s")
    r = [n[0] / o[0] for o, n in zip(d[("old", scenario)], d[("new", scenario)])]
    print(f"| {scenario} | {cells[0]} | {cells[1]} | {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f}) |")
PY
