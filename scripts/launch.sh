#!/usr/bin/env bash
# Shared launcher of the train_*.sh scripts: `bash scripts/launch.sh <experiment preset> [hydra overrides...]`.
# Only cluster-facing values live here, each from the environment with a default; algorithm values live
# in configs/experiment/<preset>.yaml. `--cfg job` prints the resolved, validated config and starts nothing.
# The run's folder is CKPT_DIR, else checkpoints/<the run's name>: the preset's, with the method's and the seed's
# (`launch.sh paper_qwen_1p5b method=rent`: checkpoints/paper_qwen_1p5b_rent), or trainer.experiment_name.
set -euo pipefail
cd "$(dirname "$0")/.."
experiment="$1"; shift
export CPMOBIUS_DATA_DIR="${CPMOBIUS_DATA_DIR:-data}"      # holds eval/amc/amc.jsonl and warmup/
# PLAYER_MODEL_PATH / COACH_MODEL_PATH (local folders or hub ids) override the preset's models when set;
# COACH_MODEL_PATH is the Coach warm-up output when you ran it separately.
[ -n "${PLAYER_MODEL_PATH:-}" ] || unset PLAYER_MODEL_PATH
[ -n "${COACH_MODEL_PATH:-}" ] || unset COACH_MODEL_PATH
exec python -m cpmobius.main \
  experiment="$experiment" \
  backend="${BACKEND:-vllm}" \
  trainer.nnodes="${NNODES:-1}" \
  trainer.n_gpus_per_node="${GPUS_PER_NODE:-8}" \
  trainer.default_local_dir="${CKPT_DIR:-checkpoints/\${trainer.experiment_name\}}" \
  "$@"
