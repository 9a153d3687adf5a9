#!/usr/bin/env bash
# Builds the host test suite (no MPI, no CUDA) under ASan+UBSan and under TSan and runs ctest
# for each. Left out of both:
# - tests labelled `large` (several GiB, counts above 2^31): under the sanitizers they would
#   need several times their memory (shadow memory) and run time;
# - the test that instantiates every static layout pair (its plans and runs are the same
#   code the other host tests cover; under the sanitizers it costs minutes to build);
# - the self-contained-header test (a compile check, nothing runs).
# fuzz_redistribute runs the first 2,500 (ASan) or 1,000 (TSan) of the 10,000 fixed-seed
# cases of the ordinary build. The TSan run also leaves out the tests labelled `unit` and
# `planner`: single-threaded computation (algebra and planning, several minutes under TSan)
# that the ASan+UBSan run covers.
# -Og -g1: these builds are compile-bound; against -O1 -g, the ASan build of the suite took
# 258 s instead of 540 s and its tests 1.4x as long (2-core Zen 3 VM, g++ 12, 2026-12-03). -g1 (line tables) is what
# the sanitizers' stack traces need. CMAKE_CXX_FLAGS_DEBUG is emptied so that the Debug
# configuration's -g does not undo -g1.
# Usage: scripts/sanitize.sh [asan|tsan]... (default: both)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${SHARDCAST_JOBS:-2}"
kinds=("$@"); [[ ${#kinds[@]} -eq 0 ]] && kinds=(asan tsan)
for kind in "${kinds[@]}"; do
  case "$kind" in
    asan) flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -Og -g1"; skip=""; cases=2500 ;;
    tsan) flags="-fsanitize=thread -Og -g1"; skip="|unit|planner"; cases=1000 ;;
    *) echo "sanitize: unknown kind '$kind' (asan or tsan)"; exit 2 ;;
  esac
  dir="$root/build-$kind"
  cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= \
    -DSHARDCAST_ENABLE_CUDA=OFF -DSHARDCAST_ENABLE_MPI=OFF -DSHARDCAST_BUILD_BENCH=OFF -DSHARDCAST_BUILD_EXAMPLES=OFF -DSHARDCAST_TEST_SANITIZERS=OFF -DSHARDCAST_TEST_STATIC_PAIRS=OFF \
    -DSHARDCAST_TEST_HEADERS=OFF -DSHARDCAST_FUZZ_CASES=$cases \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$dir" -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" -LE "gpu|mpi|compile_fail|packaging|headers|bench|large$skip"
done
