#!/usr/bin/env bash
# Install cpmobius and its test tools into the active Python environment (3.10-3.12; a venv is best).
#
#   bash scripts/install.sh            # CPU machine: torch's CPU build, verl with the CPU extensions
#   bash scripts/install.sh gpu        # GPU cluster: verl[vllm]==0.9.1 (vLLM 0.24, torch 2.11 + CUDA 13)
#
# Both pin every package to the lock for the running Python where there is one (scripts/locks/, made by
# scripts/lock.sh; the GPU one is for Linux x86-64): CPMOBIUS_LOCK=off resolves the newest versions instead.
#
# On a CPU machine torch is installed first and pinned for everything after it, so that no other
# package pulls a multi-GB CUDA build; where PyPI's torch would be the CUDA build (plain Linux), the
# CPU build comes from https://download.pytorch.org/whl/cpu. TORCH_SPEC and TORCH_INDEX_URL choose
# another torch or index.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-cpu}"
python -m pip install --upgrade pip >/dev/null
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT

# The lock (scripts/locks/<cpu|gpu>-py3XX.txt, made by scripts/lock.sh) pins every package, so a fresh install
# gets known versions (the CPU lock's: those the README's figures were made with) and pip does no backtracking.
# CPMOBIUS_LOCK=off resolves afresh instead (what scripts/lock.sh does); a Python without a lock resolves too.
add_lock() {  # add_lock cpu|gpu: append that install's lock for this Python to the constraints
  local version lock
  version="$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  lock="scripts/locks/$1-py${version/./}.txt"
  if [ "${CPMOBIUS_LOCK:-on}" = off ]; then
    return 0
  elif [ -f "$lock" ]; then
    grep -v '^#' "$lock" >> "$constraints"
    echo "versions pinned by $lock"
  else
    # lock.sh resolves with the Python that PYTHON names (python3, or python3.12 for gpu, by default): this one's
    echo "no lock for this Python ($lock): resolving the newest versions that fit" \
      "(PYTHON=python$version bash scripts/lock.sh $1 makes one)"
  fi
}

if [ "$target" = gpu ]; then
  # The GPU lock is resolved for Linux x86-64 (manylinux wheels; scripts/lock.sh gpu): elsewhere a pin may lack one.
  if [ "$(uname -sm)" = "Linux x86_64" ]; then
    add_lock gpu
  elif [ "${CPMOBIUS_LOCK:-on}" != off ]; then
    echo "the GPU lock is for Linux x86-64, not $(uname -sm): resolving the newest versions that fit"
  fi
  PIP_CONSTRAINT="$constraints" python -m pip install -e ".[gpu,test]"
  # torch's CUDA build needs a recent enough NVIDIA driver (CUDA 13: 580+); say so now rather than at the first run.
  python -c "from cpmobius.engine.gpu_driver import GpuDriverError, check_this_machine
try:
    check_this_machine('nvidia')
except GpuDriverError as error:
    print(f'warning: {error} (a run stops at start-up until then; docs/multinode.md)')"
  exit 0
fi

# torch's version is read from its metadata, never by importing it: numpy is not installed yet, and
# `import torch` without it warns "Failed to initialize NumPy".
if ! python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"; then
  torch_spec="${TORCH_SPEC:-torch==2.13.0}"
  torch_index="${TORCH_INDEX_URL:-}"
  # On Linux, PyPI's torch is the CUDA build (several GB of nvidia-* wheels): ask pip what it would
  # install, and take PyTorch's CPU wheels instead when that holds CUDA libraries.
  if [ -z "$torch_index" ] && python -m pip install --dry-run --quiet --report - "$torch_spec" 2>/dev/null \
      | python -c "import json, sys; sys.exit(not any(p['metadata']['name'].startswith('nvidia-') for p in json.load(sys.stdin)['install']))"; then
    torch_index=https://download.pytorch.org/whl/cpu
    echo "PyPI serves a CUDA build of $torch_spec here: installing PyTorch's CPU build from $torch_index"
  fi
  python -m pip install "$torch_spec" ${torch_index:+--index-url "$torch_index"}
fi
# torch as installed, then the CPU lock for every other package.
python -c "from importlib.metadata import version; print('torch==' + version('torch'))" > "$constraints"
add_lock cpu
PIP_CONSTRAINT="$constraints" python -m pip install -e ".[test]"
python -c "import torch, verl, cpmobius.engine.extensions; print('cpmobius installed: torch', torch.__version__, '| verl', verl.__version__)"
