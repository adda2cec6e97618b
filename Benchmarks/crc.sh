#!/usr/bin/env bash
# What a CRC-32C of a chunk costs on this machine (the archiver computes one per archived chunk;
# docs/FORMAT.md says why ring chunks carry none). Prints Markdown rows. Usage: Benchmarks/crc.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
make -s -C CSources O="$out/c"  # the one C recipe
cc -O2 -pthread -ICSources/CLogbook/include Benchmarks/Crc/crc_bench.c "$out/c/liblogbook-read.a" "$out/c/liblogbook.a" -lzstd -o "$out/crc_bench"
"$out/crc_bench"
