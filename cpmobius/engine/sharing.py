"""How the two policies share the devices: one resource pool, one awake rollout engine, the start-up order.

`EngineGuard` keeps at most one policy's rollout engine awake: activating one puts the other to
sleep first (verl's hybrid sleep discards weights, so activation always re-syncs them).
`start_policies` starts policies so that their models build at once, then their engines (at once where
no engine profiles device memory at start-up), after `start_ray`.
"""

from __future__ import annotations

import json
import os
import re
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig

from cpmobius.error_text import first_line

Policy = Any  # a `cpmobius.engine.policy.Policy` (which imports this module)


class RayStartError(RuntimeError):
    """Ray could not start on this machine; nothing has run."""


# Ray 2.x's own waits at start-up, each read from the environment when Ray (or one of its processes) starts:
# how long a process waits for the GCS ("Failed to connect to GCS within 60 seconds"), how long the driver
# waits for its node to register, and how many seconds the GCS may take to open its port.
RAY_START_WAITS = (
    "RAY_gcs_rpc_server_reconnect_timeout_s=300",
    "RAY_gcs_server_request_timeout_seconds=300",
    "RAY_gcs_server_port_wait_time_s=120",
)
_TIMEOUT_WORDS = re.compile(r"timed out|timeout|within \d+ seconds|failed to (start|connect to) gcs", re.IGNORECASE)


def describe_ray_start_error(error: BaseException) -> str:
    """The one line `start_ray` raises with: Ray's error's first line and, for a wait that ran out (an overloaded
    machine), the environment variables that give Ray longer (`RAY_START_WAITS`)."""
    cause = f"{type(error).__name__}: {first_line(str(error))}"
    if isinstance(error, TimeoutError) or _TIMEOUT_WORDS.search(str(error)):
        return (
            f"Ray did not start in time ({cause}); nothing has run: the machine is probably overloaded. Run the "
            f"same command again when it is less loaded, or give Ray longer: {' '.join(RAY_START_WAITS)} "
            "python -m cpmobius.main ..."
        )
    return f"Ray did not start ({cause}); nothing has run: run the same command again once the machine is less loaded"


def start_ray(cfg: DictConfig) -> None:
    """`ray.init` with verl's runtime env (`config.ray_init_kwargs`), unless Ray is already up. The
    caller's SIGTERM handler, which ``ray.init`` replaces, is put back. A Ray of our own (no ``RAY_ADDRESS``)
    first ends what a killed launch of the same run folder left running (`end_leftover_ray`, one line), and
    records its own processes in the run folder for the next launch (`record_ray_processes`).

    Raises:
        RayStartError: Ray's own start failed (e.g. its node did not come up in time on an overloaded
            machine), with the first line of Ray's message and, for a timeout, how to give Ray longer
            (`describe_ray_start_error`); the driver prints it as one line, exit 1.
    """
    import ray

    from cpmobius.engine.config import ray_init_kwargs

    if ray.is_initialized():
        return
    kwargs = ray_init_kwargs(cfg)
    own_cluster = kwargs.get("address") == "local"  # not a cluster joined through RAY_ADDRESS
    run_dir = Path(str(cfg.trainer.default_local_dir))
    if own_cluster:
        said = end_leftover_ray(run_dir)
        if said:
            print(said, flush=True)
    handler = signal.getsignal(signal.SIGTERM)
    already_running = _child_pids()  # the toy pretraining, the Coach warm-up: not Ray's
    try:
        ray.init(**kwargs)
    except Exception as error:
        raise RayStartError(describe_ray_start_error(error)) from error
    if callable(handler):
        signal.signal(signal.SIGTERM, handler)
    if own_cluster:
        record_ray_processes(run_dir, already_running)


# ---------------------------------------------------------------------------- what a killed launch left running

# In the run folder: the Ray session this launch started and its processes (pid and start time, so that a pid
# the system has given to another process since is never taken for ours).
RAY_PROCESSES_FILE = "ray_processes.json"


def _identity(process: Any) -> dict[str, Any]:
    return {"pid": process.pid, "create_time": process.create_time(), "name": process.name()}


def _child_pids() -> set[int]:
    import psutil

    return {child.pid for child in psutil.Process().children(recursive=True)}


