#!/usr/bin/env bash
# Installs the peer frameworks (PyTorch, JAX) and matplotlib from PyPI into
# bench/peers/.venv, for bench/peers/run.sh. Only the benchmarks against
# PyTorch and JAX need Python; the library and its tests never do.
#
#   bench/peers/setup.sh            create or update the virtual environment
#   PYTHON=python3.12 bench/peers/setup.sh   use another interpreter
#
# PyPI's torch wheel for Linux is the CUDA build and pulls the NVIDIA
# libraries (several GB); nothing lighter is on PyPI. They are unused here.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --upgrade --quiet pip
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
"$venv/bin/python" - <<'PY'
import jax, matplotlib, numpy, torch
print(f"peers ready: torch {torch.__version__}, jax {jax.__version__}, "
      f"numpy {numpy.__version__}, matplotlib {matplotlib.__version__}")
PY
