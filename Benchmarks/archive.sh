#!/usr/bin/env bash
# The archiver's benchmark: logging cost with archiving off and on, sustained lossless MB/s with
# io_uring and with pwritev, and dd to the same directory for comparison. Prints a Markdown table
# (quoted in docs/BENCHMARKS.md). Usage: Benchmarks/archive.sh [DIR] (default: a directory under
# /var/tmp, on the root disk).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-/var/tmp/logbook-archive-bench}"
mkdir -p "$dir"
scripts/install-deps
out="$(mktemp -d)"
trap 'rm -rf "$out" "$dir/bench.logbook" "$dir/dd.bin"' EXIT
make -s -C CSources O="$out/c"  # the one C recipe
cc -O2 -pthread -ICSources/CLogbook/include -ICSources/CLogbookArchive/include \
  Benchmarks/Archive/archive_bench.c "$out/c/liblogbook-archive.a" "$out/c/liblogbook-read.a" "$out/c/liblogbook.a" -luring -lzstd -o "$out/archive_bench"
echo "| scenario | result | vs off |"
echo "|---|---:|---:|"
sync
"$out/archive_bench" "$dir" io_uring
"$out/archive_bench" "$dir" pwrite | tail -n 1
dd_rate() {  # MB/s of dd writing 480 MB in 64 KiB blocks; $1: extra dd flags
  rm -f "$dir/dd.bin"
  sync  # start without the dirty pages of earlier runs (writeback throttling skews dd)
  dd if=/dev/zero of="$dir/dd.bin" bs=64K count=7324 $1 2>&1 | sed -n 's/.* s, \(.*\)/\1/p'
}
echo "| dd 480 MB in 64 KiB blocks, then fsync (the archiver fsyncs every file it rolls) | $(dd_rate conv=fsync) | |"
