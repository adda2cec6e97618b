#!/usr/bin/env bash
# Runs every benchmark suite in one go (release build) and writes ../docs/BENCHMARKS.md: each
# scenario's time per message, peers' ratios to Logbook from the same run, the machine, and the
# targets, and checks the committed thresholds (thresholds.json): exit 1 on a regression.
# Takes ~15 minutes:   Benchmarks/run.sh
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -f /usr/include/sqlite3.h ]; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq libsqlite3-dev
  else sudo apt-get update -qq && sudo apt-get install -y -qq libsqlite3-dev; fi
fi

# The pure-Swift path must write the C core's bytes, or comparing them means nothing.
swift test 2>&1 | tail -n 2

out=.build/benchmark-results   # the raw tables, kept for report.py to be re-run by hand
mkdir -p "$out"
trap 'rm -rf /tmp/logbook-bench-* /tmp/logbook-peers-* /tmp/logbook-reader-bench-*' EXIT
swift package --allow-writing-to-package-directory benchmark --no-progress --format markdown \
  --path stdout > "$out/results.md"

# The report is written either way; a regression against thresholds.json makes the script fail.
status=0
# The hand-kept notes at the end of the file (measured by their own commands) survive the rewrite.
notes="$(sed -n '/^## Notes moved from the README/,$p' ../docs/BENCHMARKS.md 2>/dev/null || true)"
python3 report.py "$out/results.md" thresholds.json > ../docs/BENCHMARKS.md || status=$?
{
  echo
  echo "## Archiver"
  echo
  echo "From \`Benchmarks/archive.sh\` (median of 5 runs each; target: logging within 10% of archiving off)."
  echo
  ./archive.sh
  echo
  echo "## Message cache"
  echo
  echo "From \`Benchmarks/cache.sh\` (its targets below the table)."
  echo
  ./cache.sh
  echo
  echo "## Export"
  echo
  echo "From \`Benchmarks/export.sh 2000000 3\` (rounds interleaved; a C receiver on 127.0.0.1 that discards; rsyslog for RELP)."
  echo
  ./export.sh 2000000 3 2>/dev/null
  echo
  echo "## Reading, statistics and the tools people use otherwise"
  echo
  echo "From \`Benchmarks/read.sh 5\` (its targets below the tables)."
  echo
  ./read.sh 5
  echo
  echo "## Compressed archives"
  echo
  echo "From \`Benchmarks/compress.sh\` (ratio and rate per level, the logging thread's cost, reading)."
  echo
  ./compress.sh 10 3
  if [ -n "$notes" ]; then echo; echo "$notes"; fi
} >> ../docs/BENCHMARKS.md
echo "wrote docs/BENCHMARKS.md"
exit $status
