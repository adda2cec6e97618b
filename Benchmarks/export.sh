#!/usr/bin/env bash
# Export, measured in one run, against a receiver that is not the bottleneck
# (Benchmarks/Upload/sink.c: C, bodies read and discarded, TCP_NODELAY):
#   1. in process: records/s read, rendered as `show --json` lines, encoded as OTLP JSON and
#      protobuf and as syslog frames, and exported end to end (ExportBench);
#   2. backlogs of RECORDS records (4 threads) of three shapes (BACKLOGS: short texts with numbers;
#      string-heavy and 11 metadata values, lossless and archived) through the CLI, rounds
#      interleaved: `logbook show --json > /dev/null` beside `logbook export --otlp` in protobuf
#      (and, for the first, with gzip, with zstd, and JSON), each with its peak RSS;
#   3. `logbook export --follow` behind a live writer of 100,000 records/s for 5 s: the time from
#      each record's timestamp to its arrival at the receiver, p50 and p99 (follow_latency.py);
#   4. syslog over RELP beside rsyslog forwarding the same records (Benchmarks/syslog.sh), when
#      rsyslog is installed.
# Medians of the rounds with their spread.
# Usage: Benchmarks/export.sh [RECORDS] [ROUNDS]   (default 2000000, 3; about 4 minutes)
set -euo pipefail
cd "$(dirname "$0")"
records="${1:-2000000}"
rounds="${2:-3}"
work="$(mktemp -d /var/tmp/logbook-export-bench.XXXXXX)"
cleanup() { exec 3>&- 4>&- 2>/dev/null || true; pkill -P $$ 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
python3 -c "import opentelemetry.proto" 2>/dev/null || { echo "export.sh needs opentelemetry-proto (pip install opentelemetry-proto protobuf)" >&2; exit 1; }
cc -O2 -pthread Upload/sink.c -o "$work/sink"
swift build -c release --product ExportBench > /dev/null
(cd .. && swift build -c release --product logbook > /dev/null)
bench="$(swift build -c release --show-bin-path)/ExportBench"
logbook="$(cd .. && swift build -c release --show-bin-path)/logbook"

# The receiver lives until this script's end (its stdin is a FIFO held open here).
mkfifo "$work/lifeline"
exec 3<>"$work/lifeline"
"$work/sink" 0 < "$work/lifeline" > "$work/port" 2>/dev/null 3>&- &
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port="$(cat "$work/port")"
url="http://127.0.0.1:$port/v1/logs"

echo "## 1. In process (200,000 records)"
echo
"$bench" 200000 "$rounds" "$port" 2>/dev/null

echo
echo "## 2. A backlog of $records records, through the CLI"
echo
# Backlogs: SHAPE[:archived] (ExportBench write: numbers, strings (about 400 bytes of string
# arguments a record), metadata (11 metadata values); archived: a lossless 64 MiB ring through the
# archiver, so most records are read from zstd archive files). Every row for the first backlog,
# `show --json` and protobuf export for the others.
backlogs="${BACKLOGS:-numbers strings:archived metadata:archived}"
rows=("logbook show --json > /dev/null" "logbook export --otlp (protobuf)" "logbook export --otlp --gzip"
      "logbook export --otlp --zstd" "logbook export --otlp --encoding json")
run_row() {
  rm -rf "$work/cursors"
  case "$1" in
    0) "$logbook" show --json "$source" > /dev/null ;;
    1) "$logbook" export --otlp "$url" --cursors "$work/cursors" "$source" > "$work/out" ;;
    2) "$logbook" export --otlp "$url" --gzip --cursors "$work/cursors" "$source" > "$work/out" ;;
    3) "$logbook" export --otlp "$url" --zstd --cursors "$work/cursors" "$source" > "$work/out" ;;
    4) "$logbook" export --otlp "$url" --encoding json --cursors "$work/cursors" "$source" > "$work/out" ;;
  esac
  if [ "$1" != 0 ] && ! grep -q "exported $records records" "$work/out"; then
    echo "row $1 did not export every record: $(cat "$work/out")" >&2
    exit 1
  fi
}
first=1
for backlog in $backlogs; do
  shape="${backlog%%:*}"
  mode=""; [ "$backlog" != "$shape" ] && mode="${backlog#*:}"
  source="$work/backlog-$shape.logbook"
  "$bench" write "$source" "$records" "$shape" $mode
  selected="0 1"; [ "$first" = 1 ] && selected="0 1 2 3 4"
  first=0
  rm -f "$work/times"
  for round in $(seq "$rounds"); do
    for row in $selected; do
      /usr/bin/time -f "%e %M" -o "$work/time" bash -c "$(declare -f run_row); work='$work' logbook='$logbook' url='$url' records='$records' source='$source' run_row $row"
      echo "$row $(cat "$work/time")" >> "$work/times"
    done
  done
  echo "Backlog \`$backlog\` ($(du -sh "$source" | cut -f1) on disk):"
  echo
  echo "| command | records/s (median) | spread | peak RSS (MB, median) | spread |"
  echo "|---|---:|---:|---:|---:|"
  for row in $selected; do
    python3 - "$work/times" "$row" "$records" "${rows[$row]}" <<'PY'
import sys
times, row, records, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
runs = [line.split() for line in open(times) if line.split()[0] == row]
rates = sorted(records / float(seconds) for _, seconds, _ in runs)
rss = sorted(int(kilobytes) / 1024 for _, _, kilobytes in runs)
print(f"| {name} | {rates[len(rates) // 2]:.0f} | {rates[0]:.0f}–{rates[-1]:.0f} | {rss[len(rss) // 2]:.1f} | {rss[0]:.1f}–{rss[-1]:.1f} |")
PY
  done
  echo
  rm -rf "$source"
done

echo
echo "## 3. Follow latency: a live writer of 100,000 records/s for 5 s, \`logbook export --follow\` (default interval 0.5 s)"
echo
"$work/sink" 0 "$work/saved" < "$work/lifeline" > "$work/port2" 2>/dev/null 3>&- &
for _ in $(seq 50); do [ -s "$work/port2" ] && break; sleep 0.1; done
mkfifo "$work/go"
exec 4<>"$work/go"
"$bench" live "$work/live.logbook" 100000 5 < "$work/go" > "$work/writer" 3>&- 4>&- &
for _ in $(seq 100); do grep -q ready "$work/writer" 2>/dev/null && break; sleep 0.1; done
"$logbook" export --follow --otlp "http://127.0.0.1:$(cat "$work/port2")/v1/logs" --cursors "$work/follow-cursors" \
  "$work/live.logbook" > "$work/follow.out" 2>&1 3>&- 4>&- &
follower=$!
sleep 1  # the follower's first pass has read the empty bundle
echo go >&4
while [ "$(wc -l < "$work/writer")" -lt 2 ]; do sleep 0.2; done
read -r written held < <(tail -1 "$work/writer")
# The follower has caught up when the receiver's file stops growing for 2 s (passes are 0.5 s apart).
previous=-1
while [ "$(stat -c %s "$work/saved")" != "$previous" ]; do previous=$(stat -c %s "$work/saved"); sleep 2; done
kill -TERM "$follower"; wait "$follower" || true
echo "the writer held $held records/s; $(tail -1 "$work/follow.out")"
python3 follow_latency.py "$work/saved" "$written"

if command -v rsyslogd > /dev/null && [ -x ./syslog.sh ]; then
  echo
  echo "## 4. Syslog over RELP beside rsyslog"
  echo
  ./syslog.sh 100000 "$rounds" || [ $? -eq 77 ]
fi
