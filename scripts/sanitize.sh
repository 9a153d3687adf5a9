#!/usr/bin/env bash
# Builds the host test suite (no MPI, no CUDA) under ASan+UBSan and under TSan and runs ctest
# for each. Tests labelled `large` (several GiB, counts above 2^31) are left out: under the
# sanitizers they would need several times their memory (shadow memory) and run time.
# The test that instantiates every static layout pair is left out (its plans and runs are
# the same code the other host tests cover; under the sanitizers it costs minutes to build).
# Usage: scripts/sanitize.sh [asan|tsan]... (default: both)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${SHARDCAST_JOBS:-2}"
kinds=("$@"); [[ ${#kinds[@]} -eq 0 ]] && kinds=(asan tsan)
for kind in "${kinds[@]}"; do
  case "$kind" in
    asan) flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g" ;;
    tsan) flags="-fsanitize=thread -O1 -g" ;;
    *) echo "sanitize: unknown kind '$kind' (asan or tsan)"; exit 2 ;;
  esac
  dir="$root/build-$kind"
  cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug \
    -DSHARDCAST_ENABLE_CUDA=OFF -DSHARDCAST_ENABLE_MPI=OFF -DSHARDCAST_BUILD_BENCH=OFF -DSHARDCAST_BUILD_EXAMPLES=OFF -DSHARDCAST_TEST_SANITIZERS=OFF -DSHARDCAST_TEST_STATIC_PAIRS=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$dir" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" -LE "gpu|mpi|compile_fail|packaging|headers|bench|large"
done
