"""The rollout servers' start gate: a server's process starts while its policy's models build, its engine after.

Half of a vLLM server's start is its own process starting and importing (~48 of 130 s on one H200, 1.5B shape),
which needs no device memory; the engine then takes the device memory its KV cache and weights need, and checks
that much is free. `cpmobius.engine.sharing.launch_while_models_build` lets the servers start during the FSDP
builds: it opens a `ModelsBuilt` actor and names it in ``rollout.custom.engine_after_models``; each server's
``launch_server`` waits on it (`ModelsBuiltGate.wait_for_models`), and the driver opens it once the policy's
models are built (and offloaded), so an engine never starts beside a build, however long the build takes.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from cpmobius.engine.naming import custom_of

GATE_KEY = "engine_after_models"  # in rollout.custom (the free dict verl passes to the servers): the gate's name


class ModelsBuilt:
    """The gate, one Ray actor per policy start: `wait` returns once `open` was called."""

    def __init__(self) -> None:
        self._open = asyncio.Event()

    async def wait(self) -> None:
        await self._open.wait()

    async def open(self) -> None:
        self._open.set()


def start_gate(policy_name: str) -> tuple[str, Any]:
    """A new, closed `ModelsBuilt` actor for one start of ``policy_name``: ``(actor name, handle)``."""
    import ray

    name = f"{policy_name}_models_built_{uuid.uuid4().hex[:8]}"
    return name, ray.remote(ModelsBuilt).options(name=name, num_cpus=0).remote()


class ModelsBuiltGate:
    """Mixed into an async rollout server actor (verl's vLLM server through `cpmobius.engine.vllm_rollout`, and
    `cpmobius.engine.hf_server.HFGenerationServer`). ``config`` is its rollout config."""

    config: Any

    async def wait_for_models(self) -> None:
        """Wait until the gate named in ``custom.engine_after_models`` opens; return at once when none is named."""
        name = custom_of(self.config).get(GATE_KEY)
        if name:
            import ray

            await ray.get_actor(name).wait.remote()
