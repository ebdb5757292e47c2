#!/bin/bash
# dualcast's GPU checks in one short command, for a GPU machine lent for a
# few minutes: the binaries are built beforehand on another x86-64 Linux
# machine (pack), and the GPU machine only unpacks and runs them (run),
# every step under a deadline so that the most important figures come
# first and the command ends inside its time limit.
#
#   tools/gpu_lease.sh pack [--arch 90] [--out DIR]
#       builds dualcast for the GPU's architecture in build-lease/
#       (portable x86-64-v4 code, no sanitizer suite, no emulation) and
#       writes DIR/build.tgz (the executables, the library and the CTest
#       files) and DIR/debs/ (Debian's cmocka, OpenBLAS (OpenMP), gfortran
#       and fortunes, downloaded with apt-get: the GPU machine needs no
#       package registry). DIR defaults to .lease, ignored by git.
#   tools/gpu_lease.sh run [--dir DIR] [--budget SECONDS] [--logs DIR] [PART...]
#       on the GPU machine, from the repository's root: unpacks DIR, then
#       runs the PARTs in the order given (default: step correct bench
#       peers), a PART being a group or one of its steps:
#         step     hmlstm_step: bench_hmlstm_step --device cuda (the
#                  training step, eager and replayed as a CUDA graph)
#         correct  the suite with DC_REQUIRE_CUDA=1, test_cuda alone, and
#                  compute-sanitizer (memcheck with leak check, racecheck;
#                  initcheck and synccheck over test_graph and test_reduce)
#                  over the CUDA tests but test_cuda, side by side
#                  (test_cuda under compute-sanitizer outlasts a lease's
#                  minutes; tools/gpu_check.sh runs it)
#         bench    bench_cuda, bench_reduce and bench_sparse --device cuda,
#                  demo (a short hmlstm_demo --device cuda with its
#                  comparison); bench_axes --device cuda (reductions and
#                  scans over one axis of a matrix) only when named
#         peers    peers_hmlstm and peers_cupdate (bench/peers/compare.py
#                  --device cuda: the HM-LSTM step, the c-update),
#                  reduce_peers and sparse_peers (reduce_peers.py and
#                  sparse_peers.py --device cuda; each runs bench_reduce or
#                  bench_sparse first), with the machine's python3
#         profile  each kernel's time under Nsight Compute (ncu) in
#                  bench_reduce --reps 1 (its warm-up, primal and gradient
#                  iterations) of segment_sum, scan_sum and
#                  user_reduce_linrec at 10^7
#       Each step gets what is left of the budget (default 540 s) up to its
#       own cap; a step that would get less than 10 s is skipped and said
#       so. Logs go to --logs (default $OUT where set, else /tmp/lease):
#       summary.txt, logs.tgz (every step's output, repacked after each
#       step, so a killed command still leaves them) and RESULTS.md (with
#       the peers-gpu section compare.py writes).
#
# The binaries keep the absolute paths of the machine that built them
# (CTest files, the source folder): run links that path to the checkout
# where it does not exist, and /usr/share/games/fortunes to the unpacked
# corpus. Measured in one 8-minute command on an H200 (bench/RESULTS.md).
set -u

here=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
[ $# -gt 0 ] && shift
dir="$here/.lease"

case "$mode" in
pack)
    arch=90
    while [ $# -gt 0 ]; do
        case "$1" in
        --arch) arch="$2"; shift 2 ;;
        --out) dir="$2"; shift 2 ;;
        *) echo "gpu_lease pack: unknown argument $1" >&2; exit 2 ;;
        esac
    done
    build="$here/build-lease"
    mkdir -p "$dir/debs" || exit 2
    grep -qx "/$(basename "$dir")/" "$here/.git/info/exclude" 2>/dev/null ||
        echo "/$(basename "$dir")/" >>"$here/.git/info/exclude"
    (cd "$dir/debs" && apt-get update -qq >/dev/null 2>&1;
        apt-get download libcmocka0 libopenblas0-openmp libgfortran5 fortunes fortunes-min) || exit 1
    cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        -DDC_NATIVE=OFF -DCMAKE_C_FLAGS=-march=x86-64-v4 -DDC_SANITIZER_SUITE=OFF -DDC_CUDA_EMULATION=OFF >/dev/null &&
        cmake --build "$build" -j"$(nproc)" >/dev/null || exit 1
    (cd "$build" && find . \( -type f -o -type l \) \( -perm -u+x -o -name CTestTestfile.cmake -o -name 'libdualcast.so*' \) \
        ! -path '*/CMakeFiles/*' ! -name '*.o' | tar czf "$dir/build.tgz" -T -) || exit 1
    echo "gpu_lease: $(du -sh "$dir" | cut -f1) in $dir (name it in the lease's carry); built from $build"
    exit 0
    ;;
