#!/usr/bin/env bash
# RENT with Qwen2.5-Math-1.5B, as its released exps (grpo, entropy, format, amc) run it (docs/baselines.md, "RENT"):
# the Player alone on AMC's 83 questions (the validation set's, labels unused), 80 a step, 5 rollouts each, reward
# minus the mean token entropy (-7.0 without \boxed{}); lr 1e-6 constant; KL loss 1e-3; temperature 1.0; 3,072
# response tokens; 150 steps. Values: configs/experiment/rent_qwen_1p5b.yaml; departures: docs/baselines.md.
# Environment and overrides as in train_qwen_1p5b.sh: `--cfg job` only prints the config.
exec bash "$(dirname "$0")/launch.sh" rent_qwen_1p5b method=rent "$@"
