#!/usr/bin/env bash
# CPMöbius with OpenMath-Nemotron-1.5B, the released script's values (configs/experiment/released_openmath_nemotron_1p5b.yaml).
# Environment: PLAYER_MODEL_PATH, COACH_MODEL_PATH, CPMOBIUS_DATA_DIR, CKPT_DIR, NNODES, GPUS_PER_NODE, BACKEND.
# Any Hydra override follows: `bash scripts/train_openmath_nemotron_1p5b.sh filter.quota=8`; `--cfg job` only prints the config.
exec bash "$(dirname "$0")/launch.sh" released_openmath_nemotron_1p5b "$@"
