#!/bin/sh
# Validates dualcast on a machine with an NVIDIA GPU, in one command:
# configures for the local GPU's architecture, builds, runs the whole test
# suite with DC_REQUIRE_CUDA=1 (so a CUDA test that cannot reach the device
# fails instead of skipping), runs compute-sanitizer's four tools over
# test_cuda, test_graph and the reductions', scans', user operators' and
# sparse matrices' tests, the GPU benchmarks (bench_cuda, bench_reduce,
# bench_sparse, and bench_hmlstm_step: the training step eager and replayed
# as a CUDA graph)
# and a one-minute HM-LSTM training on the GPU, and writes one markdown
# report. Exits non-zero if any step fails.
#
#   tools/gpu_check.sh [--prefix DIR]... [--corpus PATH] [--build DIR] [--report FILE]
#                      [--jobs N] [--demo-minutes X] [--bench-args "..."]
#
# --prefix DIR   where cmocka, OpenBLAS (and its libgfortran) are installed when
#                not under /usr, for example Debian packages unpacked with
#                `dpkg -x pkg.deb DIR` (then DIR/usr is searched too); repeatable
# --corpus PATH  the demo's training text (default: the fortunes corpus, under
#                a prefix or /usr/share/games/fortunes)
# --build DIR    build folder (build-gpu-check)
# --report FILE  the report (gpu_check_report.md)
#
# Needs cmake, a C compiler, nvcc and nvidia-smi on PATH (compute-sanitizer
# from the CUDA toolkit: on PATH or beside nvcc).
set -u

here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build-gpu-check"
report="$here/gpu_check_report.md"
corpus=""
prefixes=""
jobs=$(nproc 2>/dev/null || echo 4)
demo_minutes=1
bench_args="--dims 2048,4096 --reps 20"

while [ $# -gt 0 ]; do
    case "$1" in
    --prefix) prefixes="$prefixes $(cd "$2" && pwd)"; shift 2 ;;
    --corpus) corpus="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --report) report="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --demo-minutes) demo_minutes="$2"; shift 2 ;;
    --bench-args) bench_args="$2"; shift 2 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
    esac
done

logs="$build/gpu_check_logs"
failed=0
results=""

note() { printf '%s\n' "$*" >>"$report"; }
# step NAME LOG COMMAND...: runs the command with its output in LOG and adds
# a row to the results table
step() {
    name="$1"; log="$2"; shift 2
    echo "gpu_check: $name ..."
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    if [ $rc -eq 0 ]; then verdict="passed"; else verdict="**FAILED** (exit $rc)"; failed=1; fi
    results="$results| $name | $verdict | ${secs} s | \`$(basename "$log")\` |
"
    echo "gpu_check: $name: $verdict in ${secs} s"
    return $rc
}

# bench_cuda exits with 0 where it finds no device (nothing to measure):
# here that is a failure
run_bench_cuda() {
    "$build/bench/bench_cuda" "$@" || return
    ! grep -q "no usable CUDA device" "$logs/bench_cuda.log"
}

mkdir -p "$logs" || exit 2
: >"$report" || exit 2

# ---- what the machine is ----------------------------------------------------
missing=""
for tool in cmake nvcc nvidia-smi; do
    command -v $tool >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
    echo "gpu_check: not found on PATH:$missing (this script needs a machine with an NVIDIA GPU and the CUDA toolkit)" >&2
    exit 2
fi
sanitizer=$(command -v compute-sanitizer 2>/dev/null || true)
[ -n "$sanitizer" ] || sanitizer="$(dirname "$(command -v nvcc)")/compute-sanitizer"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader -i 0 2>/dev/null)
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null | tr -d ' .')
if [ -z "$gpu" ] || [ -z "$cap" ]; then
    echo "gpu_check: nvidia-smi sees no GPU" >&2
    exit 2
fi

# prefixes: CMake looks there (and under <prefix>/usr); the loader too
cmake_prefix=""
for p in $prefixes; do
    cmake_prefix="$cmake_prefix;$p;$p/usr"
    for d in "$p"/usr/lib/*-linux-gnu "$p"/lib/*-linux-gnu "$p"/usr/lib "$p"/lib "$p"/lib64; do
        [ -d "$d" ] || continue
        LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        for flavour in openblas-openmp openblas-pthread; do
            [ -d "$d/$flavour" ] && LD_LIBRARY_PATH="$d/$flavour:$LD_LIBRARY_PATH"
        done
    done
    [ -z "$corpus" ] && [ -e "$p/usr/share/games/fortunes" ] && corpus="$p/usr/share/games/fortunes"
done
cmake_prefix=${cmake_prefix#;}
export LD_LIBRARY_PATH
[ -n "$corpus" ] || corpus=/usr/share/games/fortunes

note "# dualcast GPU check"
note ""
note "| | |"
note "|---|---|"
note "| date | $(date -u '+%Y-%m-%d %H:%M UTC') |"
note "| commit | $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet 2>/dev/null || echo ' (with local changes)') |"
note "| GPU 0 | $gpu, compute capability $cap |"
note "| GPUs | $(nvidia-smi -L 2>/dev/null | wc -l) |"
note "| CUDA toolkit | $(nvcc --version | sed -n 's/.*release \([^,]*\).*/\1/p') |"
note "| C compiler | $(${CC:-cc} --version 2>/dev/null | head -1) |"
note "| CMake | $(cmake --version | head -1) |"
note "| CPU | $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -1), $(nproc) CPUs |"
note "| OS | $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") |"
note "| prefixes | ${prefixes:-none} |"
note ""

