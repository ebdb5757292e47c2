#!/bin/sh
# Builds the libFuzzer targets (tests/fuzz/) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for a given time from its corpus;
# or replays the reproducers of known bugs. See tests/fuzz/README.md.
set -eu

usage() {
    cat <<'EOF'
usage: tools/fuzz.sh [SECONDS] [options]

Configures and builds the fuzz build (CC=clang, -DDC_FUZZ=ON, no CUDA), then
runs each fuzz target for SECONDS (default 60), side by side, starting
from its corpus in tests/fuzz/corpus/<target>/. Prints the executions of each
target and any crash; exits 1 if a target crashed (or timed out, or leaked).

options:
  --build DIR       build folder (default: build-fuzz)
  --targets "A B"   the targets to run (default: "fuzz_ops fuzz_checkpoint
                    fuzz_reductions")
  --known           do not fuzz: run every reproducer in tests/fuzz/known/ and
                    say which still fail (exits 1 if any does)
  --timeout S       seconds one input may take before it counts as a hang
                    (default 30)
  --jobs N          build jobs (default 2)
  -h, --help        this text

Where things go, under the build folder:
  fuzz-corpus/<target>/     the working corpus: the seeds and every input the
                            fuzzer found new coverage with (kept between runs)
  fuzz-artifacts/<target>/  crash-*, timeout-*, leak-*, oom-* reproducers
  fuzz-logs/<target>.log    the fuzzer's full output
EOF
}

seconds=60
build=build-fuzz
targets="fuzz_ops fuzz_checkpoint fuzz_reductions"
replay_known=0
timeout=30
jobs=2
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --known) replay_known=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    [0-9]*) seconds=$1; shift ;;
    *) echo "tools/fuzz.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
root=$(pwd)
case $build in /*) ;; *) build="$root/$build" ;; esac

command -v clang >/dev/null 2>&1 || { echo "tools/fuzz.sh: clang is needed (libFuzzer is part of it)" >&2; exit 2; }

# The replay needs every target that has a reproducer.
[ $replay_known = 1 ] && targets="fuzz_ops fuzz_checkpoint fuzz_reductions"

echo "+ configure and build $build"
CC=clang cmake -S . -B "$build" -DDC_FUZZ=ON -DDC_CUDA=OFF -DDC_BUILD_TESTS=OFF \
    -DDC_BUILD_BENCH=OFF -DDC_BUILD_DEMO=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --parallel "$jobs" --target $targets >/dev/null

# One process, one thread: the fuzzer runs inputs one at a time, and a
# machine's other cores are better spent on another fuzzer process.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# ---- replay the known bugs --------------------------------------------------
if [ $replay_known = 1 ]; then
    failed=0
    for f in tests/fuzz/known/*; do
        name=$(basename "$f")
        case $name in
        README.md) continue ;;
        ckpt-*) target=fuzz_checkpoint ;;
        red-*) target=fuzz_reductions ;;
        *) target=fuzz_ops ;;
        esac
        log="$build/fuzz-logs/known-$name.log"
        mkdir -p "$build/fuzz-logs"
        if "$build/tests/fuzz/$target" -timeout=10 -rss_limit_mb=2048 "$f" >"$log" 2>&1; then
            echo "$name ($target): passes"
        else
            failed=1
            summary=$(grep -E '^SUMMARY|fuzz contract violated' "$log" | head -2 | tr '\n' ' ')
            echo "$name ($target): FAILS: $summary"
        fi
    done
    exit $failed
fi

# ---- fuzz -------------------------------------------------------------------
# The targets run side by side (each one process, one core), then each is
# reported in turn.
status=0
for target in $targets; do
    corpus="$build/fuzz-corpus/$target"
    artifacts="$build/fuzz-artifacts/$target"
    log="$build/fuzz-logs/$target.log"
    mkdir -p "$corpus" "$artifacts" "$build/fuzz-logs"
    # findings only: slow-unit-* (an input over 10 s) is a hint, not a failure
    ls "$artifacts" | grep -cE '^(crash|timeout|leak|oom)-' >"$build/fuzz-logs/$target.before" || true
    echo "+ $target for ${seconds}s (log: $log)"
    # New inputs go to the first folder; the seeds in the repository are read only.
    (
        rc=0
        "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
            -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" "tests/fuzz/corpus/$target" >"$log" 2>&1 || rc=$?
        echo "$rc" >"$build/fuzz-logs/$target.rc"
    ) &
done
wait
for target in $targets; do
    artifacts="$build/fuzz-artifacts/$target"
    log="$build/fuzz-logs/$target.log"
    rc=$(cat "$build/fuzz-logs/$target.rc" 2>/dev/null || echo "?")
    before=$(cat "$build/fuzz-logs/$target.before")
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 |
        sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\).*/coverage \1, features \2/p')
    echo "  $target: ${runs:-?} executions, ${rate:-?} per second, ${cov:-coverage ?}"
    after=$(ls "$artifacts" | grep -cE '^(crash|timeout|leak|oom)-' || true)
    if [ "$rc" != 0 ] || [ "$after" != "$before" ]; then
        status=1
        echo "  $target: FAILED (exit $rc)"
        grep -E '^SUMMARY|fuzz contract violated|^==[0-9]+==ERROR' "$log" | head -3 | sed 's/^/    /'
        newest=$(ls -t "$artifacts" | grep -E '^(crash|timeout|leak|oom)-' | head -1)
        [ -n "$newest" ] && echo "  reproducer: $artifacts/$newest" &&
            echo "  replay it:  DC_FUZZ_TRACE=1 $build/tests/fuzz/$target $artifacts/$newest"
    fi
done
exit $status
