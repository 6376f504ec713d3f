#!/usr/bin/env bash
# Install cpmobius and its test tools into the active Python environment (3.10-3.12; a venv is best).
#
#   bash scripts/install.sh            # CPU machine: torch's CPU build, verl with the CPU extensions
#   bash scripts/install.sh gpu        # GPU cluster: verl[vllm]==0.9.1 (vLLM 0.24, torch 2.11 + CUDA 13)
#
# On a CPU machine torch is installed first and pinned for everything after it, so that no other
# package pulls a multi-GB CUDA build; where PyPI's torch would be the CUDA build (plain Linux), the
# CPU build comes from https://download.pytorch.org/whl/cpu. TORCH_SPEC and TORCH_INDEX_URL choose
# another torch or index.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-cpu}"
python -m pip install --upgrade pip >/dev/null

if [ "$target" = gpu ]; then
  python -m pip install -e ".[gpu,test]"
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
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
python -c "from importlib.metadata import version; print('torch==' + version('torch'))" > "$constraints"
# The lock (scripts/locks/cpu-py3XX.txt, made by scripts/lock.sh) pins every other package, so a fresh
# install gets the versions the README's figures were made with, and pip does no backtracking.
# CPMOBIUS_LOCK=off resolves afresh instead (what scripts/lock.sh does); a Python without a lock resolves too.
lock="scripts/locks/cpu-$(python -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")').txt"
if [ "${CPMOBIUS_LOCK:-on}" != off ] && [ -f "$lock" ]; then
  grep -v '^#' "$lock" >> "$constraints"
  echo "versions pinned by $lock"
elif [ "${CPMOBIUS_LOCK:-on}" != off ]; then
  echo "no lock for this Python ($lock): resolving the newest versions that fit (bash scripts/lock.sh makes one)"
fi
PIP_CONSTRAINT="$constraints" python -m pip install -e ".[test]"
python -c "import torch, verl, cpmobius.engine.extensions; print('cpmobius installed: torch', torch.__version__, '| verl', verl.__version__)"
