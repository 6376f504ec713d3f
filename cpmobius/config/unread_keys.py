"""Keys that exist in verl's tree but that this loop does not read: set on the command line, each is one line.

The config composes verl's whole ``ppo_trainer`` tree, so every key verl knows is accepted, and Hydra would take
``algorithm.adv_estimator=rloo`` or ``actor_rollout_ref.rollout.temperature=0.7`` without a word while the run
went on as before. Two kinds are refused here, before anything starts:

- keys of verl's own trainer that the loop replaces (`PINNED`): the advantage estimator (the loop computes GRPO's),
  validation before training and its frequency (Δt needs a score every step), the dataloader's batch and epochs
  (the Coach writes the problems), a reward KL penalty (the KL term is the actor's loss); and whole sections it does
  not use (`UNUSED`: the critic, verl's reward managers, Ray's start-up, the dataloader's files). A value that is
  what the loop does anyway passes (``algorithm.adv_estimator=grpo``); a key inside a value given for a whole node
  (``algorithm={adv_estimator: rloo}``) is checked as if set alone.
- a shared ``actor_rollout_ref.<path>`` key that both policies' deltas set for themselves
  (``coach.verl.<path>``, ``player.verl.<path>``; configs/cpmobius.yaml): the deltas win, so the shared value
  reaches neither policy, unless it is the value both already have. A delta that follows the shared key
  (``${actor_rollout_ref.<path>}``) does not shadow it.
"""

from __future__ import annotations

from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from cpmobius.config import ConfigError
from cpmobius.config.known_keys import POLICY_BASE, POLICY_DELTAS, is_group_override, parse_overrides
from cpmobius.config.value_ranges import written_value

NO_DATALOADER = "the loop has no dataloader: the Coach writes the problems (TTRL, RENT: the validation set's); "
REWARDS = "the loop computes its own rewards (pseudo-labels, Δt; a baseline's under method.*), not verl's "

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
        (0,),
        "verl reads it only with algorithm.use_kl_in_reward, which the loop does not wire; the KL term is "
        "actor_rollout_ref.actor.kl_loss_coef (0, the released scripts' value, is accepted)",
    ),
    "algorithm.kl_penalty": (("kl",), "the reward's KL estimator, and the loop puts no KL in the reward"),
    "algorithm.gamma": ((1.0,), "GAE's discount; GRPO's advantages have none"),
    "algorithm.lam": ((1.0,), "GAE's lambda; GRPO's advantages have none"),
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
    "trainer.balance_batch": ((True,), "the loop lays out its own batches (one sequence a row, padding rows last)"),
    "actor_rollout_ref.rollout.n": (
        (1,),
        "the loop repeats each problem itself: the group size is player.n (rollouts per problem)",
    ),
    "actor_rollout_ref.rollout.val_kwargs.n": (
        (1,),
        "validation repeats each problem itself: validation.samples_per_problem sets the samples",
    ),
    "actor_rollout_ref.actor.shuffle": ((False,), "each update takes the step's batch in its order, as one batch"),
}

# keys (and everything below them) that the loop never reads -> why
UNUSED: dict[str, str] = {
    "critic": "GRPO has no critic (its advantages are the group's rewards; paper §3)",
    "reward_model": REWARDS + "reward model",
    "custom_reward_function": REWARDS + "reward functions",
    "reward": REWARDS + "reward manager",
    "sandbox_fusion": REWARDS + "code sandbox",
    "ray_kwargs": "the loop starts Ray itself: backend.ray_num_cpus and backend.ray_num_gpus, or RAY_ADDRESS to join "
    "a running cluster (docs/multinode.md)",
    "trainer.total_epochs": NO_DATALOADER + "trainer.total_training_steps sets the run's length",
    "trainer.critic_warmup": "GRPO has no critic",
    "trainer.rollout_data_dir": "the loop archives its own problems and metrics in trainer.default_local_dir",
    "trainer.validation_data_dir": "the loop archives its own problems and metrics in trainer.default_local_dir",
    "trainer.log_val_generations": "the loop archives its own problems and metrics in trainer.default_local_dir",
    "data.train_batch_size": NO_DATALOADER + "a step trains on filter.quota problems x player.n rollouts",
    "data.gen_batch_size": NO_DATALOADER + "filter.oversample sets how many candidates the Coach writes",
    "data.val_batch_size": NO_DATALOADER + "validation scores its whole set each step",
    "data.train_files": NO_DATALOADER + "the warm-up's data is warmup.data",
    "data.val_files": NO_DATALOADER + "validation.dataset names the validation set",
    "data.shuffle": NO_DATALOADER.rstrip("; "),
    "data.seed": NO_DATALOADER + "seed sets every seed of the run",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "each update is one optimizer step over the step's whole batch, as "
    "in the released code (its mini-batch of 256 prompts is larger than a step's batch)",
}


