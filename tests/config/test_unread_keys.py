"""verl keys that the loop does not read are refused when a command line sets them, with what to set instead;
values that are what the loop does anyway, and shared keys a policy follows, pass (`check_unread_keys`)."""

from __future__ import annotations

import pytest

from cpmobius.config import ConfigError, compose_config
from cpmobius.config.unread_keys import check_unread_keys

REFUSED = [
    # (overrides, the key named, a word of the reason)
    (["algorithm.adv_estimator=rloo"], "algorithm.adv_estimator", "GRPO"),
    (["algorithm.use_kl_in_reward=true"], "algorithm.use_kl_in_reward", "kl_loss_coef"),
    (["algorithm.kl_ctrl.kl_coef=0.05"], "algorithm.kl_ctrl.kl_coef", "use_kl_in_reward"),
    (["algorithm.filter_groups.enable=true"], "algorithm.filter_groups.enable", "filter."),
    (["trainer.val_before_train=false"], "trainer.val_before_train", "Δt"),
    (["trainer.test_freq=10"], "trainer.test_freq", "every step"),
    (["trainer.total_epochs=3"], "trainer.total_epochs", "total_training_steps"),
    (["data.train_batch_size=128"], "data.train_batch_size", "filter.quota"),
    (["actor_rollout_ref.rollout.n=16"], "actor_rollout_ref.rollout.n", "player.n"),
    (["++player.verl.rollout.n=16"], "player.verl.rollout.n", "player.n"),
    # a whole node's value: each key inside it is checked as if set alone
    (["algorithm={adv_estimator: rloo, use_kl_in_reward: true}"], "algorithm.adv_estimator", "GRPO"),
    (["trainer={test_freq: 5}"], "trainer.test_freq", "every step"),
    (["actor_rollout_ref.rollout={temperature: 0.7}"], "actor_rollout_ref.rollout.temperature", "player.verl"),
    # sections and keys the loop never reads
    (["critic.optim.lr=1e-5"], "critic.optim.lr", "no critic"),
    (["ray_kwargs.ray_init.num_cpus=4"], "ray_kwargs.ray_init.num_cpus", "backend.ray_num_cpus"),
    (["data.train_files=train.parquet"], "data.train_files", "no dataloader"),
    (["custom_reward_function.path=my_reward.py"], "custom_reward_function.path", "its own rewards"),
    (
        ["actor_rollout_ref.actor.ppo_mini_batch_size=64"],
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        "one optimizer",
    ),
    (["++player.verl.actor.ppo_mini_batch_size=64"], "player.verl.actor.ppo_mini_batch_size", "one optimizer"),
    (["actor_rollout_ref.rollout.val_kwargs.n=10"], "actor_rollout_ref.rollout.val_kwargs.n", "samples_per_problem"),
    # shared keys both deltas set for themselves (configs/cpmobius.yaml), also under a baseline's method
    (["actor_rollout_ref.rollout.temperature=0.7"], "actor_rollout_ref.rollout.temperature", "player.verl.rollout"),
    (["actor_rollout_ref.actor.entropy_coeff=0.0"], "actor_rollout_ref.actor.entropy_coeff", "coach.verl.actor"),
    (["method=ttrl", "actor_rollout_ref.rollout.temperature=0.7"], "actor_rollout_ref.rollout.temperature", "1.0"),
]

ACCEPTED = [
    ["algorithm.adv_estimator=grpo"],  # what the loop does anyway
    ["algorithm.kl_ctrl.kl_coef=0.00"],  # the released scripts' value: off
    ["trainer.test_freq=1", "trainer.val_before_train=true"],
    ["actor_rollout_ref.actor.optim.lr=2e-6"],  # both deltas follow the shared learning rate
    ["actor_rollout_ref.rollout.top_p=0.95", "actor_rollout_ref.actor.kl_loss_coef=0.01"],
    # a delta made to follow the shared key: the shared value reaches the Player again
    [
        "actor_rollout_ref.rollout.temperature=0.7",
        "player.verl.rollout.temperature=${actor_rollout_ref.rollout.temperature}",
        "coach.verl.rollout.temperature=${actor_rollout_ref.rollout.temperature}",
    ],
    ["player.verl.rollout.temperature=0.7", "filter.quota=4"],
    ["method=rzero", "actor_rollout_ref.rollout.temperature=1.0"],  # both policies already sample at 1.0
    ["trainer.save_freq=1", "trainer.test_freq=${trainer.save_freq}"],  # compared resolved: 1
    ["algorithm={adv_estimator: grpo, norm_adv_by_std_in_grpo: false}"],
]


@pytest.mark.parametrize(("overrides", "key", "reason"), REFUSED, ids=[" ".join(case[0]) for case in REFUSED])
def test_a_key_the_loop_does_not_read_is_refused_naming_it(overrides, key, reason):
    with pytest.raises(ConfigError) as raised:
        check_unread_keys(overrides, compose_config(overrides))
    message = str(raised.value)
    assert message.startswith(f"{key}: ") and reason in message and "\n" not in message, message


@pytest.mark.parametrize("overrides", ACCEPTED, ids=[" ".join(case) for case in ACCEPTED])
def test_a_value_the_loop_follows_passes(overrides):
    cfg = compose_config(overrides)
    check_unread_keys(overrides, cfg)  # raises nothing
    if "player.verl.rollout.temperature=${actor_rollout_ref.rollout.temperature}" in overrides:
        assert cfg.player.verl.rollout.temperature == 0.7


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["method=ttrl", "filter.quota=4"], "filter.quota: not read by method=ttrl"),
        (["method=rent", "coach={reward: released_uniform}"], "coach.reward: not read by method=rent"),
        (["method=rzero", "filter.band_low=0.3"], "filter.band_low: not read by method=rzero"),
        (["method=rzero", "coach.reward=released_uniform"], "coach.reward: not read by method=rzero"),
        (["method=rzero", "coach.update=false", "player.n=4"], None),  # R-Zero's Challenger reads coach.update
        (["method=ttrl", "player.n=8", "warmup.enabled=false"], None),
        (["filter.quota=4", "coach.reward=released_uniform"], None),  # CPMöbius reads both
    ],
)
def test_a_key_the_method_does_not_read_is_refused(overrides, refused):
    from cpmobius.methods import check_method_overrides
    from cpmobius.settings import load_settings

    settings = load_settings(compose_config(overrides))
    if refused is None:
        check_method_overrides(overrides, settings)  # raises nothing
        return
    with pytest.raises(ConfigError, match=f"^{refused}: "):
        check_method_overrides(overrides, settings)
