#!/usr/bin/env bash
# Install cpmobius and its test tools into the active Python environment (3.10-3.12; a venv is best).
#
#   bash scripts/install.sh            # CPU machine: torch's CPU build, verl with the CPU extensions
#   bash scripts/install.sh gpu        # GPU cluster: verl[vllm]==0.9.1 (vLLM 0.24, torch 2.11 + CUDA 13)
#
# On a CPU machine torch is installed first and pinned for everything after it, so that no other
# package pulls a multi-GB CUDA build. TORCH_SPEC and TORCH_INDEX_URL change which torch that is
# (e.g. TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu for PyTorch's own CPU wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-cpu}"
python -m pip install --upgrade pip >/dev/null

if [ "$target" = gpu ]; then
  python -m pip install -e ".[gpu,test]"
  exit 0
fi

# torch's version is read from its metadata, never by importing it: numpy is not installed yet, and
# `import torch` without it warns "Failed to initialize NumPy".
if ! python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"; then
  python -m pip install "${TORCH_SPEC:-torch==2.13.0}" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
python -c "from importlib.metadata import version; print('torch==' + version('torch'))" > "$constraints"
PIP_CONSTRAINT="$constraints" python -m pip install -e ".[test]"
python -c "import torch, verl, cpmobius.engine.extensions; print('cpmobius installed: torch', torch.__version__, '| verl', verl.__version__)"
