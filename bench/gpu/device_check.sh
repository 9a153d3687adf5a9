#!/usr/bin/env bash
# Everything GPU-side in one go, on a machine with a CUDA device: configure, build the
# gpu-labelled tests and the device benchmarks, run the tests (ctest -L gpu), the kernel
# benchmarks (bench_kernels at 256 and 512 MiB) and shardcast-bench on the device backends
# (p2p with 2 and 4 ranks on GPU 0, nccl with 1 rank; 1 MiB to 256 MiB, and all_reduce from
# 8 B to 1 MiB for latency; three whole redistributes on 4 p2p ranks), then, with what is
# left of the time, the kernel and p2p tests under compute-sanitizer's memcheck.
#
#   bench/gpu/device_check.sh OUTDIR [DOCTEST_INCLUDE_DIR]
#
# OUTDIR gets few files, for machines that return only a handful: summary.log (PASS / FAIL /
# TIMEOUT / SKIPPED per step, and the NCCL the build found), machine.log, ctest.log,
# bench_kernels.log, and logs.tgz with every step's log and JSON rows (made on every exit).
# The step logs are written to SHARDCAST_CHECK_LOGS (default BUILD/check-logs).
# DOCTEST_INCLUDE_DIR holds doctest/doctest.h, for machines without the doctest package
# (default: the first of third_party, .carry/doctest that has it; else the package is used).
# NCCL: the toolkit's or a system one; else, when Python has the nvidia-nccl package, that
# one (SHARDCAST_NCCL_ROOT overrides both).
# The whole run stays within SHARDCAST_CHECK_BUDGET_S seconds (default 480): every step gets
# what is left, and a step that runs out is stopped and reported, so the logs always come back.
# A build error stops only what depends on it: the build goes on with the other targets
# (ninja -k 0) and every step still runs.
# SHARDCAST_PREBUILT=DIR: DIR holds the programs already built elsewhere with the same
# toolkit (sm_90), side by side: the gpu test binaries, cudahost_index_math_test,
# bench_kernels and shardcast-bench (bench/gpu/prebuild.sh makes such a folder). Configure
# and build are skipped and each test binary runs as a step of its own (tests.log holds their
# output); the CUDA runtime, cuBLAS and NCCL are looked up in the toolkit and in Python's
# nvidia-* packages. If a program cannot be loaded (ldd: not found), the script builds here.
# Exit status: 0 when every step passed, 1 otherwise (see OUTDIR/summary.log).
set -uo pipefail
out=${1:?usage: device_check.sh OUTDIR [DOCTEST_INCLUDE_DIR]}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
doctest=${2:-}
if [[ -z "$doctest" ]]; then
  for d in "$root/third_party" "$root/.carry/doctest"; do
    [[ -f "$d/doctest/doctest.h" ]] && doctest=$d && break
  done
fi
build=${SHARDCAST_BUILD_DIR:-$root/build-gpu}
logs=${SHARDCAST_CHECK_LOGS:-$build/check-logs}
mkdir -p "$logs"
budget=${SHARDCAST_CHECK_BUDGET_S:-480}
deadline=$((SECONDS + budget))
summary="$out/summary.log"
: > "$summary"
rc=0
pack_logs() {
  for f in ctest.log tests.log bench_kernels.log; do [[ -f "$logs/$f" ]] && cp "$logs/$f" "$out/"; done
  tar czf "$out/logs.tgz" -C "$logs" . 2>/dev/null
}
trap pack_logs EXIT

# step NAME LOG MAX_SECONDS COMMAND...: runs COMMAND with at most MAX_SECONDS and what is left
# of the budget, logs to LOGS/LOG, records PASS/FAIL/TIMEOUT/SKIPPED in the summary.
step() {
  local name=$1 log=$2 max=$3
  shift 3
  local left=$((deadline - SECONDS))
  if ((left < 5)); then
    echo "SKIPPED  $name (budget of ${budget}s spent)" | tee -a "$summary"
    rc=1
    return 1
  fi
  local limit=$((max < left ? max : left))
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$logs/$log" 2>&1
  local status=$?
  local took=$((SECONDS - t0))
  if ((status == 0)); then
    echo "PASS     $name (${took}s, $log)" | tee -a "$summary"
  elif ((status == 124 || status == 137)); then
    echo "TIMEOUT  $name after ${limit}s ($log)" | tee -a "$summary"
    rc=1
  else
    echo "FAIL     $name (exit $status, ${took}s, $log)" | tee -a "$summary"
    rc=1
  fi
  return $status
}

