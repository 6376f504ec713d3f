"""A CPU platform for verl 0.9.1, registered through `verl.plugin.platform.PlatformRegistry`.

verl 0.9.1 ships platforms for NVIDIA, Ascend and ROCm only, and falls back to "nvidia" on a
machine without an accelerator. This platform lets verl's own FSDP engine, worker groups and
rollout plumbing run on a CPU with the gloo backend. It is selected with ``VERL_PLATFORM=cpu``
and imported in every Ray worker through ``VERL_USE_EXTERNAL_MODULES=cpmobius.engine.extensions``
(verl imports those modules at ``import verl``).

What a CPU needs beyond the platform itself is installed by `install_cpu_engine_fixes`, only in
the processes that build a training engine, and only when this platform is active:

1. verl builds its process-group backend as ``"cpu:gloo,{device}:{backend}"``; on this platform
   that is ``"cpu:gloo,cpu:gloo"``, which torch rejects. The worker module's reference to
   `initialize_global_process_group_ray` is rebound to a version that passes ``backend="gloo"``.
2. verl's FSDP2 reference model uses ``CPUOffloadPolicy(pin_memory=True)``; pinning needs an
   accelerator. The engine module's reference to `CPUOffloadPolicy` is rebound to one that
   never pins (the data already lives in host memory, so pinning would buy nothing).
3. verl registers its FSDP engines for devices "cuda" and "npu"; they are registered for "cpu"
   too (an `EngineRegistry` entry, no code change).
4. verl's training worker pins itself to its GPU's NUMA node through libnuma and NVML; with no GPU
   that can only fail, printing "Failed to set NUMA affinity" twice per policy. The worker
   module's reference to `set_numa_affinity` is rebound to a no-op.
"""

from __future__ import annotations

import functools
import logging
import os
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Optional

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

logger = logging.getLogger(__name__)

PLATFORM_NAME = "cpu"


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class _NullStream:
    """Stands in for a device stream: every CPU op is already ordered."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> "_NullEvent":
        return _NullEvent()

    def __enter__(self) -> "_NullStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _NullEvent:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True


@contextmanager
def _stream_context(stream: Any = None):
    yield


def _make_device_module() -> SimpleNamespace:
    """The ``torch.<device>``-style namespace verl calls through ``get_torch_device()``.

    Every function verl 0.9.1 calls on it is listed (grep of the wheel): memory and stream calls
    are harmless no-ops, RNG calls map to the CPU generator, memory figures read as zero.
    """
    return SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 1,
        current_device=lambda: torch.device("cpu"),
        set_device=_noop,
        synchronize=_noop,
        empty_cache=_noop,
        ipc_collect=_noop,
        get_device_name=lambda *a: "cpu",
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        get_rng_state=lambda *a: torch.get_rng_state(),
        set_rng_state=lambda state, *a: torch.set_rng_state(state),
        mem_get_info=lambda *a: (0, 0),
        memory_allocated=lambda *a: 0,
        memory_reserved=lambda *a: 0,
        max_memory_allocated=lambda *a: 0,
        max_memory_reserved=lambda *a: 0,
        reset_peak_memory_stats=_noop,
        set_per_process_memory_fraction=_noop,
        current_stream=lambda *a: _NullStream(),
        Stream=_NullStream,
        Event=_NullEvent,
        stream=_stream_context,
    )


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl platform for host CPUs: device "cpu", gloo collectives, Ray resource "GPU".

    The Ray resource stays "GPU" because verl's resource pools ask Ray for GPUs; on a CPU
    machine Ray is started with a logical GPU count (`cpmobius.engine.config`), so placement succeeds
    while every tensor stays in host memory.
    """

    _device_module = _make_device_module()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> SimpleNamespace:
        return self._device_module

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a GPU machine must not land here by accident.
        return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME

    def current_device(self) -> torch.device:  # type: ignore[override]
        # verl passes this straight to FSDP (`device_id=`) and to `.to()`; an int would mean CUDA.
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: Optional[int] = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[Optional[int], Optional[int]]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def is_cpu_platform() -> bool:
    """True when verl's platform singleton in this process is `PlatformCPU`."""
    from verl.plugin.platform import get_platform

    return isinstance(get_platform(), PlatformCPU)


@functools.cache
def install_cpu_engine_fixes() -> bool:
    """Apply the four CPU fixes of the module docstring in this process, once.

    Call it in a process that is about to build a verl training engine (the policy worker does,
    before `init_model`). Does nothing unless the CPU platform is active.

    Returns:
        True when the fixes were installed, False on any other platform.
    """
    if not is_cpu_platform():
        return False
    import verl.workers.engine_workers as engine_workers
    from torch.distributed.fsdp import CPUOffloadPolicy
    from verl.utils.distributed import initialize_global_process_group_ray
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl

    # 1. "cpu:gloo,cpu:gloo" → "gloo" (only the worker module's binding is replaced).
    engine_workers.initialize_global_process_group_ray = functools.partial(
        initialize_global_process_group_ray, backend="gloo"
    )

    # 2. No memory pinning without an accelerator (only the FSDP engine module's binding).
    def _unpinned_offload_policy(*args: Any, **kwargs: Any) -> CPUOffloadPolicy:
        kwargs["pin_memory"] = False
        return CPUOffloadPolicy(*args, **kwargs)

    transformer_impl.CPUOffloadPolicy = _unpinned_offload_policy

    # 3. The FSDP engines, registered for this device as well.
    for model_type, engine_cls in (
        ("language_model", transformer_impl.FSDPEngineWithLMHead),
        ("value_model", transformer_impl.FSDPEngineWithValueHead),
    ):
        registered = EngineRegistry._engines.get(model_type, {}).get("fsdp2", {})
        if PLATFORM_NAME not in registered:
            EngineRegistry.register(model_type=model_type, backend=["fsdp", "fsdp2"], device=PLATFORM_NAME)(engine_cls)
    # 4. No NUMA pinning to a GPU that is not there (only the worker module's binding).
    engine_workers.set_numa_affinity = _noop
    logger.info("cpmobius: CPU engine fixes installed (gloo backend, unpinned offload, FSDP on cpu, no NUMA pinning)")
    return True
