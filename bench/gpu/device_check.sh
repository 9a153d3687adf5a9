#!/usr/bin/env bash
# Configures, builds and runs the gpu-labelled tests and the kernel benchmarks on a machine
# with a CUDA device, writing every log to OUTDIR.
#   bench/gpu/device_check.sh OUTDIR [DOCTEST_INCLUDE_DIR]
# DOCTEST_INCLUDE_DIR holds doctest/doctest.h, for machines without the doctest package
# (default: the first of third_party, .carry/doctest that has it; else the package is used).
set -uo pipefail
out=${1:?usage: device_check.sh OUTDIR [DOCTEST_INCLUDE_DIR]}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
doctest=${2:-}
if [[ -z "$doctest" ]]; then
  for d in "$root/third_party" "$root/.carry/doctest"; do
    [[ -f "$d/doctest/doctest.h" ]] && doctest=$d && break
  done
fi
build=${SHARDCAST_BUILD_DIR:-$root/build-gpu}
args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDCAST_BUILD_EXAMPLES=OFF)
[[ -n "$doctest" ]] && args+=(-DSHARDCAST_DOCTEST_INCLUDE_DIR="$doctest")
{ date -u; nvidia-smi || true; nvcc --version || true; } > "$out/machine.log" 2>&1
cmake "${args[@]}" > "$out/configure.log" 2>&1 || { echo "configure failed: $out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target cuda_kernels_test cuda_nccl_test cuda_p2p_test bench_kernels \
  > "$out/build.log" 2>&1 || { echo "build failed: $out/build.log"; exit 1; }
rc=0
(cd "$build" && ctest -L gpu --output-on-failure) > "$out/ctest.log" 2>&1 || rc=1
"$build/bench/kernels/bench_kernels" > "$out/bench_kernels.log" 2>&1 || rc=1
tail -n 5 "$out/ctest.log"
cat "$out/bench_kernels.log"
exit $rc
