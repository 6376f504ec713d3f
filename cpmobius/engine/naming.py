"""Per-policy names for rollout server actors.

verl names a replica's server actors ``f"{prefix}server_{replica_rank}_{node_rank}"`` (prefix
``"vllm_"`` for vLLM) and the in-worker server adapter looks its server up by the same name, with
the replica rank taken from the worker's rank *inside its own worker group*. Two policies in one
Ray job (Coach and Player) therefore both want ``vllm_server_0_0``. The fix: both the replica (on
the driver) and the adapter (inside the worker) put the policy's name in front of the prefix
(``coach_vllm_server_0_0``). They read it from the one place both see, the rollout config's free
``custom`` dict: ``actor_rollout_ref.rollout.custom.policy_name``, set by `cpmobius.engine.config`.
The HF rollout's servers are named the same way (`hf_server_name`).
"""

from __future__ import annotations

import re
from typing import Any

_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
POLICY_NAME_KEY = "policy_name"
HF_BACKEND_PREFIX = "hf_"  # the HF rollout's server prefix, as verl's "vllm_"


def validate_policy_name(name: str) -> str:
    """Return ``name`` if it can prefix Ray actor names.

    Raises:
        ValueError: unless ``name`` is lowercase letters, digits and underscores, starting with a letter.
    """
    if not isinstance(name, str) or not _NAME_PATTERN.match(name):
        raise ValueError(f"policy name {name!r} must match {_NAME_PATTERN.pattern} (it prefixes Ray actor names)")
    return name


def policy_name_of(rollout_config: Any) -> str:
    """The policy name in a rollout config (`RolloutConfig` or DictConfig), or "" when unset."""
    custom = rollout_config.get("custom", None) if hasattr(rollout_config, "get") else rollout_config.custom
    if not custom:
        return ""
    name = custom.get(POLICY_NAME_KEY, "") or ""
    return validate_policy_name(name) if name else ""


def server_name_prefix(backend_prefix: str, rollout_config: Any) -> str:
    """``"coach_" + "vllm_"``; the backend prefix alone when the config names no policy."""
    policy = policy_name_of(rollout_config)
    return f"{policy}_{backend_prefix}" if policy else backend_prefix


def hf_server_name(rollout_config: Any, replica_rank: int, node_rank: int = 0) -> str:
    """Ray actor name of one HF generation server, e.g. ``coach_hf_server_0_0``."""
    return f"{server_name_prefix(HF_BACKEND_PREFIX, rollout_config)}server_{replica_rank}_{node_rank}"
