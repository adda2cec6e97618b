#!/usr/bin/env bash
# Export throughput: records/s read, rendered as `show --json` lines, encoded as OTLP JSON and
# protobuf, and exported end to end to a receiver that is not the bottleneck (Benchmarks/Upload/
# sink.c: C, bodies read and discarded, TCP_NODELAY), in one run.
# Usage: Benchmarks/export.sh [RECORDS] [ROUNDS]   (default 200000, 3)
set -euo pipefail
cd "$(dirname "$0")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkfifo "$work/lifeline"
exec 3<>"$work/lifeline"
cc -O2 -pthread Upload/sink.c -o "$work/sink"
"$work/sink" 0 < "$work/lifeline" > "$work/port" 2>/dev/null 3>&- &
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
swift build -c release --product ExportBench > /dev/null
"$(swift build -c release --show-bin-path)/ExportBench" "${1:-200000}" "${2:-3}" "$(cat "$work/port")"
