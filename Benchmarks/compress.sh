#!/usr/bin/env bash
# Compressed archive files, all in one run:
#  1. ratio and rate per zstd level: the archiver's own compression job (plan, compress in ~1 MiB
#     frames, decompress and compare every frame, write, fsync) and decompression through the
#     reader's archive source, on three kinds of archive files: the demo's (4 threads, mixed text,
#     numbers, metadata, errors), a realistic server mix (routes, ids, users, metadata, warnings
#     with errors), and the read benchmark's ("request {} took {} ms ok={}");
#  2. the logging thread's cost of the archiver, off / on / on with compression, interleaved in
#     PAIRS rounds (median, range, and the paired on/off time ratio), with the logging thread's
#     minor page faults and involuntary context switches; and the sustained rate through a 16 MiB
#     lossless ring (as fast as the archiver persists), without and with compression;
#  3. the C reader streaming compressed archive files against the same records uncompressed,
#     interleaved.
# Usage: Benchmarks/compress.sh [PAIRS] [ROUNDS]   (defaults 10 and 3; ~10 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
pairs="${1:-10}"; rounds="${2:-3}"
scripts/install-deps
work="$(mktemp -d /var/tmp/logbook-compress.XXXXXX)"
trap 'rm -rf "$work"' EXIT
flags=(-O2 -pthread -ICSources/CLogbook/include -ICSources/CLogbookArchive/include)
make -s -C CSources O="$work/c"  # the one C recipe
sources=("$work/c/liblogbook-archive.a" "$work/c/liblogbook-read.a" "$work/c/liblogbook.a" -luring -lzstd)
cc "${flags[@]}" Benchmarks/Compress/compress_bench.c "${sources[@]}" -o "$work/compress_bench"
cc "${flags[@]}" Benchmarks/Archive/ab_bench.c "${sources[@]}" -o "$work/ab_bench"
swift build -c release --product logbook-demo > /dev/null
(cd Benchmarks && swift build -c release --product ReadBench > /dev/null)
bin="$(swift build -c release --show-bin-path)"
bench="$(cd Benchmarks && swift build -c release --show-bin-path)/ReadBench"

echo "## 1. Ratio and rate per level (medians of $rounds rounds, range in brackets)"
"$bin/logbook-demo" "$work/demo.logbook" > /dev/null 2>&1 || true   # dies by SIGKILL on purpose
"$bench" "$work/mixed.logbook" 0 --write-mixed 400000 --c-only > /dev/null 2>&1
"$bench" "$work/bench.logbook" 0 --write-archived 2000000 --plain --c-only > /dev/null 2>&1
for set in demo mixed bench; do
  echo
  case $set in
    demo) echo "The demo's archive files (\`logbook-demo\`: 4 threads, 1 s):" ;;
    mixed) echo "A server mix (400,000 records: routes, request ids, users, statuses, metadata, 2% warnings with an error):" ;;
    bench) echo "The read benchmark's records (2,000,000 \"request {} took {} ms ok={}\", 64 MiB files):" ;;
  esac
  echo
  "$work/compress_bench" "$work/$set.logbook/archive" "$rounds" -1 1 3 6 9 2>&1
done

echo
echo "## 2. The logging thread's cost, and the sustained rate ($pairs interleaved rounds)"
for _ in $(seq "$pairs"); do
  echo "hot-off $("$work/ab_bench" "$work" 0 4000000 256)"
  echo "hot-on $("$work/ab_bench" "$work" 1 4000000 256 0)"
  echo "hot-zstd $("$work/ab_bench" "$work" 1 4000000 256 1)"
  echo "sustained-on $("$work/ab_bench" "$work" 1 10000000 16 0)"
  echo "sustained-zstd $("$work/ab_bench" "$work" 1 10000000 16 1)"
done > "$work/results"
python3 - "$work/results" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, ns, mbs, faults, switches = line.split()
    d[name].append((float(ns), float(mbs), int(faults), int(switches)))
names = {"hot-off": "4 M records into a 256 MiB ring, no archiver",
         "hot-on": "the same, archiver on, files not compressed",
         "hot-zstd": "the same, archiver on, files compressed (level 1)",
         "sustained-on": "10 M records through a 16 MiB lossless ring, not compressed",
         "sustained-zstd": "10 M records through a 16 MiB lossless ring, compressed"}
print("| scenario | ns/record: median (range) | MB/s | logging thread: minor faults, involuntary switches (medians) |")
print("|---|---:|---:|---:|")
for key, label in names.items():
    ns = [x[0] for x in d[key]]; mb = [x[1] for x in d[key]]
    print(f"| {label} | {statistics.median(ns):.2f} ({min(ns):.2f}–{max(ns):.2f}) | {statistics.median(mb):.0f} | "
          f"{statistics.median([x[2] for x in d[key]]):.0f}, {statistics.median([x[3] for x in d[key]]):.0f} |")
print()
for on in ["hot-on", "hot-zstd"]:
    r = [b[0] / a[0] for a, b in zip(d["hot-off"], d[on])]
    print(f"- {names[on]} / no archiver, paired time ratio: median {statistics.median(r):.3f} (range {min(r):.3f}–{max(r):.3f})")
r = [b[0] / a[0] for a, b in zip(d["sustained-on"], d["sustained-zstd"])]
print(f"- sustained, compressed / not compressed, paired time ratio: median {statistics.median(r):.3f} (range {min(r):.3f}–{max(r):.3f})")
PY

echo
echo "## 3. Reading compressed archive files against the same records uncompressed ($pairs interleaved rounds)"
echo
"$bench" "$work/zstd.logbook" 0 --write-archived 4000000 --c-only > /dev/null 2>&1
"$bench" "$work/plain.logbook" 0 --write-archived 4000000 --plain --c-only > /dev/null 2>&1
du -s --apparent-size --block-size=1M "$work/plain.logbook/archive" "$work/zstd.logbook/archive" | awk '{print "- " $2 ": " $1 " MiB"}'
sync; sleep 3  # the writeback of what was just written must not compete with the reads
for _ in $(seq "$pairs"); do
  for kind in plain zstd; do
    echo "$kind $("$bench" "$work/$kind.logbook" 1 --c-only 2>/dev/null | awk -F'|' '/lb_reader_stream/ {print $3}')"
  done
done > "$work/reads"
python3 - "$work/reads" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kind, rate, _ = line.split()
    d[kind].append(float(rate))
print()
print("| C reader, lb_reader_stream (records/s) | median | range |")
print("|---|---:|---:|")
for kind in ["plain", "zstd"]:
    print(f"| {kind} | {statistics.median(d[kind]):.1f} M | {min(d[kind]):.1f}–{max(d[kind]):.1f} M |")
r = [z / p for p, z in zip(d["plain"], d["zstd"])]
print(f"\nCompressed / plain, paired: median {statistics.median(r):.2f} (range {min(r):.2f}–{max(r):.2f}); target ≥ 0.80.")
PY
