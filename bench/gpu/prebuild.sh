#!/usr/bin/env bash
# Builds the programs bench/gpu/device_check.sh runs, on a machine that has the CUDA toolkit
# (same nvcc as the GPU machine) but needs no GPU, and puts them side by side in DIR for
#   SHARDCAST_PREBUILT=DIR bench/gpu/device_check.sh OUTDIR
# so that the GPU machine spends its time running them rather than building them.
#
#   bench/gpu/prebuild.sh [DIR]        (default: .carry/bin, which git ignores)
#
# MPI is left out (SHARDCAST_ENABLE_MPI=OFF): a GPU machine without OpenMPI can then load
# shardcast-bench. The build folder is SHARDCAST_BUILD_DIR (default build/gpu-pre).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/.carry/bin}
build=${SHARDCAST_BUILD_DIR:-$root/build/gpu-pre}
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDCAST_ENABLE_MPI=OFF \
      -DSHARDCAST_BUILD_EXAMPLES=OFF -DSHARDCAST_BUILD_TESTS=ON -DSHARDCAST_BUILD_BENCH=ON > /dev/null
source "$root/bench/gpu/programs.sh"  # gpu_tests, gpu_tools
targets=("${gpu_tools[@]}")
help=$(cmake --build "$build" --target help)
for t in "${gpu_tests[@]}"; do
  grep -q "^$t:" <<< "$help" && targets+=("$t")
done
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
mkdir -p "$dir"
for t in "${targets[@]}"; do
  cp "$(find "$build" -name "$t" -type f -perm -u+x | head -n 1)" "$dir/"
done
ls -l "$dir"