def record_ray_processes(run_dir: Path, not_ray: set[int] = frozenset()) -> Optional[Path]:
    """Write `RAY_PROCESSES_FILE` in ``run_dir``: this driver, its Ray session folder and the processes the
    driver's ``ray.init`` started (GCS, raylet, Ray's agents, ...): its descendants but those in ``not_ray``
    (the pids that ran before). None when Ray was not started in this process."""
    import psutil
    import ray

    node = getattr(ray._private.worker, "_global_node", None)
    if node is None:
        return None
    driver = psutil.Process()
    processes = []
    for child in driver.children(recursive=True):
        try:
            if child.pid not in not_ray:
                processes.append(_identity(child))
        except psutil.Error:  # ended meanwhile
            pass
    record = {"session_dir": node.get_session_dir_path(), "driver": _identity(driver), "processes": processes}
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RAY_PROCESSES_FILE
    path.write_text(json.dumps(record, indent=1))
    return path


def _alive(entry: dict[str, Any]) -> Any:
    """The process of a recorded ``{"pid", "create_time"}`` if it still runs, else None."""
    import psutil

    try:
        process = psutil.Process(int(entry["pid"]))
        return process if abs(process.create_time() - float(entry["create_time"])) < 1e-3 else None
    except (psutil.Error, KeyError, TypeError, ValueError):
        return None


def leftover_ray_processes(run_dir: Path) -> list[Any]:
    """The processes a killed launch of ``run_dir`` left running: those of its `RAY_PROCESSES_FILE` still alive
    with the same start time, and any process whose command line names its Ray session folder. Empty when
    there is no record, or when the launch that wrote it still runs (its Ray is in use)."""
    import psutil

    path = run_dir / RAY_PROCESSES_FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if _alive(record.get("driver", {})) is not None:
        return []
    found = {process.pid: process for process in map(_alive, record.get("processes", [])) if process is not None}
    session = str(record.get("session_dir") or "")
    if session:
        for process in psutil.process_iter(["cmdline"]):
            if process.pid not in found and any(session in part for part in process.info["cmdline"] or ()):
                found[process.pid] = process
    found.pop(os.getpid(), None)
    return list(found.values())


def end_leftover_ray(run_dir: Path, grace_s: float = 5.0) -> Optional[str]:
    """End the Ray processes a killed launch of ``run_dir`` left running (`leftover_ray_processes`): SIGTERM,
    then SIGKILL after ``grace_s`` seconds. The record itself is replaced by this launch's (`start_ray`).

    Returns:
        One line naming what was ended, or None when nothing was running.
    """
    import psutil

    processes = leftover_ray_processes(run_dir)
    if processes:
        for process in processes:
            try:
                process.terminate()
            except psutil.Error:
                pass
        _, still = psutil.wait_procs(processes, timeout=grace_s)
        for process in still:
            try:
                process.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(still, timeout=grace_s)
    if not processes:
        return None
    names = ", ".join(f"{process.pid}" for process in processes)
    return (
        f"[cpmobius] ended {len(processes)} Ray process(es) an earlier, killed launch of {run_dir} left running "
        f"(pids {names})"
    )


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
    """Start policies that share the devices: their models build at once, then their rollout servers.

    Building the FSDP models needs no exclusive device, so the policies build theirs concurrently (one H200,
    both at the 1.5B shape: 70.6 + 60.3 s one after the other, 101.5 s of wall clock at once — host copies for
    the offload contend). The rollout servers start once every model is built: at once when no engine sizes
    its KV cache from a memory profile (`Policy.profiles_memory_at_start`: vLLM given
    ``engine_kwargs.vllm.kv_cache_memory_bytes``, or the CPU platform's servers), else one policy at a time —
    vLLM's profile fails ("Error in memory profiling") when another process frees device memory meanwhile
    (another engine going to sleep after its start).
    One H200, 1.5B shape: the two vLLM servers took 105 + 98 s one after the other, 130 and 129 s side by
    side (start-up 287 s → 195 s). Starting each server's process during its policy's build, its engine once
    the build was done, measured no gain (195.2 s against 195.3): a server can only start once verl has the
    workers' devices, and the workers' own process start is most of a build (about 30 of 35 s), so there was
    little to overlap; the rest is vLLM's own chain of processes after its engine is launched.

    Returns:
        the policies, started (as `Policy.start` leaves one).
    """
    for policy in policies:
        policy.start_models()
    for policy in policies:
        policy.wait_models()
    if len(policies) > 1 and not any(policy.profiles_memory_at_start for policy in policies):
        with ThreadPoolExecutor(max_workers=len(policies), thread_name_prefix="rollout_start") as pool:
            for started in [pool.submit(policy.start_rollout) for policy in policies]:
                started.result()  # re-raises a policy's start-up error here
    else:
        for policy in policies:
            policy.start_rollout()
    return policies
