#!/bin/sh
# Builds the library and its threaded tests with ThreadSanitizer (clang,
# clang's OpenMP runtime, CPU backend) and runs them. Exits 1 on any report.
#
#   tools/tsan.sh [--build DIR] [--jobs N] [--tests "A B ..."]
#
# --build DIR     build folder (default: build-tsan)
# --jobs N        build jobs, and tests run at a time (default 2)
# --tests "..."   the tests to run (default: every test whose code runs on
#                 more than one thread: the ops and their gradients on the
#                 context's threads, optimizers and clip, contexts on several
#                 threads at once, the HM-LSTM training steps, the captured
#                 step's replay, the reductions, scans, user operators and
#                 sparse ops)
#
# Needs clang, libomp-dev (its Archer tool makes ThreadSanitizer understand
# OpenMP's barriers and locks) and OpenBLAS's pthread build. OpenBLAS is not
# instrumented: its threads' own accesses are not checked, only ours.
set -eu

build=build-tsan
jobs=2
tests="test_tape test_ops test_bfn test_nn test_broadcast_random test_hmlstm test_graph test_reduce test_scan test_assoc test_sparse"
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "tools/tsan.sh: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
command -v clang >/dev/null 2>&1 || { echo "tools/tsan.sh: clang is needed" >&2; exit 2; }

echo "+ configure and build $build"
CC=clang cmake -S . -B "$build" -DDC_TSAN=ON -DDC_CUDA=OFF -DDC_SANITIZER_SUITE=OFF -DDC_CUDA_EMULATION=OFF \
    -DDC_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --parallel "$jobs" --target $tests >/dev/null

# Reports from inside the uninstrumented OpenMP runtime and OpenBLAS are
# theirs, not ours (and the runtime's synchronization reaches ThreadSanitizer
# through Archer); any report ends the test with a failure. An allocation
# too large fails as malloc does (the tests of out-of-memory paths ask).
export TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=1 exitcode=66 second_deadlock_stack=1 allocator_may_return_null=1"
# Archer, the OpenMP runtime's tool that gives ThreadSanitizer its
# synchronization, lies beside clang's libomp; without it the end of every
# parallel region would look like a race.
archer=$(dirname "$(readlink -f "$(command -v clang)")")/../lib/libarcher.so
[ -f "$archer" ] || { echo "tools/tsan.sh: no $archer (Debian: libomp-dev)" >&2; exit 2; }
export OMP_TOOL_LIBRARIES="$archer"
regex=$(echo "$tests" | sed 's/ \+/|/g')
# as many tests at a time as build jobs: ThreadSanitizer orders accesses by
# their synchronization, not by when they ran, so a test sees the same races
# on a busy machine (on 2 cores: 65 s for the 11 tests, against 120 s one at
# a time)
ctest --test-dir "$build" --output-on-failure --parallel "$jobs" -R "^($regex)\$"
