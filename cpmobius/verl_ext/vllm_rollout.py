"""verl's vLLM rollout with per-policy server names, so the Coach and the Player can share GPUs.

verl's `vLLMReplica` names its server actors ``vllm_server_{replica}_{node}`` and the in-worker
`ServerAdapter` finds its server by that name (and binds a ZMQ socket keyed by replica and rank):
two policies in one job collide. The mixins below put the policy name (`cpmobius.verl_ext.naming`)
into both, and the classes are registered in place of verl's own (``RolloutReplicaRegistry`` entry
"vllm", rollout-class registry ``("vllm", "async")``); without a policy name they behave exactly
like verl's. Importing vLLM happens only when verl asks for the classes (GPU machines).
"""

from __future__ import annotations

from typing import Any

from cpmobius.verl_ext.naming import policy_name_of, server_name_prefix


class PolicyNamedReplicaMixin:
    """Put in front of a verl `RolloutReplica`: its server actors carry the policy's name."""

    config: Any

    def _get_server_name_prefix(self) -> str:
        return server_name_prefix(super()._get_server_name_prefix(), self.config)  # type: ignore[misc]


class PolicyNamedAdapterMixin:
    """Put in front of verl's vLLM `ServerAdapter`: it looks up its policy's server, and its ZMQ
    weight-transfer socket carries the policy's name too (two policies never share a socket path)."""

    config: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        policy = policy_name_of(self.config)
        if policy and hasattr(self, "zmq_handle"):
            self.zmq_handle = self.zmq_handle.replace("-replica-", f"-{policy}-replica-")

    def _get_server_name_prefix(self) -> str:
        return server_name_prefix(super()._get_server_name_prefix(), self.config)  # type: ignore[misc]


def load_policy_vllm_replica() -> type:
    """Loader for ``RolloutReplicaRegistry.register("vllm", ...)`` (imports vLLM)."""
    from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMReplica

    return type("PolicyvLLMReplica", (PolicyNamedReplicaMixin, vLLMReplica), {})


def _adapter_class() -> type:
    from verl.workers.rollout.vllm_rollout.vllm_rollout import ServerAdapter

    return type("PolicyvLLMServerAdapter", (PolicyNamedAdapterMixin, ServerAdapter), {"__module__": __name__})


def __getattr__(name: str) -> Any:
    # verl resolves ("vllm", "async") by importing this module and reading this attribute.
    if name == "PolicyvLLMServerAdapter":
        cls = _adapter_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
