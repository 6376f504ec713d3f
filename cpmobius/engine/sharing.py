"""How the two policies share the devices: one resource pool, one awake rollout engine, the start-up order.

`EngineGuard` keeps at most one policy's rollout engine awake: activating one puts the other to
sleep first (verl's hybrid sleep discards weights, so activation always re-syncs them).
`start_policies` starts policies after `start_ray`: where no engine profiles device memory at start-up, every
policy's rollout servers start while its models build, their engines after; else the models build at once, then
the engines.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Optional

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
    """Start policies that share the devices: their rollout servers' processes start while their models build,
    where no engine sizes its KV cache from a memory profile; else the models build at once, then the servers.

    Building the FSDP models is most of a policy's start-up and needs no exclusive device, so the policies build
    theirs concurrently (one H200, both at the 1.5B shape: 46 s at once). Half of a vLLM server's start is its own
    process starting and importing (~48 of 130 s), before any device memory. So where no engine profiles memory
    (`Policy.profiles_memory_at_start`: vLLM given ``engine_kwargs.vllm.kv_cache_memory_bytes``, the HF rollout),
    every policy's servers and models start at once, each engine once its policy's models are built
    (`launch_while_models_build`). Else the builds come first, then one policy's engine at a time — vLLM's
    profile fails ("Error in memory profiling") when another process frees device memory meanwhile (a build
    offloading, another engine going to sleep after its start). One H200, 1.5B shape: the two vLLM servers took
    105 + 98 s one after the other.

    Returns:
        the policies, started (as `Policy.start` leaves one).

    Raises:
        the first start-up error of any policy, as soon as it happens (the others' starts are not waited for).
    """
    if not any(policy.profiles_memory_at_start for policy in policies):
        for policy in policies:
            policy.start_workers()
        wait_all([Background(partial(launch_while_models_build, p), f"{p.name}_start") for p in policies])
        return policies
    for policy in policies:
        policy.start_models()
    for policy in policies:
        policy.wait_models()
    for policy in policies:
        policy.start_rollout()
    return policies


class Background:
    """``fn()`` in a daemon thread: never joined at the interpreter's exit, so a Ctrl-C or SIGTERM during
    start-up is not held up by a server start still in progress (Ray's shutdown ends it)."""

    def __init__(self, fn: Callable[[], Any], name: str) -> None:
        self._outcome: Optional[tuple[bool, Any]] = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._outcome = (True, fn())
        except BaseException as error:  # handed to whoever asks for the result
            self._outcome = (False, error)

    def done(self) -> bool:
        return not self._thread.is_alive()

    def failed(self) -> bool:
        return self.done() and self._outcome is not None and not self._outcome[0]

    def result(self, poll_s: float = 0.1) -> Any:
        """Wait (interruptibly: a signal reaches the caller at once) and return ``fn``'s result or raise its error."""
        while self._thread.is_alive():
            self._thread.join(poll_s)
        ok, value = self._outcome if self._outcome is not None else (False, RuntimeError("no outcome"))
        if not ok:
            raise value
        return value


def wait_all(tasks: list[Background], poll_s: float = 0.1) -> list[Any]:
    """Every task's result; the first error raised as soon as any task fails."""
    while not all(task.done() for task in tasks):
        for task in tasks:
            if task.failed():
                task.result()
        time.sleep(poll_s)
    return [task.result() for task in tasks]


# How long a policy's model build waits for verl to have asked its workers for their devices (the rollout
# servers' actors then exist): past it, the build starts anyway and the servers' query waits behind it (the
# start-up is then as long as building first, nothing worse).
SERVER_QUERY_WAIT_S = 60.0


def launch_while_models_build(policy: Policy, poll_s: float = 0.05) -> Policy:
    """Launch ``policy``'s rollout servers; begin its model build once verl has asked the training workers for
    their node and devices; once the models are built, let the servers' engines start; then `Policy.finish_start`.

    The order matters: a worker runs one call at a time, and verl's server launch asks each worker with a call of
    its own (``__ray_call__``); sent after ``init_model``, it would wait the whole build. Ray runs one caller's
    calls to an actor in the order they were sent, and verl creates the named server actors only once every
    answer is in, so the build is sent once a server actor of this policy appears that was not there before
    (`cpmobius.engine.naming.server_actor_prefix`; after `SERVER_QUERY_WAIT_S`, or at once when Ray cannot list
    its actors, it is sent anyway). The servers' engines wait for the build behind a gate
    (`cpmobius.engine.start_gate`): no engine takes device memory, or checks how much is free, beside a build.

    Raises:
        whatever the server launch or the model build raised (a launch that fails before the build is sent
        sends none).
    """
    import ray
    from omegaconf import open_dict

    from cpmobius.engine.naming import server_actor_prefix
    from cpmobius.engine.start_gate import GATE_KEY, start_gate

    rollout = policy.config.actor_rollout_ref.rollout
    gate_name, gate = start_gate(policy.name)
    with open_dict(rollout):
        rollout.custom = {**(rollout.get("custom", None) or {}), GATE_KEY: gate_name}
    prefix = server_actor_prefix(rollout)

    def servers() -> Optional[set[str]]:
        try:
            return {name for name in ray.util.list_named_actors() if name.startswith(prefix)}
        except Exception:  # Ray cannot list its actors (None): the build goes first, as without the overlap
            return None

    earlier = servers() or set()  # an earlier start's actors in this Ray session are not this launch's
    try:
        launch = Background(policy.launch_servers, f"{policy.name}_servers")
        deadline = time.monotonic() + SERVER_QUERY_WAIT_S
        while not launch.done() and time.monotonic() < deadline:
            listed = servers()
            if listed is None or listed - earlier:
                break
            time.sleep(poll_s)
        if launch.failed():
            launch.result()
        policy.begin_model_build()
        policy.wait_models()
        ray.get(gate.open.remote())
        launch.result()
    finally:
        ray.kill(gate)
        with open_dict(rollout):
            rollout.custom = {k: v for k, v in rollout.custom.items() if k != GATE_KEY}
    return policy.finish_start()
