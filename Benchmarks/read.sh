#!/usr/bin/env bash
# The read side in records/s: the C reader (streaming and holding), Swift streaming,
# `logbook show` (text and --json), `logbook stats`, beside `wc -l` and `jq -c .` over the same
# records as JSON lines; then the C reader over a 256 MiB archived bundle, and with --big the peak
# RSS of show/stats/verify over 1 GiB of archive files. Medians of interleaved rounds with spread.
# Usage: Benchmarks/read.sh [ROUNDS] [--big]     (default 5 rounds; ~3 minutes, --big ~6 more)
set -euo pipefail
cd "$(dirname "$0")"
rounds="${1:-5}"
work="$(mktemp -d /var/tmp/logbook-read-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
command -v jq >/dev/null || { echo "read.sh needs jq (apt-get install jq)" >&2; exit 1; }
swift build -c release --product ReadBench > /dev/null
(cd .. && swift build -c release --product logbook > /dev/null)
bench="$(swift build -c release --show-bin-path)/ReadBench"
logbook="$(cd .. && swift build -c release --show-bin-path)/logbook"

echo "1,000,000 records (\"request {} took {} ms ok={}\", int, double, bool) from two threads, 64 KiB chunks."
echo
"$bench" "$work/one.logbook" "$rounds" --write 1000000 2>/dev/null
"$logbook" show --json "$work/one.logbook" > "$work/lines.jsonl"
records=$(wc -l < "$work/lines.jsonl")

# One command per row, each timed in every round (rounds interleaved), as records/s.
rows=("logbook show > /dev/null" "logbook show --json > /dev/null" "logbook stats > /dev/null"
      "wc -l over the JSON lines" "jq -c . over the JSON lines > /dev/null")
run_row() {
  case "$1" in
    0) "$logbook" show "$work/one.logbook" > /dev/null ;;
    1) "$logbook" show --json "$work/one.logbook" > /dev/null ;;
    2) "$logbook" stats "$work/one.logbook" > /dev/null ;;
    3) wc -l "$work/lines.jsonl" > /dev/null ;;
    4) jq -c . "$work/lines.jsonl" > /dev/null ;;
  esac
}
for round in $(seq "$rounds"); do
  for row in 0 1 2 3 4; do
    start=$(date +%s%N); run_row "$row"; end=$(date +%s%N)
    echo "$row $(( (end - start) ))" >> "$work/times"
  done
done
echo
echo "| command, whole process (records/s) | median | spread over $rounds rounds |"
echo "|---|---:|---:|"
for row in 0 1 2 3 4; do
  awk -v row="$row" -v n="$records" '$1 == row { printf "%.6f\n", n / ($2 / 1e9) / 1e6 }' "$work/times" | sort -n > "$work/rates"
  count=$(wc -l < "$work/rates")
  printf "| %s | %.2f M | %.2f M–%.2f M |\n" "${rows[$row]}" "$(sed -n "$(( (count + 1) / 2 ))p" "$work/rates")" \
    "$(head -n 1 "$work/rates")" "$(tail -n 1 "$work/rates")"
done

echo
echo "A 256 MiB archived bundle: 5,600,000 records through a 16 MiB lossless ring into 64 MiB archive files."
echo
"$bench" "$work/archived.logbook" "$rounds" --write-archived 5600000 --c-only 2>/dev/null
echo
du -sh --apparent-size "$work/archived.logbook/archive" | awk '{print "archive files: " $1}'

if [ "${2:-}" = "--big" ]; then
  echo
  echo "Peak RSS over 1 GiB of archive files (22,400,000 records):"
  echo
  rm -rf "$work/one.logbook" "$work/archived.logbook"
  "$bench" "$work/big.logbook" 1 --write-archived 22400000 --c-only > /dev/null 2>&1
  du -sh --apparent-size "$work/big.logbook/archive" | awk '{print "archive files: " $1}'
  echo
  for command in "show" "show --json" "stats" "verify"; do
    /usr/bin/time -o "$work/rss" -f "- \`logbook $command\`: %M KB peak RSS, %e s" "$logbook" $command "$work/big.logbook" > /dev/null || true
    cat "$work/rss"
  done
fi

echo
echo "Targets: C reader ≥ 40 M records/s (both bundles); Swift streaming ≥ 10 M records/s;"
echo "\`show --json\` ≥ 3 M lines/s and \`show\` ≥ 5 M lines/s to /dev/null; memory bounded by a window."