run) ;;
*)
    sed -n '2,36p' "$0"
    exit 2
    ;;
esac

budget=540
logs=${OUT:-/tmp/lease}
parts=()
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    *) parts+=("$1"); shift ;;
    esac
done
[ ${#parts[@]} -eq 0 ] && parts=(step correct bench peers)
t0=$(date +%s)
L=/tmp/lease_logs
mkdir -p "$L" "$logs" || exit 2
summary=$L/summary.txt
left() { echo $((budget - ($(date +%s) - t0))); }
pack_logs() { tar czf "$logs/logs.tgz" -C $L . 2>/dev/null; cp $summary "$logs/summary.txt"; }
reserve=15
# step NAME CAP COMMAND...: runs under min(CAP, what is left - reserve)
step() {
    local name=$1 cap=$2 lim s rc
    shift 2
    lim=$(($(left) - reserve))
    [ $lim -gt "$cap" ] && lim=$cap
    if [ $lim -lt 10 ]; then
        echo "skipped (no time left): $name" | tee -a $summary
        return
    fi
    s=$(date +%s)
    timeout -k 5 $lim "$@" >"$L/$name.log" 2>&1
    rc=$?
    echo "$name: exit $rc in $(($(date +%s) - s)) s (limit $lim s)$([ $rc = 124 ] && echo ', stopped at its limit')" |
        tee -a $summary
    pack_logs
}

# ---- the machine and the binaries ------------------------------------------------
D=/tmp/lease_deps
lib=$D/usr/lib/x86_64-linux-gnu
for f in "$dir"/debs/*.deb; do dpkg -x "$f" $D; done
export LD_LIBRARY_PATH=$lib:$lib/openblas-openmp:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OPENBLAS_CORETYPE=SkylakeX PYTHONUNBUFFERED=1
mkdir -p /usr/share/games && [ -e /usr/share/games/fortunes ] || ln -s $D/usr/share/games/fortunes /usr/share/games/fortunes
[ -e /usr/bin/cmake ] || ln -s "$(command -v cmake)" /usr/bin/cmake
B="$here/build-lease"
mkdir -p "$B" && tar xzf "$dir/build.tgz" -C "$B" || exit 2
# the absolute paths the binaries and CTest files were made with
origin=$(sed -n 's/^# Source directory: //p' "$B/CTestTestfile.cmake")
if [ -n "$origin" ] && [ "$origin" != "$here" ] && [ ! -e "$origin" ]; then
    mkdir -p "$(dirname "$origin")" && ln -s "$here" "$origin"
fi
{
    date -u '+%Y-%m-%d %H:%M UTC'
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    echo "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs"
    python3 -c "import torch, jax; print('PyTorch', torch.__version__, 'JAX', jax.__version__)" 2>&1 | tail -1
    ldd "$B/tests/test_cuda" | grep "not found"
} >"$summary" 2>&1
cat $summary
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)

run_correct() {
    # side by side: the suite, then every sanitizer run, each under the same limit
    local lim s t
    lim=$(($(left) - reserve)); [ $lim -gt 200 ] && lim=200
    s=$(date +%s)
    (cd "$B" && DC_REQUIRE_CUDA=1 timeout -k 5 $lim ctest -j6 -E 'package_consumer|test_cuda$' --output-on-failure \
        >$L/ctest.log 2>&1; echo "ctest: exit $?" >>$L/ctest.log) &
    (DC_REQUIRE_CUDA=1 timeout -k 5 $lim "$B/tests/test_cuda" >$L/test_cuda.log 2>&1; echo "test_cuda: exit $?" >>$L/test_cuda.log) &
    sanitize() {
        local tool=$1 test=$2 extra=""
        [ "$tool" = memcheck ] && extra="--leak-check full"
        # shellcheck disable=SC2086
        DC_REQUIRE_CUDA=1 OMP_NUM_THREADS=2 timeout -k 5 $lim "$san" --tool "$tool" $extra --error-exitcode 99 \
            "$B/tests/$test" >"$L/sanitizer_${tool}_$test.log" 2>&1
        echo "compute-sanitizer $tool $test: exit $?" >>"$L/sanitizer_${tool}_$test.log"
    }
    for t in test_graph test_reduce test_scan test_assoc test_sparse_cuda; do sanitize memcheck $t & done
    for t in test_graph test_reduce test_scan test_assoc; do sanitize racecheck $t & done
    for t in test_graph test_reduce; do sanitize initcheck $t & sanitize synccheck $t & done
    wait
    echo "correctness, side by side: $(($(date +%s) - s)) s (limit $lim s)" >>$summary
    tail -q -n1 $L/ctest.log $L/test_cuda.log $L/sanitizer_*.log >>$summary
    grep -hE '^[0-9]+% tests passed|^[[:space:]]+[0-9]+ - ' $L/ctest.log >>$summary
    grep -hE '^========= (ERROR|RACECHECK|LEAK) SUMMARY' $L/sanitizer_*.log | sort | uniq -c >>$summary
    pack_logs
}
pp=$here/bench/peers
run_part() {
    local p
    case "$1" in
    step | hmlstm_step) step hmlstm_step 60 "$B/bench/bench_hmlstm_step" --device cuda ;;
    correct) run_correct ;;
    bench) for p in bench_cuda bench_reduce bench_sparse demo; do run_part $p; done ;;
    bench_cuda) step bench_cuda 60 "$B/bench/bench_cuda" --dims 2048,4096 --reps 20 ;;
    bench_reduce) step bench_reduce 60 "$B/bench/bench_reduce" --device cuda ;;
    bench_sparse) step bench_sparse 30 "$B/bench/bench_sparse" --device cuda ;;
    bench_axes) step bench_axes 40 "$B/bench/bench_axes" --device cuda ;;
    demo) step demo 40 "$B/hmlstm_demo/hmlstm_demo" --device cuda --minutes 0.3 --compare 10 --checkpoint '' --sample 100 ;;
    peers) for p in peers_hmlstm reduce_peers sparse_peers peers_cupdate; do run_part $p; done ;;
    peers_hmlstm) step peers_hmlstm 150 python3 "$pp/compare.py" --build "$B" --device cuda --parts hmlstm --compile-limit 40 ;;
    reduce_peers) step reduce_peers 180 python3 "$pp/reduce_peers.py" --build "$B" --device cuda --reps 7 ;;
    sparse_peers) step sparse_peers 45 python3 "$pp/sparse_peers.py" --build "$B" --device cuda --reps 7 --reps-small 50 ;;
    peers_cupdate) step peers_cupdate 220 python3 "$pp/compare.py" --build "$B" --device cuda --parts cupdate --compile-limit 40 ;;
    profile) step profile 60 "$ncu" --metrics gpu__time_duration.sum "$B/bench/bench_reduce" --device cuda \
        --ops segment_sum,scan_sum,user_reduce_linrec --sizes 10000000 --reps 1 ;;
    *) echo "gpu_lease run: unknown part $1" | tee -a $summary ;;
    esac
}
for p in "${parts[@]}"; do run_part "$p"; done
cp "$here/bench/RESULTS.md" "$logs/RESULTS.md"
echo "total: $(($(date +%s) - t0)) s" >>$summary
pack_logs
cat $summary
