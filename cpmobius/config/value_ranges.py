"""Value checks of the verl keys both policies pass, and of the run's seed: types and ranges verl leaves unchecked.

verl 0.9.1 builds its config dataclasses without converting values (``optim.lr: fast`` stays a string until a
worker's optimizer raises a TypeError) and checks few ranges (a negative temperature trained). Each function
here returns the problem as one line naming the key, or None; `cpmobius.engine.config` raises it as a
`ConfigError` before Ray or any worker starts.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _in_unit(value: Any) -> bool:
    return 0.0 <= value <= 1.0


def _off_or_positive(value: Any) -> bool:
    return isinstance(value, int) and value >= -1


# Ranges of verl keys each policy passes to its actor and rollout, which verl's dataclasses leave unchecked.
# Paths are under ``actor_rollout_ref``; types are checked first, against verl's dataclasses (`field_type_problem`).
POLICY_RANGES: tuple[tuple[str, Any, str], ...] = (
    ("actor.optim.lr", lambda v: v >= 0, "must be >= 0 (0 trains nothing: a frozen policy)"),
    ("actor.optim.weight_decay", lambda v: v >= 0, "must be >= 0"),
    (
        "actor.optim.betas",
        lambda v: len(v) == 2 and all(is_number(b) and 0 <= b < 1 for b in v),
        "must be two numbers in [0, 1)",
    ),
    ("actor.optim.lr_warmup_steps_ratio", _in_unit, "must be in [0, 1]"),
    ("actor.optim.clip_grad", lambda v: v > 0, "must be > 0"),
    ("actor.clip_ratio", lambda v: v >= 0, "must be >= 0"),
    ("actor.clip_ratio_low", _in_unit, "must be in [0, 1]"),
    ("actor.clip_ratio_high", lambda v: v >= 0, "must be >= 0"),
    ("actor.clip_ratio_c", lambda v: v > 1, "must be > 1 (verl's dual-clip bound)"),
    ("actor.kl_loss_coef", lambda v: v >= 0, "must be >= 0"),
    # verl divides the actor's logits by the rollout temperature: 0 would divide by zero in training.
    ("rollout.temperature", lambda v: v > 0, "must be > 0"),
    ("rollout.top_p", lambda v: 0 < v <= 1, "must be in (0, 1]"),
    ("rollout.top_k", _off_or_positive, "must be -1 or 0 (off) or a positive number of tokens"),
    ("rollout.repetition_penalty", lambda v: v > 0, "must be > 0"),
    ("rollout.seed", lambda v: 0 <= v < 2**32, "must be in [0, 2**32)"),
    ("rollout.val_kwargs.temperature", lambda v: v >= 0, "must be >= 0 (0: greedy)"),
    ("rollout.val_kwargs.top_p", lambda v: 0 < v <= 1, "must be in (0, 1]"),
    ("rollout.val_kwargs.top_k", _off_or_positive, "must be -1 or 0 (off) or a positive number of tokens"),
)


def policy_key(prefix: str, path: str) -> str:
    """The key a user sets: ``coach.verl.actor.optim.lr (actor_rollout_ref.actor.optim.lr unless set per policy)``."""
    if prefix == "actor_rollout_ref":
        return f"{prefix}.{path}"
    return f"{prefix}.{path} (actor_rollout_ref.{path} unless set per policy)"


_SCALARS = (bool, int, float, str)


_INTERPOLATED_KEY = re.compile(r"^\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)[,}]")


def written_value(cfg: DictConfig, key: str) -> tuple[bool, Any]:
    """(found, the value as written: an interpolation stays ``${...}``) of the dotted ``key`` in ``cfg``."""
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key, default=None, throw_on_resolution_failure=False)
    if not OmegaConf.is_dict(parent) or leaf not in parent:
        return False, None
    return True, parent._get_node(leaf)._value()


def followed_key(cfg: DictConfig, key: str) -> Optional[str]:
    """The key that ``key`` of the composed ``cfg`` copies by interpolation, such as verl's
    ``actor_rollout_ref.actor.rollout_n: ${oc.select:actor_rollout_ref.rollout.n,1}``; None when it is set itself."""
    _, value = written_value(cfg, key)
    match = _INTERPOLATED_KEY.match(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def field_type_problem(
    instance: Any, path: str, prefix: str = "actor_rollout_ref", cfg: Optional[DictConfig] = None
) -> Optional[str]:
    """Whether each scalar field of a verl config dataclass instance (nested ones too) holds its annotated type.

    Args:
        instance: what ``verl.utils.config.omega_conf_to_dataclass`` built (an ``FSDPActorConfig``, a
            ``RolloutConfig``).
        path: its path under ``actor_rollout_ref`` ("actor", "rollout").
        prefix: the policy's config path ("player.verl"), or "actor_rollout_ref".
        cfg: the run's composed config, unresolved: a wrong value that a field copies from another key of the
            shared ``actor_rollout_ref`` (verl's ``actor.rollout_n`` follows ``rollout.n``) is then named with the
            key it came from.

    Returns:
        ``"<key>: expected float, got 'fast'"``, or None. A None value passes where the field is Optional or verl's
        own default is None (verl leaves many fields unset), and is a problem where verl's default is a value.
    """
    try:
        hints = typing.get_type_hints(type(instance))
    except Exception:  # an annotation that does not resolve here: leave that class to verl
        return None
    for item in dataclasses.fields(instance):
        value, hint = getattr(instance, item.name), hints.get(item.name)
        where = f"{path}.{item.name}"
        if dataclasses.is_dataclass(value):
            problem = field_type_problem(value, where, prefix, cfg)
            if problem:
                return problem
            continue
        args = typing.get_args(hint)
        optional = typing.get_origin(hint) is typing.Union and type(None) in args
        base = next((a for a in args if a is not type(None)), None) if optional else hint
        if base not in _SCALARS:
            continue
        if value is None:
            if not optional and item.default is not None and item.default is not dataclasses.MISSING:
                # null where verl's default is a value: its dataclass takes it, AdamW(lr=None) raised in a worker
                return f"{policy_key(prefix, where)}: expected {base.__name__}, got None"
            continue
        if base is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif base is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, base)
        if not ok:
            source = followed_key(cfg, f"actor_rollout_ref.{where}") if cfg is not None else None
            came_from = f" (copied from {source}: set that one)" if source else ""
            return f"{policy_key(prefix, where)}: expected {base.__name__}, got {value!r}{came_from}"
    return None


def range_problem(arr: DictConfig, prefix: str = "actor_rollout_ref") -> Optional[str]:
    """The first value of `POLICY_RANGES` out of its range in one policy's resolved ``actor_rollout_ref`` node,
    as one line naming the key (and the shared key it follows unless set per policy); None when all are in range.
    An absent key passes."""
    for path, accepts, what in POLICY_RANGES:
        value = OmegaConf.select(arr, path, default=None)
        if value is None:
            continue
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value)
        numeric = isinstance(value, (list, tuple)) or is_number(value)
        if not numeric or not accepts(value):
            return f"{policy_key(prefix, path)}: {what}, got {value!r}"
    return None


def run_value_problem(cfg: DictConfig) -> Optional[str]:
    """The run's ``seed`` (an unsigned 32-bit whole number: numpy, torch and vLLM take no other; ``seed=abc``
    failed after the toy pretraining began) and ``algorithm.kl_ctrl.kl_coef`` (>= 0); None when both are fine
    or absent."""
    if "seed" in cfg:
        seed = cfg.seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            return f"seed: must be a whole number in [0, 2**32), got {seed!r}"
    kl_coef = OmegaConf.select(cfg, "algorithm.kl_ctrl.kl_coef", default=None)
    if kl_coef is not None and not (is_number(kl_coef) and kl_coef >= 0):
        return f"algorithm.kl_ctrl.kl_coef: must be a number >= 0, got {kl_coef!r}"
    return None
