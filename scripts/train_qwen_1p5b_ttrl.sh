#!/usr/bin/env bash
# TTRL with Qwen2.5-Math-1.5B, as its released examples/ttrl/amc.sh runs it (docs/baselines.md, "TTRL"): the
# Player alone on AMC's 83 questions (the validation set's, labels unused), 64 rollouts voted, the first 32
# trained; lr 5e-7 with a cosine schedule and 3 % warm-up over 300 steps; temperature 1.0; 3,072 response
# tokens; KL loss 1e-3 (the preset's). Departures: docs/baselines.md. Environment and overrides as in
# train_qwen_1p5b.sh: `--cfg job` only prints the config.
exec bash "$(dirname "$0")/launch.sh" paper_qwen_1p5b method=ttrl \
  trainer.experiment_name=ttrl_qwen_1p5b \
  trainer.total_training_steps=300 \
  data.max_response_length=3072 \
  actor_rollout_ref.actor.optim.lr=5.0e-7 \
  actor_rollout_ref.actor.optim.lr_scheduler_type=cosine \
  actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.03 \
  actor_rollout_ref.actor.optim.total_training_steps=300 \
  "$@"
