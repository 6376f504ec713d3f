#!/usr/bin/env bash
# CPMöbius with Qwen2.5-Math-7B-Instruct (released script values) on one or more GPU nodes.
# Algorithm values live in configs/experiment/released_qwen_7b_instruct.yaml; this script holds only cluster-facing
# values. Any Hydra override passes through, e.g. `bash scripts/train_qwen_7b_instruct.sh filter.quota=8`
# or `bash scripts/train_qwen_7b_instruct.sh --cfg job` (print the resolved, validated config; starts nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
export PLAYER_MODEL_PATH="${PLAYER_MODEL_PATH:-}"          # empty: the preset's hub id
export COACH_MODEL_PATH="${COACH_MODEL_PATH:-}"            # the Coach warm-up output, when you have it
export CPMOBIUS_DATA_DIR="${CPMOBIUS_DATA_DIR:-data}"      # holds eval/amc/amc.jsonl for validation
[ -n "$PLAYER_MODEL_PATH" ] || unset PLAYER_MODEL_PATH
[ -n "$COACH_MODEL_PATH" ] || unset COACH_MODEL_PATH
exec python -m cpmobius.main \
  experiment=released_qwen_7b_instruct \
  backend="${BACKEND:-vllm}" \
  trainer.nnodes="${NNODES:-1}" \
  trainer.n_gpus_per_node="${GPUS_PER_NODE:-8}" \
  trainer.default_local_dir="${CKPT_DIR:-checkpoints/released_qwen_7b_instruct}" \
  "$@"
