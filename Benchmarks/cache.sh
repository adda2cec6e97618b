#!/usr/bin/env bash
# The message cache's benchmark: appends of a 100-byte message at each durability
# level beside the reference's pattern and SQLite, and 8 threads sharing syncs; interleaved
# rounds in one run, files on /var/tmp (a disk, not tmpfs). Prints a markdown table and the
# targets. Usage: Benchmarks/cache.sh [ROUNDS] (default 5; ~1 minute).
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -f /usr/include/sqlite3.h ]; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq libsqlite3-dev
  else sudo apt-get update -qq && sudo apt-get install -y -qq libsqlite3-dev; fi
fi
swift build -c release --product CacheBench > /dev/null
"$(swift build -c release --show-bin-path)/CacheBench" "${1:-5}"
