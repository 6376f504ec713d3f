#!/usr/bin/env bash
# R-Zero with Qwen2.5-Math-1.5B, as its released scripts/main.sh runs it (docs/baselines.md, "R-Zero"): Coach
# (Challenger) and Player (Solver) both start from the base model, no warm-up; iterations of 5 Challenger steps (512
# prompts x 4 candidates in R-Zero's <question> format, reward min(p, 1 - p) minus the BLEU-cluster share, p over 10
# Player samples) then 15 Solver steps (8,000 questions voted 9 times each per iteration, kept with 0.3 <= share <=
# 0.8; 512 of them a step, 5 rollouts each); 3 iterations (the paper reports iteration 3); lr 1e-6; KL loss 1e-2
# (low-var); clip 0.2 / 0.3; temperature 1.0; no entropy term. Departures: 3,072 response tokens (released 4,096;
# Qwen2.5-Math has 4,096 positions) and those in docs/baselines.md; values: configs/experiment/rzero_qwen_1p5b.yaml.
# Environment and overrides as in train_qwen_1p5b.sh: `--cfg job` only prints the config.
exec bash "$(dirname "$0")/launch.sh" rzero_qwen_1p5b method=rzero "$@"
