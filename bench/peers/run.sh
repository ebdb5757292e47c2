#!/usr/bin/env bash
# dualcast against PyTorch and JAX on this machine's CPU, in one command:
# builds dualcast's benchmark workers, then runs compare.py, which prints the
# tables, replaces its section of bench/RESULTS.md and draws
# bench/peers_cpu.png (see compare.py for what is measured and how).
#
#   bench/peers/setup.sh     once: PyTorch, JAX and matplotlib into bench/peers/.venv
#   bench/peers/run.sh [--build DIR] [--quick] [--parts cupdate,hmlstm,sweep] [--no-write] [--keep]
#
# DIR is dualcast's CMake build directory (default: build), configured here
# if it is not yet. A full run takes about half an hour on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$repo/build"
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build="$(cd "$repo" && realpath -m "$2")"; shift 2 ;;
        --build=*) build="$(cd "$repo" && realpath -m "${1#--build=}")"; shift ;;
        *) args+=("$1"); shift ;;
    esac
done

if [ ! -x "$here/.venv/bin/python" ]; then
    echo "run.sh: no peers installed; run bench/peers/setup.sh first (PyTorch, JAX, matplotlib from PyPI)" >&2
    exit 2
fi
if [ ! -d /usr/share/games/fortunes ]; then
    echo "run.sh: the HM-LSTM step reads the fortunes corpus: apt-get install -y fortunes" >&2
    exit 2
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$build" >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target bench_peer_worker bench_hmlstm_export >/dev/null
exec "$here/.venv/bin/python" "$here/compare.py" --build "$build" "${args[@]}"