{ date -u; nvidia-smi || true; nvcc --version || true; nproc; } > "$out/machine.log" 2>&1

source "$root/bench/gpu/programs.sh"  # gpu_tests, gpu_tools

prebuilt=${SHARDCAST_PREBUILT:-}
if [[ -n "$prebuilt" ]]; then
  prebuilt=$(cd "$prebuilt" && pwd)
  # Python's nvidia-* packages keep their libraries in nvidia/<name>/lib.
  pylibs=$(python3 -c 'import glob, os, nvidia; print(":".join(d for p in nvidia.__path__ for d in sorted(glob.glob(os.path.join(p, "*", "lib")))))' 2>/dev/null || true)
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:/usr/local/cuda/lib${pylibs:+:$pylibs}"
  missing=""
  for f in "$prebuilt"/*; do
    [[ -f "$f" && -x "$f" ]] || continue
    m=$(ldd "$f" 2>&1 | grep "not found" || true)
    [[ -n "$m" ]] && missing+="$(basename "$f"): $m"$'\n'
  done
  if [[ -n "$missing" ]]; then
    printf 'prebuilt programs cannot be loaded here, building instead:\n%s' "$missing" | tee -a "$summary"
    prebuilt=""
  else
    echo "prebuilt programs from $prebuilt; libnccl: $(ldd "$prebuilt/cuda_nccl_test" 2>/dev/null | awk '/libnccl/ {print $3}')" | tee -a "$summary"
  fi
fi

if [[ -n "$prebuilt" ]]; then
  bin_index_math=$prebuilt/cudahost_index_math_test
  bin_tests=$prebuilt
  bin_kernels=$prebuilt/bench_kernels
  tool=$prebuilt/shardcast-bench
  : > "$logs/tests.log"
  for t in "${gpu_tests[@]}"; do
    [[ -x "$prebuilt/$t" ]] || { echo "SKIPPED  $t (not in $prebuilt)" | tee -a "$summary"; continue; }
    limit=90
    [[ $t == cuda_differential_test ]] && limit=300  # thousands of whole redistributes
    step "$t" "$t.log" "$limit" "$prebuilt/$t" --duration=true
    grep -q "SKIPPED: no CUDA device" "$logs/$t.log" && echo "  ($t saw no CUDA device: its cases were skipped)" | tee -a "$summary"
    { echo "==== $t"; cat "$logs/$t.log"; } >> "$logs/tests.log"
  done
else
  args=(-G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSHARDCAST_BUILD_EXAMPLES=OFF
        -DSHARDCAST_BUILD_TESTS=ON -DSHARDCAST_BUILD_BENCH=ON)
  [[ -n "$doctest" ]] && args+=(-DSHARDCAST_DOCTEST_INCLUDE_DIR="$doctest")
  nccl_root=${SHARDCAST_NCCL_ROOT:-}
  if [[ -z "$nccl_root" ]] && ! ls /usr/local/cuda/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h >/dev/null 2>&1; then
    nccl_root=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0] if s else "")' 2>/dev/null || true)
  fi
  [[ -n "$nccl_root" ]] && args+=(-DSHARDCAST_NCCL_ROOT="$nccl_root")
  step configure configure.log 120 cmake "${args[@]}" || { cat "$logs/configure.log"; cat "$summary"; exit 1; }
  grep "shardcast: NCCL" "$logs/configure.log" | tee -a "$summary"

  # Every gpu-labelled test that this configuration has must be built, or ctest -L gpu
  # reports it as not run; some exist only when their dependency was found (NCCL; MPI for
  # the bootstrap test test_mpi_nccl).
  targets=("${gpu_tools[@]}")
  help=$(cmake --build "$build" --target help 2>/dev/null)
  for t in "${gpu_tests[@]}" test_mpi_nccl; do
    grep -q "^$t:" <<< "$help" && targets+=("$t")
  done
  step build build.log 300 cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" -- -k 0 || tail -n 40 "$logs/build.log"

  step "ctest -L gpu" ctest.log 150 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120
  bin_index_math=$build/tests/cudahost/cudahost_index_math_test
  bin_tests=$build/tests/cuda
  bin_kernels=$build/bench/kernels/bench_kernels
  tool="$build/bench/tool/shardcast-bench"
fi
step "index math (host)" index_math.log 30 "$bin_index_math"
step "bench_kernels 256 512 MiB" bench_kernels.log 90 "$bin_kernels" 256 512

# 20 timed iterations per size as 5 batches of 4, reported as the median batch: one
# iteration stalled by milliseconds no longer sways a row (docs/bench/gpu.md, the sweep).
sweep=(-b 1M -e 256M -f 16 -n 4 --batches 5 -w 5 -c 1)
for coll in all_reduce reduce_scatter all_gather all_to_all broadcast; do
  for ranks in 2 4; do
    step "shardcast-bench $coll p2p x$ranks" "bench_p2p_${coll}_${ranks}.log" 60 \
      "$tool" "$coll" --backend p2p --ranks "$ranks" "${sweep[@]}" --json "$logs/bench_p2p_${coll}_${ranks}.json"
  done
done
# Small messages (8 B to 1 MiB), where time is latency: p2p with 2 and 4 ranks, nccl with 1.
small=(-b 8 -e 1M -f 32 -n 200 -w 20 -c 1)
for ranks in 2 4; do
  step "shardcast-bench all_reduce p2p x$ranks small" "bench_p2p_all_reduce_small_${ranks}.log" 45 \
    "$tool" all_reduce --backend p2p --ranks "$ranks" "${small[@]}" --json "$logs/bench_p2p_all_reduce_small_${ranks}.json"
done
step "shardcast-bench all_reduce nccl x1 small" bench_nccl_all_reduce_small_1.log 45 \
  "$tool" all_reduce --backend nccl --ranks 1 "${small[@]}" --json "$logs/bench_nccl_all_reduce_small_1.json"
step "shardcast-bench all_reduce nccl x1" bench_nccl_all_reduce_1.log 60 \
  "$tool" all_reduce --backend nccl --ranks 1 "${sweep[@]}" --json "$logs/bench_nccl_all_reduce_1.json"
# Whole redistributes (transition mode) of a 256 MiB float tensor on 4 p2p ranks.
step "shardcast-bench redistribute p2p S(0),R -> R,S(1) 2x2" bench_p2p_redistribute_slice_gather.log 60 \
  "$tool" redistribute --backend p2p --from "S(0),R" --to "R,S(1)" --mesh 2x2 --extents 8192x8192 -n 10 -w 2 -c 1 \
  --json "$logs/bench_p2p_redistribute_slice_gather.json"
step "shardcast-bench redistribute p2p S(0) -> S(1) x4" bench_p2p_redistribute_all_to_all.log 60 \
  "$tool" redistribute --backend p2p --from "S(0)" --to "S(1)" --mesh 4 --extents 8192x8192 -n 10 -w 2 -c 1 \
  --json "$logs/bench_p2p_redistribute_all_to_all.json"
step "shardcast-bench redistribute p2p P(sum) -> S(1) x4" bench_p2p_redistribute_reduce_scatter.log 60 \
  "$tool" redistribute --backend p2p --from "P(sum)" --to "S(1)" --mesh 4 --extents 8192x8192 -n 10 -w 2 -c 1 \
  --json "$logs/bench_p2p_redistribute_reduce_scatter.json"

# Last, with what is left of the budget: the kernel and p2p tests under compute-sanitizer's
# memcheck (out-of-bounds and misaligned device accesses), where the machine has it. CUDA
# API errors are not reported: some tests provoke them on purpose (an invalid device), and
# NCCL's initialisation probes kernels that the library does not build for every device.
if command -v compute-sanitizer >/dev/null 2>&1; then
  for t in cuda_kernels_test cuda_reduce_test cuda_elementwise_test cuda_p2p_test; do
    [[ -x "$bin_tests/$t" ]] && step "memcheck $t" "memcheck_$t.log" 90 \
      compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 "$bin_tests/$t"
  done
fi

echo "---- summary ($((SECONDS))s of ${budget}s)"
cat "$summary"
echo "---- tests"
tail -n 15 "$logs/ctest.log" 2>/dev/null
grep -h -E "^\[doctest\] (test cases|assertions)|^==== " "$logs/tests.log" 2>/dev/null
echo "---- bench_kernels"
cat "$logs/bench_kernels.log" 2>/dev/null
for f in "$logs"/memcheck_*.log; do [[ -f "$f" ]] && { echo "---- $(basename "$f")"; tail -n 4 "$f"; }; done
exit $rc