def _shared_key(key: str) -> str:
    """``coach.verl.<path>`` and ``player.verl.<path>`` as the shared ``actor_rollout_ref.<path>``; others as given."""
    for delta in POLICY_DELTAS:
        if key.startswith(f"{delta}."):
            return f"{POLICY_BASE}.{key[len(delta) + 1 :]}"
    return key


def _unused_reason(key: str) -> Optional[str]:
    shared = _shared_key(key)
    for prefix, why in UNUSED.items():
        if shared == prefix or shared.startswith(f"{prefix}."):
            return why
    return None


def _passes(value: Any, accepted: tuple[Any, ...]) -> bool:
    """``value`` is one of ``accepted``: a bool only as a bool, a number as any number of that value."""
    for ok in accepted:
        if isinstance(ok, bool) or isinstance(value, bool):
            if value is ok:
                return True
        elif isinstance(ok, (int, float)) and isinstance(value, (int, float)):
            if value == ok:
                return True
        elif value == ok:
            return True
    return False


def _resolved(cfg: DictConfig, key: str, typed: Any) -> Any:
    """``key``'s value in the composed ``cfg`` (an interpolation resolved), else the value as typed."""
    try:
        return OmegaConf.select(cfg, key, default=typed)
    except Exception:  # an interpolation that does not resolve is reported where the config is resolved
        return typed


def _shadowing_deltas(cfg: DictConfig, key: str, value: Any) -> Optional[list[str]]:
    """``["coach.verl.<path>: value", ...]`` when every policy delta sets ``key``'s path for itself to something
    other than ``value``, else None."""
    path = key[len(POLICY_BASE) + 1 :]
    own, same = [], True
    for delta in POLICY_DELTAS:
        found, raw = written_value(cfg, f"{delta}.{path}")
        if not found or raw == f"${{{key}}}":  # absent, or it follows the shared key
            return None
        theirs = _resolved(cfg, f"{delta}.{path}", raw)
        same = same and _passes(value, (theirs,))
        own.append(f"{delta}.{path}: {theirs!r}")
    return None if same else own


def _leaves(key: str, value: Any) -> list[tuple[str, Any]]:
    """``(key, value)`` itself, and for a dict value every leaf below it (``a={b: 1}`` → ``a.b``)."""
    if isinstance(value, dict):
        return [leaf for name, sub in value.items() for leaf in _leaves(f"{key}.{name}", sub)]
    return [(key, value)]


def set_keys(overrides: list[str]) -> list[tuple[str, Any]]:
    """``(dotted key, value)`` of every leaf the command line sets: a whole node's value is its leaves; group choices
    (``backend=cpu``), deletions and sweeps are left out."""
    leaves = []
    for override in parse_overrides(overrides):
        if override.is_delete() or override.is_sweep_override():
            continue
        value = override.value()
        if is_group_override(override) and not isinstance(value, dict):  # an option's name
            continue
        leaves += _leaves(override.key_or_group, value)
    return leaves


def check_unread_keys(overrides: list[str], cfg: DictConfig) -> None:
    """Refuse the first override that sets a key the loop does not read.

    Args:
        overrides: the command line's Hydra overrides as typed (``["algorithm.adv_estimator=rloo"]``).
        cfg: the config they composed to (values resolved there; the policy deltas that shadow a shared key).

    Raises:
        ConfigError: one line naming the key, why nothing reads it and what to set instead; or an override
            Hydra cannot parse (`parse_overrides`).
    """
    for key, typed in set_keys(overrides):
        value = _resolved(cfg, key, typed)
        why = _unused_reason(key)
        if why is not None:
            raise ConfigError(f"{key}: not read by this loop: {why}")
        pinned = PINNED.get(_shared_key(key))
        if pinned is not None and not _passes(value, pinned[0]):
            raise ConfigError(f"{key}: {value!r} is not read by this loop: {pinned[1]}")
        if key.startswith(f"{POLICY_BASE}."):
            own = _shadowing_deltas(cfg, key, value)
            if own:
                raise ConfigError(f"{key}: reaches neither policy, each sets its own ({'; '.join(own)}): set those")
