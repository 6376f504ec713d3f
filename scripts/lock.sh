#!/usr/bin/env bash
# Refresh an install's lock: the versions scripts/install.sh passes to pip as constraints.
#
#   bash scripts/lock.sh                # the CPU lock, with python3: scripts/locks/cpu-py<major><minor>.txt
#   PYTHON=python3.12 bash scripts/lock.sh
#   bash scripts/lock.sh gpu            # the GPU lock, with python3.12: scripts/locks/gpu-py312.txt
#
# cpu: runs `bash scripts/install.sh` afresh in a throw-away virtual environment and writes what it installed
#      (torch excluded: install.sh installs and pins it first, from PyTorch's CPU index where needed).
# gpu: resolves `bash scripts/install.sh gpu` (".[gpu,test]": verl[vllm]==0.9.1, vLLM 0.24, torch 2.11 + CUDA 13)
#      without installing it: pip's dry run (--report) in a throw-away virtual environment of that Python, so no
#      GPU is needed, but on Linux x86-64, the platform it pins for. Wheels are held to glibc <= GPU_GLIBC (default
#      2.31, vLLM 0.24's own floor: its llguidance has no older wheel), so the lock installs on any such host with
#      that glibc or newer. Not pip's --platform: that takes wheels only, and hydra-core's antlr4-python3-runtime
#      4.9.3 is a source release; and pip evaluates markers for the Python it runs on, hence a real 3.12.
#
# Needs PyPI (a few minutes for cpu, about a minute for gpu). Commit the lock it writes; install.sh then installs
# exactly those versions.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-cpu}"
case "$target" in
  cpu) python="${PYTHON:-python3}" ;;
  gpu) python="${PYTHON:-python3.12}" ;;
  *) echo "usage: bash scripts/lock.sh [cpu|gpu]" >&2; exit 2 ;;
esac
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
version="$(python -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
tag="py${version/./}"

if [ "$target" = gpu ]; then
  if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "the GPU lock is resolved for Linux x86-64: run this there, not on $(uname -sm)" >&2
    exit 1
  fi
  glibc="${GPU_GLIBC:-2.31}"
  python -m pip install --quiet --upgrade pip
  # PEP 600's hook, which pip's platform tags consult: no manylinux wheel newer than that glibc.
  printf 'def manylinux_compatible(tag_major, tag_minor, tag_arch):\n    return (tag_major, tag_minor) <= (%s, %s)\n' \
    "${glibc%%.*}" "${glibc#*.}" > "$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_manylinux.py"
  start=$(date +%s)
  python -m pip install --quiet --dry-run --ignore-installed --report "$work/report.json" ".[gpu,test]"
  echo "resolved in $(( $(date +%s) - start )) s"
  lock="scripts/locks/gpu-$tag.txt"
  {
    echo "# The GPU install's versions for Python $version, made by scripts/lock.sh gpu on $(date -u +%F):"
    echo "# resolved, not installed (pip's dry run of \".[gpu,test]\"), for Linux x86-64, cp${tag#py},"
    echo "# manylinux wheels up to glibc $glibc."
    echo "# scripts/install.sh gpu installs exactly these (cpmobius, pip, setuptools, wheel excluded);"
    echo "# refresh with: bash scripts/lock.sh gpu"
    python - "$work/report.json" <<'EOF'
import json
import re
import sys

pins = {}
for item in json.load(open(sys.argv[1]))["install"]:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    if re.sub(r"[-_.]+", "-", name).lower() not in {"cpmobius", "pip", "setuptools", "wheel"}:
        pins[name] = version
for name in sorted(pins, key=str.lower):
    print(f"{name}=={pins[name]}")
EOF
  } > "$lock"
  echo "wrote $lock ($(grep -vc '^#' "$lock") packages)"
  grep -iE '^(torch|vllm|verl|transformers|ray)==' "$lock"
  exit 0
fi

CPMOBIUS_LOCK=off bash scripts/install.sh
{
  echo "# The CPU install's versions for Python $version, made by scripts/lock.sh on $(date -u +%F) ($(uname -m))."
  echo "# scripts/install.sh installs exactly these (after torch); refresh with: bash scripts/lock.sh"
  python -m pip freeze --exclude-editable | grep -viE '^(torch|pip|setuptools|wheel)=='
} > "scripts/locks/cpu-$tag.txt"
echo "wrote scripts/locks/cpu-$tag.txt ($(grep -vc '^#' "scripts/locks/cpu-$tag.txt") packages)"
