#!/usr/bin/env bash
# Refresh the CPU install's lock: resolve `bash scripts/install.sh` afresh in a throw-away virtual
# environment and write what it installed to scripts/locks/cpu-py<major><minor>.txt (torch excluded:
# install.sh installs and pins it first, from PyTorch's CPU index where needed).
#
#   bash scripts/lock.sh                # with python3
#   PYTHON=python3.12 bash scripts/lock.sh
#
# Needs PyPI (a few minutes). Commit the lock it writes; install.sh then installs exactly those versions.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
CPMOBIUS_LOCK=off bash scripts/install.sh
tag="$(python -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')"
{
  echo "# The CPU install's versions for Python ${tag#py}, made by scripts/lock.sh on $(date -u +%Y-%m-%d) ($(uname -m))."
  echo "# scripts/install.sh installs exactly these (after torch); refresh with: bash scripts/lock.sh"
  python -m pip freeze --exclude-editable | grep -viE '^(torch|pip|setuptools|wheel)=='
} > "scripts/locks/cpu-$tag.txt"
echo "wrote scripts/locks/cpu-$tag.txt ($(grep -vc '^#' "scripts/locks/cpu-$tag.txt") packages)"
