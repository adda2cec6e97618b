#!/usr/bin/env bash
# The uploader's benchmark, over loopback to a receiver that is not the bottleneck (Benchmarks/Upload/
# sink.c: C, a thread per connection, bodies read and discarded). `logbook upload` (release build)
# against the floor of each kind of file, in one run, pairs interleaved; medians with their spread.
#   archive files (keyed by their headers)  vs  `curl -T` of the same files, one after another
#   another file (keyed by its SHA-256)     vs  `sha256sum` then `curl -T` (a content-addressed upload)
# and the peak RSS of `logbook upload` for one large file and for 4 uploads in flight.
# Usage: Benchmarks/upload.sh [RUNS] [MIB]   (default 5 runs; a 2048 MiB file, 1 GB of archives)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
mib="${2:-2048}"
swift build -c release --product logbook > /dev/null
logbook="$(swift build -c release --show-bin-path)/logbook"
work="$(mktemp -d /var/tmp/logbook-upload-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread Benchmarks/Upload/sink.c -o "$work/sink"
make -s -C CSources O="$work/c"  # the one C recipe
cc -O2 -pthread -ICSources/CLogbook/include -ICSources/CLogbookArchive/include Benchmarks/Upload/make_archives.c \
  "$work/c/liblogbook-archive.a" "$work/c/liblogbook-read.a" "$work/c/liblogbook.a" -luring -lzstd -o "$work/make_archives"
# The sink's lifeline: it exits when its stdin ends, that is when this script (fd 3) does.
mkfifo "$work/lifeline"
exec 3<>"$work/lifeline"
"$work/sink" 0 < "$work/lifeline" > "$work/port" 2>/dev/null 3>&- &
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$work/port")/discard"

mkdir -p "$work/lba" "$work/zst" "$work/parallel"
"$work/make_archives" "$work/lba" 1000000000 256 0
"$work/make_archives" "$work/zst" 3000000000 256 1
lba="$work/lba/bench.logbook/archive"
zst="$work/zst/bench.logbook/archive"
head -c $((mib << 20)) /dev/urandom > "$work/file.bin"
for i in 1 2 3 4; do head -c $((mib << 18)) /dev/urandom > "$work/parallel/part-$i.bin"; done
sync
bytes_of() { du -cb "$@" | tail -n 1 | cut -f 1; }
lba_bytes=$(bytes_of "$lba"/*.lba)
zst_bytes=$(bytes_of "$zst"/*.lba.zst)
file_bytes=$(bytes_of "$work/file.bin")

# seconds and peak RSS (KB) of a command
measure() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n 1; }
upload() { rm -rf "$work/spool"; measure "$logbook" upload --again --spool-quota 8192 --spool "$work/spool" --to "$url/{id}" "$@"; }
curl_each() { measure bash -c 'for f in "$@"; do curl -sS -f -T "$f" -o /dev/null "'"$url"'/x"; done' _ "$@"; }
hash_then_curl() { measure bash -c 'sha256sum "$1" > /dev/null && curl -sS -f -T "$1" -o /dev/null "'"$url"'/x"' _ "$1"; }

declare -A results
add() { results["$1"]+="$2 "; }
for run in $(seq "$runs"); do
  read -r t m <<< "$(upload "$lba")";                      add lba_logbook "$t"; add lba_rss "$m"
  read -r t _ <<< "$(curl_each "$lba"/*.lba)";             add lba_curl "$t"
  read -r t _ <<< "$(upload "$zst")";                      add zst_logbook "$t"
  read -r t _ <<< "$(curl_each "$zst"/*.lba.zst)";         add zst_curl "$t"
  read -r t m <<< "$(upload --link "$work/file.bin")";     add link_logbook "$t"; add link_rss "$m"
  read -r t _ <<< "$(hash_then_curl "$work/file.bin")";    add floor "$t"
  read -r t _ <<< "$(upload "$work/file.bin")";            add copy_logbook "$t"
  read -r t m <<< "$(upload --link --parallel 4 "$work"/parallel/*.bin)"; add parallel_rss "$m"
  echo "run $run of $runs done" >&2
done

summary() {  # median (min–max) of the values, as MB/s of $2 bytes when $2 is given
  python3 - "${2:-}" $1 <<'PY'
import statistics, sys
size = float(sys.argv[1]) if sys.argv[1] else None
values = sorted(float(v) for v in sys.argv[2:])
if size:
    rates = sorted(size / v / 1e6 for v in values)
    print(f"{statistics.median(rates):.0f} MB/s ({rates[0]:.0f}–{rates[-1]:.0f})")
else:
    print(f"{statistics.median(values) / 1024:.0f} MB ({values[0] / 1024:.0f}–{values[-1] / 1024:.0f})")
PY
}
ratio() {  # the median of the pairwise ratios floor-time / logbook-time
  python3 - "$1" "$2" <<'PY'
import statistics, sys
a = [float(v) for v in sys.argv[1].split()]; b = [float(v) for v in sys.argv[2].split()]
r = sorted(y / x for x, y in zip(a, b))
print(f"{statistics.median(r):.2f}× ({r[0]:.2f}–{r[-1]:.2f})")
PY
}
echo "| over loopback to a C sink, $runs runs interleaved | logbook upload | the floor | logbook / floor |"
echo "|---|---:|---:|---:|"
echo "| $((lba_bytes / 1000000)) MB of .lba archive files vs curl -T | $(summary "${results[lba_logbook]}" "$lba_bytes") | $(summary "${results[lba_curl]}" "$lba_bytes") | $(ratio "${results[lba_logbook]}" "${results[lba_curl]}") |"
echo "| $((zst_bytes / 1000000)) MB of .lba.zst archive files vs curl -T | $(summary "${results[zst_logbook]}" "$zst_bytes") | $(summary "${results[zst_curl]}" "$zst_bytes") | $(ratio "${results[zst_logbook]}" "${results[zst_curl]}") |"
echo "| a $mib MiB file, --link, vs sha256sum then curl -T | $(summary "${results[link_logbook]}" "$file_bytes") | $(summary "${results[floor]}" "$file_bytes") | $(ratio "${results[link_logbook]}" "${results[floor]}") |"
echo "| the same file copied into the spool (the default: fsynced) | $(summary "${results[copy_logbook]}" "$file_bytes") | | $(ratio "${results[copy_logbook]}" "${results[floor]}") |"
echo
echo "| peak RSS of logbook upload | median (min–max) |"
echo "|---|---:|"
echo "| 1 GB of .lba files | $(summary "${results[lba_rss]}") |"
echo "| one $mib MiB file | $(summary "${results[link_rss]}") |"
echo "| 4 files of $((mib / 4)) MiB, 4 in flight (--parallel 4) | $(summary "${results[parallel_rss]}") |"
