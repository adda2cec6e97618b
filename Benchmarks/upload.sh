#!/usr/bin/env bash
# The uploader's benchmark: 16 MiB files over loopback to a python3 server that discards the
# body (Tests/Servers/upload_server.py, /discard), `logbook upload` (release build: hash, fsynced
# copy into the spool, fsynced state, PUT, removal) against `curl -T` of the same files to the same server,
# interleaved in one run. Prints MB/s per run and the median with its spread.
# Usage: Benchmarks/upload.sh [FILES] [RUNS] (default 8 files of 16 MiB, 7 runs each).
set -euo pipefail
cd "$(dirname "$0")/.."
files="${1:-8}"
runs="${2:-7}"
swift build -c release --product logbook > /dev/null
logbook="$(swift build -c release --show-bin-path)/logbook"
work="$(mktemp -d /var/tmp/logbook-upload-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The server's lifeline: it exits when its stdin ends, that is when this script (fd 3) does.
mkfifo "$work/lifeline"
exec 3<>"$work/lifeline"
python3 Tests/Servers/upload_server.py 0 "$work/requests.jsonl" < "$work/lifeline" > "$work/port" 2>/dev/null 3>&- &
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port="$(cat "$work/port")"
for i in $(seq "$files"); do head -c $((16 << 20)) /dev/urandom > "$work/file-$i.bin"; done
bytes=$((files * (16 << 20)))
rate() { python3 -c "import sys; print(f'{$bytes / float(sys.argv[1]) / 1e6:.0f}')" "$1"; }
seconds() { local start end; start=$(date +%s.%N); "$@" > /dev/null; end=$(date +%s.%N); python3 -c "print($end - $start)"; }
logbook_rates=(); curl_rates=()
for run in $(seq "$runs"); do
  rm -rf "$work/spool"
  t=$(seconds "$logbook" upload --again --spool "$work/spool" --to "http://127.0.0.1:$port/discard/{name}" "$work"/file-*.bin)
  logbook_rates+=("$(rate "$t")")
  t=$(seconds bash -c "for f in \"$work\"/file-*.bin; do curl -sS -f -T \"\$f\" -o /dev/null \"http://127.0.0.1:$port/discard/\$(basename \"\$f\")\"; done")
  curl_rates+=("$(rate "$t")")
  echo "run $run: logbook upload ${logbook_rates[-1]} MB/s, curl ${curl_rates[-1]} MB/s" >&2
done
summary() { python3 -c "import statistics,sys; v=sorted(map(float,sys.argv[1:])); print(f'{statistics.median(v):.0f} MB/s (min {v[0]:.0f}, max {v[-1]:.0f})')" "$@"; }
echo "| $files files of 16 MiB over loopback, $runs runs interleaved | median (spread) |"
echo "|---|---:|"
echo "| \`logbook upload\` (hash, fsynced copy into the spool, fsynced state, PUT, 2 at once) | $(summary "${logbook_rates[@]}") |"
echo "| \`curl -T\`, one file after another | $(summary "${curl_rates[@]}") |"
cc -O2 -ICSources/CLogbookUpload/include Benchmarks/Upload/sha256_bench.c CSources/CLogbookUpload/src/sha256.c \
  -o "$work/sha256_bench"
echo
"$work/sha256_bench"
