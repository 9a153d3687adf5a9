#!/usr/bin/env bash
# Builds the runtime layout parser fuzzer with clang (libFuzzer + ASan + UBSan) and runs it
# for a short time with the seed corpus in tests/fuzz/corpus. Usage: scripts/fuzz_parser.sh [seconds]
set -euo pipefail
secs="${1:-20}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cxx="${CLANGXX:-$(command -v clang++ || command -v clang++-14 || true)}"
if [[ -z "$cxx" ]]; then echo "fuzz_parser: clang++ not found, skipping"; exit 0; fi
out="$root/build-fuzz"
mkdir -p "$out/corpus"
"$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I "$root/include" -I /usr/local/cuda/include/cccl \
  "$root/tests/fuzz/parse_fuzzer.cpp" -o "$out/parse_fuzzer"
cp -n "$root"/tests/fuzz/corpus/* "$out/corpus/" 2>/dev/null || true
"$out/parse_fuzzer" -max_total_time="$secs" -max_len=128 "$out/corpus" "$root/tests/fuzz/corpus"