# ---- build ------------------------------------------------------------------
set -- -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cap"
[ -n "$cmake_prefix" ] && set -- "$@" "-DCMAKE_PREFIX_PATH=$cmake_prefix"
if step "configure (sm_$cap)" "$logs/configure.log" cmake "$@" &&
    step "build" "$logs/build.log" cmake --build "$build" -j "$jobs"; then
    built=1
    blas=$(sed -n 's/^-- dualcast: BLAS: //p' "$logs/configure.log")
    note "BLAS: $blas"
    note ""
else
    built=0
fi

if [ $built -eq 1 ]; then
    # ---- the suite, CUDA required -----------------------------------------------
    step "test suite, DC_REQUIRE_CUDA=1" "$logs/ctest.log" \
        env DC_REQUIRE_CUDA=1 ctest --test-dir "$build" --output-on-failure -j "$jobs"

    # ---- compute-sanitizer over test_cuda and test_graph (replayed graphs) --------
    for test in test_cuda test_graph test_reduce test_scan test_assoc test_sparse_cuda; do
        for tool in memcheck racecheck initcheck synccheck; do
            extra=""
            [ $tool = memcheck ] && extra="--leak-check full"
            # shellcheck disable=SC2086
            step "compute-sanitizer $tool${extra:+ (leak check)}, $test" "$logs/sanitizer_${tool}_$test.log" \
                env DC_REQUIRE_CUDA=1 OMP_NUM_THREADS=2 "$sanitizer" --tool $tool $extra --error-exitcode 99 \
                "$build/tests/$test"
        done
    done

    # ---- benchmark and training ---------------------------------------------
    # shellcheck disable=SC2086
    step "bench_cuda $bench_args" "$logs/bench_cuda.log" run_bench_cuda $bench_args
    step "bench_reduce --device cuda (reductions, scans, user operators)" "$logs/bench_reduce.log" \
        "$build/bench/bench_reduce" --device cuda
    step "bench_sparse --device cuda" "$logs/bench_sparse.log" "$build/bench/bench_sparse" --device cuda
    step "bench_hmlstm_step (CPU and GPU, eager and graph replay)" "$logs/bench_hmlstm_step.log" \
        "$build/bench/bench_hmlstm_step" --device both --corpus "$corpus"
    step "hmlstm_demo --device cuda, $demo_minutes min" "$logs/demo.log" \
        "$build/hmlstm_demo/hmlstm_demo" --device cuda --corpus "$corpus" --minutes "$demo_minutes" \
        --checkpoint "$build/gpu_check.ckpt" --val-every 100
fi

# ---- the report ---------------------------------------------------------------
note "## Results"
note ""
note "| step | result | time | log (in $logs) |"
note "|---|---|---:|---|"
printf '%s' "$results" >>"$report"
note ""
if [ -f "$logs/ctest.log" ]; then
    note "## Test suite"
    note ""
    note '```'
    # the suite's own lines (the sanitizer suite's nested run is indented)
    grep -E '^ ?[0-9]+/[0-9]+ Test +#|^[0-9]+% tests passed|^The following|^[[:space:]]+[0-9]+ - ' "$logs/ctest.log" |
        grep -v '^   ' >>"$report"
    note '```'
    note ""
fi
for test in test_cuda test_graph; do
    for tool in memcheck racecheck initcheck synccheck; do
        f="$logs/sanitizer_${tool}_$test.log"
        [ -f "$f" ] || continue
        note "compute-sanitizer $tool, $test: $(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY)' "$f" | tr '\n' ' ')"
    done
done
note ""
if [ -f "$logs/bench_cuda.log" ]; then
    note "## bench_cuda"
    note ""
    cat "$logs/bench_cuda.log" >>"$report"
    note ""
fi
if [ -f "$logs/bench_hmlstm_step.log" ]; then
    note "## bench_hmlstm_step"
    note ""
    cat "$logs/bench_hmlstm_step.log" >>"$report"
    note ""
fi
if [ -f "$logs/demo.log" ]; then
    note "## hmlstm_demo on the GPU"
    note ""
    note '```'
    grep -E 'demo on|matrix products|model:|CUDA:|validation|steps|mixed|pure|step:' "$logs/demo.log" | tail -40 >>"$report"
    note '```'
fi
echo "gpu_check: report in $report"
if [ $failed -ne 0 ]; then
    echo "gpu_check: FAILED (see the report)" >&2
    exit 1
fi
echo "gpu_check: every step passed"
exit 0
