#!/usr/bin/env bash
# Builds the host test suite (no MPI, no CUDA) under ASan+UBSan and under TSan and runs ctest
# for each. Left out of both:
# - tests labelled `large` (several GiB, counts above 2^31): under the sanitizers they would
#   need several times their memory (shadow memory) and run time;
# - the test that instantiates every static layout pair (its plans and runs are the same
#   code the other host tests cover; under the sanitizers it costs minutes to build);
# - the self-contained-header test (a compile check, nothing runs).
# Also left out of both: the planner oracle (label `planner`: single-threaded search over
# every layout pair, 92 s under ASan; the planner's code still runs under both sanitizers
# in every run-time redistribute of the host tests and the fuzzer, and under ASan+UBSan in
# the `unit` planner tests).
# fuzz_redistribute runs the first 2,500 (ASan) or 250 (TSan) of the 10,000 fixed-seed
# cases of the ordinary build, fuzz_redistribute_wide the first 400 (ASan) or 25 (TSan) of
# its 2,000 (under TSan, 100 wide cases took 218 s on the 2-core VM, 2026-12-05: meshes
# of up to 24 threads). The TSan build has only the tests that run host threads against
# each other (tests/host, tests/fuzz, tests/overlap); the operator and layer tests (labels
# `ops`, `nn`) do their local work on one thread per rank and reach the communicator
# through the same collectives, and the `unit` tests are single-threaded computation: the
# ASan+UBSan run covers them.
# Optimisation: these builds are compile-bound. The tests whose run time is their own
# computation (SHARDCAST_TEST_OPT_RUNTIME, see tests/CMakeLists.txt) compile at -Og; the
# others at -O0 under ASan+UBSan and -Og under TSan. Against -Og for all, -O0 cut the ASan
# build from 525 to 345 CPU-s, and the runtime-bound tests ran 2.5x as long at -O0
# (2-core Zen 3 VM, g++ 12, 2026-12-03); against -O1 -g, -Og -g1 had cut it from 540 s to
# 258 s. -g1 (line tables) is what the sanitizers' stack traces need. CMAKE_CXX_FLAGS_DEBUG
# is emptied so that the Debug configuration's -g does not undo -g1.
# Usage: scripts/sanitize.sh [asan|tsan]... (default: both)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${SHARDCAST_JOBS:-2}"
kinds=("$@"); [[ ${#kinds[@]} -eq 0 ]] && kinds=(asan tsan)
for kind in "${kinds[@]}"; do
  case "$kind" in
    asan) flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g1"; opt=-O0; skip=""; cases=2500; wide=400; targets=(all) ;;
    tsan) flags="-fsanitize=thread -g1"; opt=-Og; skip="|unit|ops|nn"; cases=250; wide=25; targets=(tests/host/all tests/fuzz/all tests/overlap/all) ;;
    *) echo "sanitize: unknown kind '$kind' (asan or tsan)"; exit 2 ;;
  esac
  dir="$root/build-$kind"
  cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= \
    -DSHARDCAST_ENABLE_CUDA=OFF -DSHARDCAST_ENABLE_MPI=OFF -DSHARDCAST_BUILD_BENCH=OFF -DSHARDCAST_BUILD_EXAMPLES=OFF -DSHARDCAST_TEST_SANITIZERS=OFF -DSHARDCAST_TEST_STATIC_PAIRS=OFF \
    -DSHARDCAST_TEST_HEADERS=OFF -DSHARDCAST_FUZZ_CASES=$cases -DSHARDCAST_FUZZ_WIDE_CASES=$wide -DSHARDCAST_TEST_OPT=$opt -DSHARDCAST_TEST_OPT_RUNTIME=-Og \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$dir" -j "$jobs" --target "${targets[@]}"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" -LE "gpu|mpi|compile_fail|packaging|headers|bench|large|planner$skip"
done
