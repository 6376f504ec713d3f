"""Keys that exist in verl's tree but that this loop does not read: set on the command line, each is one line.

The config composes verl's whole ``ppo_trainer`` tree, so every key verl knows is accepted, and Hydra would take
``algorithm.adv_estimator=rloo`` or ``actor_rollout_ref.rollout.temperature=0.7`` without a word while the run
went on as before. Two kinds are refused here, before anything starts:

- keys of verl's own trainer that the loop replaces (`PINNED`): the advantage estimator (the loop computes GRPO's),
  validation before training and its frequency (Δt needs a score every step), the dataloader's batch and epochs
  (the Coach writes the problems), a reward KL penalty (the KL term is the actor's loss). A value that is what the
  loop does anyway passes (``algorithm.adv_estimator=grpo``).
- a shared ``actor_rollout_ref.<path>`` key that both policies' deltas set for themselves
  (``coach.verl.<path>``, ``player.verl.<path>``; configs/cpmobius.yaml): the deltas win, so the shared value
  reaches neither policy. A delta that follows the shared key (``${actor_rollout_ref.<path>}``) does not shadow it.
"""

from __future__ import annotations

from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from cpmobius.config import ConfigError
from cpmobius.config.known_keys import POLICY_BASE, POLICY_DELTAS, is_group_override, parse_overrides

# key (for actor_rollout_ref keys also the same path under each policy delta) -> (values that pass, why not read)
PINNED: dict[str, tuple[tuple[Any, ...], str]] = {
    "algorithm.adv_estimator": (
        ("grpo",),
        "the loop computes GRPO's group advantages itself (the Player's update, R-Zero's Challenger; paper §3); "
        "verl's other estimators are not wired",
    ),
    "algorithm.use_kl_in_reward": (
        (False,),
        "the KL term is the actor's loss (actor_rollout_ref.actor.use_kl_loss, kl_loss_coef; the released code's); "
        "a KL penalty in the reward is not wired",
    ),
    "algorithm.kl_ctrl.kl_coef": (
        (0, 0.0),
        "verl reads it only with algorithm.use_kl_in_reward, which the loop does not wire; the KL term is "
        "actor_rollout_ref.actor.kl_loss_coef (0, the released scripts' value, is accepted)",
    ),
    "algorithm.filter_groups.enable": (
        (False,),
        "DAPO's dynamic sampling is not wired; the difficulty filter (filter.*) keeps problems by pass rate",
    ),
    "algorithm.use_pf_ppo": ((False,), "PF-PPO's reweighting is not wired"),
    "trainer.val_before_train": (
        (True,),
        "Δt needs the Player's score before the first step: the loop always validates first",
    ),
    "trainer.test_freq": (
        (1,),
        "the loop validates after every step (Δt is measured each step); validation.* sets what it scores",
    ),
    "trainer.val_only": ((False,), "to evaluate a model alone use python -m cpmobius.eval (docs/evaluation.md)"),
    "trainer.total_epochs": ((), "the loop has no dataloader: trainer.total_training_steps sets the run's length"),
    "data.train_batch_size": (
        (),
        "the loop has no dataloader: a step trains on filter.quota problems x player.n rollouts (TTRL, RENT: method.*)",
    ),
    "actor_rollout_ref.rollout.n": (
        (1,),
        "the loop repeats each problem itself: the group size is player.n (rollouts per problem)",
    ),
}


def _raw(cfg: DictConfig, key: str) -> tuple[bool, Any]:
    """(found, the value as written: an interpolation stays ``${...}``) of the dotted ``key`` in ``cfg``."""
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key, default=None, throw_on_resolution_failure=False)
    if not OmegaConf.is_dict(parent) or leaf not in parent:
        return False, None
    return True, parent._get_node(leaf)._value()


def _pinned_entry(key: str) -> Optional[tuple[str, tuple[Any, ...], str]]:
    """(the table's key, values that pass, why) for ``key``, a policy delta's path matched to its shared key."""
    for delta in POLICY_DELTAS:
        if key.startswith(f"{delta}."):
            key = f"{POLICY_BASE}.{key[len(delta) + 1 :]}"
    if key in PINNED:
        return (key, *PINNED[key])
    return None


def _passes(value: Any, accepted: tuple[Any, ...]) -> bool:
    return any(type(value) is type(ok) and value == ok for ok in accepted) or (
        isinstance(value, float) and any(type(ok) is int and value == ok for ok in accepted)
    )


def _shadowing_deltas(cfg: DictConfig, key: str) -> Optional[list[str]]:
    """``["coach.verl.<path>: value", ...]`` when every policy delta sets ``key``'s path for itself, else None."""
    path = key[len(POLICY_BASE) + 1 :]
    own = []
    for delta in POLICY_DELTAS:
        found, raw = _raw(cfg, f"{delta}.{path}")
        if not found or raw == f"${{{key}}}":  # absent, or it follows the shared key
            return None
        own.append(f"{delta}.{path}: {OmegaConf.select(cfg, f'{delta}.{path}', default=raw)!r}")
    return own


def check_unread_keys(overrides: list[str], cfg: DictConfig) -> None:
    """Refuse the first override that sets a key the loop does not read.

    Args:
        overrides: the command line's Hydra overrides as typed (``["algorithm.adv_estimator=rloo"]``).
        cfg: the config they composed to (for the policy deltas that shadow a shared key).

    Raises:
        ConfigError: one line naming the key, why nothing reads it and what to set instead; or an override
            Hydra cannot parse (`parse_overrides`).
    """
    for override in parse_overrides(overrides):
        if is_group_override(override) or override.is_delete() or override.is_sweep_override():
            continue
        key, value = override.key_or_group, override.value()
        if isinstance(value, dict):  # a whole node: its leaves are verl's or the deltas' as composed
            continue
        entry = _pinned_entry(key)
        if entry is not None and not _passes(value, entry[1]):
            typed = override.input_line.split("=", 1)[1]
            raise ConfigError(f"{key}: {typed} is not read by this loop: {entry[2]}")
        if key.startswith(f"{POLICY_BASE}."):
            own = _shadowing_deltas(cfg, key)
            if own:
                raise ConfigError(f"{key}: reaches neither policy, each sets its own ({'; '.join(own)}): set those")
