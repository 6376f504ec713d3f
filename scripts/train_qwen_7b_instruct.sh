#!/usr/bin/env bash
# CPMöbius with Qwen2.5-Math-7B-Instruct, the released script's values (configs/experiment/released_qwen_7b_instruct.yaml).
# Environment: PLAYER_MODEL_PATH, COACH_MODEL_PATH, CPMOBIUS_DATA_DIR, CKPT_DIR, NNODES, GPUS_PER_NODE, BACKEND.
# Any Hydra override follows: `bash scripts/train_qwen_7b_instruct.sh filter.quota=8`; `--cfg job` only prints the config.
exec bash "$(dirname "$0")/launch.sh" released_qwen_7b_instruct "$@"
