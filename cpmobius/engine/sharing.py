"""How the two policies share the devices: one resource pool, one awake rollout engine, the start-up order.

`EngineGuard` keeps at most one policy's rollout engine awake: activating one puts the other to
sleep first (verl's hybrid sleep discards weights, so activation always re-syncs them).
`start_policies` starts policies after `start_ray`: where no engine profiles device memory at start-up, every
policy's rollout servers start while its models build; else the models build at once, then the engines.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import DictConfig

Policy = Any  # a `cpmobius.engine.policy.Policy` (which imports this module)


class RayStartError(RuntimeError):
    """Ray could not start on this machine; nothing has run."""


def start_ray(cfg: DictConfig) -> None:
    """`ray.init` with verl's runtime env (`config.ray_init_kwargs`), unless Ray is already up. The
    caller's SIGTERM handler, which ``ray.init`` replaces, is put back.

    Raises:
        RayStartError: Ray's own start failed (e.g. its node did not come up in time on an overloaded
            machine), with the first line of Ray's message; the driver prints it as one line, exit 1.
    """
    import ray

    from cpmobius.engine.config import ray_init_kwargs

    if ray.is_initialized():
        return
    handler = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(**ray_init_kwargs(cfg))
    except Exception as error:
        first_line = (str(error).strip().splitlines() or ["no message"])[0]
        raise RayStartError(
            f"Ray did not start ({type(error).__name__}: {first_line}); nothing has run: "
            "run the same command again once the machine is less loaded"
        ) from error
    if callable(handler):
        signal.signal(signal.SIGTERM, handler)


@dataclass
class EngineGuard:
    """At most one policy's rollout engine awake at a time, and a count of switches.

    Attributes:
        awake: the policy whose engine is awake, or None.
        switches: how many times an engine was woken (weight syncs into a rollout engine).
    """

    awake: Optional[Policy] = None
    switches: int = 0
    history: list[str] = field(default_factory=list)

    def before_wake(self, policy: Policy) -> None:
        if self.awake is not None and self.awake is not policy:
            self.awake.deactivate()
        self.switches += 1
        self.history.append(policy.name)

    def after_wake(self, policy: Policy) -> None:
        self.awake = policy

    def after_sleep(self, policy: Policy) -> None:
        if self.awake is policy:
            self.awake = None


def make_resource_pool(cfg: DictConfig) -> Any:
    """The Ray resource pool both policies share: ``n_gpus_per_node`` devices on each of ``nnodes``.

    ``max_colocate_count=3`` lets the two policies' worker groups (and verl's helpers) share each
    device in Ray's books; apart from building their models at start-up (`start_policies`) they never
    compute at the same time.
    """
    from verl.single_controller.ray import RayResourcePool

    return RayResourcePool(
        process_on_nodes=[int(cfg.trainer.n_gpus_per_node)] * int(cfg.trainer.nnodes),
        use_gpu=True,
        max_colocate_count=3,
        name_prefix="cpmobius_",
    )


def start_policies(*policies: Policy) -> tuple[Policy, ...]:
    """Start policies that share the devices: their rollout servers start while their models build, where
    no engine sizes its KV cache from a memory profile; else the models build at once, then the servers.

    Building the FSDP models needs no exclusive device, so the policies build theirs concurrently (one H200,
    both at the 1.5B shape: 70.6 + 60.3 s one after the other, 101.5 s of wall clock at once — host copies
    for the offload contend). A vLLM server's start is mostly its own imports and process spawns: its first
    device allocation came ~90 s after its start (one H200, 1.5B shape), the builds took 46 s. So where no
    engine profiles memory (`Policy.profiles_memory_at_start`: vLLM given
    ``engine_kwargs.vllm.kv_cache_memory_bytes``, the HF rollout), every policy's servers and models start at
    once (`launch_while_models_build`). Else the builds come first, then one policy's engine at a time —
    vLLM's profile fails ("Error in memory profiling") when another process frees device memory meanwhile
    (a build offloading, another engine going to sleep after its start). One H200, 1.5B shape: the two vLLM
    servers took 105 + 98 s one after the other.

    Returns:
        the policies, started (as `Policy.start` leaves one).
    """
    if not any(policy.profiles_memory_at_start for policy in policies):
        for policy in policies:
            policy.start_workers()
        if len(policies) == 1:
            launch_while_models_build(policies[0])
            return policies
        with ThreadPoolExecutor(max_workers=len(policies), thread_name_prefix="policy_start") as pool:
            for started in [pool.submit(launch_while_models_build, policy) for policy in policies]:
                started.result()  # re-raises a policy's start-up error here
        return policies
    for policy in policies:
        policy.start_models()
    for policy in policies:
        policy.wait_models()
    for policy in policies:
        policy.start_rollout()
    return policies


# How long a policy's model build waits for verl to have asked its workers for their devices (the
# rollout servers' actors then exist): past it, the build starts anyway and the servers' query waits
# behind it (the start-up is then as long as building first, nothing worse).
SERVER_QUERY_WAIT_S = 60.0


def launch_while_models_build(policy: Policy) -> Policy:
    """Launch ``policy``'s rollout servers, begin its model build once verl has asked the training workers
    for their node and devices, wait for both, then `Policy.finish_start`.

    The order matters: a worker runs one call at a time, and verl's server launch asks each worker with a
    call of its own (``__ray_call__``); sent after ``init_model``, it would wait the whole build. Ray runs
    one caller's calls to an actor in the order they were sent, and verl creates the named server actors
    only once every answer is in, so the build is sent once this policy's first server actor exists
    (`cpmobius.engine.naming.server_actor_prefix`).

    Raises:
        whatever the server launch or the model build raised.
    """
    import ray

    from cpmobius.engine.naming import server_actor_prefix

    prefix = server_actor_prefix(policy.config.actor_rollout_ref.rollout)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{policy.name}_servers") as pool:
        launched = pool.submit(policy.launch_servers)
        deadline = time.monotonic() + SERVER_QUERY_WAIT_S
        while not launched.done() and time.monotonic() < deadline:
            if any(name.startswith(prefix) for name in ray.util.list_named_actors()):
                break
            time.sleep(0.05)
        policy.begin_model_build()
        launched.result()
    policy.wait_models()
    return policy.finish_start()
