#!/usr/bin/env bash
# TTRL with Qwen2.5-Math-1.5B, as its released examples/ttrl/amc.sh runs it (docs/baselines.md, "TTRL"): the Player
# alone on AMC's 83 questions (the validation set's, labels unused), 64 rollouts voted, the first 32 trained; lr 5e-7
# with a cosine schedule and 3 % warm-up over 300 steps; temperature 1.0; 3,072 response tokens; KL loss 1e-3 (the
# preset's). Values: configs/experiment/ttrl_qwen_1p5b.yaml; departures: docs/baselines.md. Environment and overrides
# as in train_qwen_1p5b.sh: `--cfg job` only prints the config.
exec bash "$(dirname "$0")/launch.sh" ttrl_qwen_1p5b method=ttrl "$@"
