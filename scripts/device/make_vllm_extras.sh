#!/usr/bin/env bash
# The wheels vLLM 0.24's OpenAI server imports that ../shared/tools/make_vllm_parts.sh leaves out and the
# lent GPU image lacks (verl's vLLM replica imports vllm.entrypoints.cli.serve): run here, from the
# project root, with network access; the folder travels in one call of the burst (scripts/device/vllm_check.sh).
#   echo /.vllm_extras/ >> .git/info/exclude; bash scripts/device/make_vllm_extras.sh
set -euo pipefail
out=${1:-.vllm_extras}
P="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64"
for n in 17 24 27 28 31 34 35 39; do P="$P --platform manylinux_2_${n}_x86_64"; done
rm -rf "$out"; mkdir -p "$out"
python3 -m pip download -q $P -d "$out" watchfiles==1.3.0 prometheus-fastapi-instrumentator==8.1.0 \
  model-hosting-container-standards==0.1.16 jmespath==1.1.0 supervisor==4.3.0
ls "$out"
