"""verl's vLLM rollout with per-policy names, so the Coach and the Player can share GPUs.

Two policies in one Ray job collide in verl 0.9.1's vLLM rollout in two places:

- server actors: `vLLMReplica` names them ``vllm_server_{replica}_{node}`` and the in-worker
  `ServerAdapter` finds its server by that name; both policies want ``vllm_server_0_0``;
- weight-transfer sockets: the adapter (trainer side) sends weights over the ZMQ IPC socket
  ``/tmp/rl-colocate-zmq-{job}-replica-{replica}-rank-{rank}.sock`` and the vLLM worker (engine
  side) rebuilds the same path from ``VERL_RAY_JOB_ID`` and ``VERL_REPLICA_RANK``, set by its
  `vLLMHttpServer`. Both policies' engines would bind one path.

The mixins below put the policy name (`cpmobius.engine.naming`) into the server names on both
sides, and scope the job id of the socket path on both sides (`scoped_job_id`): the server sets
``VERL_RAY_JOB_ID=<job>-<policy>`` before it spawns the vLLM workers, and the adapter sends to the
path built from the same scoped id. The classes are registered in place of verl's own
(``RolloutReplicaRegistry`` entry "vllm", rollout-class registry ``("vllm", "async")``); without a
policy name they behave exactly like verl's. vLLM is imported only when verl asks for the classes.
"""

from __future__ import annotations

import os
from typing import Any

from cpmobius.engine.naming import policy_name_of, server_name_prefix

JOB_ID_ENV = "VERL_RAY_JOB_ID"  # read by verl's vLLM worker extension to build the socket path


def scoped_job_id(job_id: str, policy: str) -> str:
    """The job id a policy's weight sockets are keyed by: ``"<job>-<policy>"``, or ``job_id`` unnamed."""
    return f"{job_id}-{policy}" if policy else job_id


class PolicyNamedReplicaMixin:
    """Put in front of verl's `vLLMReplica`: its server actors carry the policy's name and run
    `PolicyvLLMHttpServer` (whose vLLM workers listen on the policy's own weight socket)."""

    config: Any
    server_class: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        if policy_name_of(self.config):
            import ray

            self.server_class = ray.remote(_policy_class("PolicyvLLMHttpServer"))

    def _get_server_name_prefix(self) -> str:
        return server_name_prefix(super()._get_server_name_prefix(), self.config)  # type: ignore[misc]


class PolicyNamedServerMixin:
    """Put in front of verl's `vLLMHttpServer`: the vLLM workers it spawns (they inherit its
    environment) build their weight-socket path from the policy-scoped job id."""

    config: Any

    def _post_init(self, cuda_visible_devices: str) -> None:
        policy = policy_name_of(self.config)
        if policy:
            os.environ[JOB_ID_ENV] = scoped_job_id(os.environ.get(JOB_ID_ENV, "0"), policy)
        super()._post_init(cuda_visible_devices)  # type: ignore[misc]


class PolicyNamedAdapterMixin:
    """Put in front of verl's vLLM `ServerAdapter`: it looks up its policy's server and sends
    weights to the socket its policy's vLLM workers listen on (`PolicyNamedServerMixin`)."""

    config: Any
    zmq_handle: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        policy = policy_name_of(self.config)
        if policy and hasattr(self, "zmq_handle"):
            import ray

            job_id = ray.get_runtime_context().get_job_id()
            marker = f"-zmq-{job_id}-replica-"
            if marker not in self.zmq_handle:
                raise RuntimeError(
                    f"unexpected verl weight-socket path {self.zmq_handle!r} (expected {marker!r} in it)"
                )
            self.zmq_handle = self.zmq_handle.replace(marker, f"-zmq-{scoped_job_id(job_id, policy)}-replica-")

    def _get_server_name_prefix(self) -> str:
        return server_name_prefix(super()._get_server_name_prefix(), self.config)  # type: ignore[misc]


def load_policy_vllm_replica() -> type:
    """Loader for ``RolloutReplicaRegistry.register("vllm", ...)`` (imports vLLM)."""
    return _policy_class("PolicyvLLMReplica")


def _build(name: str) -> type:
    if name == "PolicyvLLMReplica":
        from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMReplica

        return type(name, (PolicyNamedReplicaMixin, vLLMReplica), {"__module__": __name__})
    if name == "PolicyvLLMHttpServer":
        from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer

        return type(name, (PolicyNamedServerMixin, vLLMHttpServer), {"__module__": __name__})
    if name == "PolicyvLLMServerAdapter":
        from verl.workers.rollout.vllm_rollout.vllm_rollout import ServerAdapter

        return type(name, (PolicyNamedAdapterMixin, ServerAdapter), {"__module__": __name__})
    raise AttributeError(name)


def _policy_class(name: str) -> type:
    # Built once per process and kept as a module attribute, so Ray pickles the classes by reference
    # (a server actor process rebuilds its class by importing this module).
    if name not in globals():
        globals()[name] = _build(name)
    return globals()[name]


def __getattr__(name: str) -> Any:
    # verl resolves ("vllm", "async") by importing this module and reading this attribute; Ray
    # unpickles the server class the same way.
    if name in ("PolicyvLLMReplica", "PolicyvLLMHttpServer", "PolicyvLLMServerAdapter"):
        return _policy_class(name)
    raise AttributeError(name)
