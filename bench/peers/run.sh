#!/usr/bin/env bash
# dualcast against PyTorch and JAX in one command, on this machine's CPU
# (the default) or on its GPU (--device cuda): builds dualcast's benchmark
# workers, then runs compare.py, which prints the tables and replaces its
# section of bench/RESULTS.md (the CPU mode also draws bench/peers_cpu.png;
# see compare.py for what is measured and how).
#
#   bench/peers/setup.sh     once: PyTorch, JAX and matplotlib into bench/peers/.venv
#   bench/peers/run.sh [--build DIR] [--quick] [--parts cupdate,hmlstm,sweep] [--no-write] [--keep]
#   bench/peers/run.sh --device cuda [--python PATH] [--corpus DIR] [--compile-limit SECONDS] [...]
#
# DIR is dualcast's CMake build directory (default: build), configured here
# if it is not yet. A full CPU run takes about half an hour on 2 cores.
# --python: the interpreter with PyTorch and JAX (default: bench/peers/.venv's
# if setup.sh made it, else python3); on a machine whose CUDA builds of them
# are installed system-wide, --python /usr/bin/python3. --corpus: the
# fortunes corpus the HM-LSTM step reads (default /usr/share/games/fortunes).
# Everything else goes to compare.py (--device, --rehearse, --dims, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$repo/build"
python=""
corpus=""
device="cpu"
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build="$(cd "$repo" && realpath -m "$2")"; shift 2 ;;
        --build=*) build="$(cd "$repo" && realpath -m "${1#--build=}")"; shift ;;
        --python) python="$2"; shift 2 ;;
        --python=*) python="${1#--python=}"; shift ;;
        --corpus) corpus="$(realpath -m "$2")"; shift 2 ;;
        --corpus=*) corpus="$(realpath -m "${1#--corpus=}")"; shift ;;
        --device) device="$2"; args+=("$1" "$2"); shift 2 ;;
        --device=*) device="${1#--device=}"; args+=("$1"); shift ;;
        *) args+=("$1"); shift ;;
    esac
done

if [ "$device" = cuda ] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "run.sh --device cuda: no usable NVIDIA GPU on this machine (nvidia-smi -L fails or is missing);" \
         "the GPU mode runs on a machine with one (--rehearse runs its procedure on the CPU)" >&2
    exit 2
fi
if [ -z "$python" ]; then
    if [ -x "$here/.venv/bin/python" ]; then
        python="$here/.venv/bin/python"
    else
        python="python3"
    fi
fi
if ! "$python" -c "import jax, numpy, torch" >/dev/null 2>&1; then
    echo "run.sh: $python cannot import torch, jax and numpy; run bench/peers/setup.sh first" \
         "(PyTorch, JAX, matplotlib from PyPI into bench/peers/.venv), or name an interpreter that has them" \
         "with --python PATH" >&2
    exit 2
fi
if [ ! -d "${corpus:-/usr/share/games/fortunes}" ] && [ ! -f "${corpus:-/usr/share/games/fortunes}" ]; then
    echo "run.sh: the HM-LSTM step reads the fortunes corpus (${corpus:-/usr/share/games/fortunes}):" \
         "apt-get install -y fortunes, or --corpus DIR" >&2
    exit 2
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$build" >/dev/null
fi
targets=(bench_peer_worker bench_hmlstm_export)
for a in "${args[@]}"; do
    # the rehearsal's dualcast worker on the emulated CUDA device (compare.py --emulated)
    [ "$a" = --emulated ] && targets+=(bench_peer_worker_emulated)
done
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
exec "$python" "$here/compare.py" --build "$build" ${corpus:+--corpus "$corpus"} "${args[@]}"
