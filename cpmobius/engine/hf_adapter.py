"""The in-worker side of the ``rollout.name=hf`` rollout: weight sync and sleep/wake for its server.

`HFServerAdapter` lives inside the trainer worker, registered in verl's rollout-class registry
under ``("hf", "async")`` (`cpmobius.engine.extensions`). It receives the weights verl's
checkpoint engine streams out of the FSDP engine and sends them to the policy's
`cpmobius.engine.hf_server.HFGenerationServer` in buckets; the server checks that every parameter
arrived.
"""

from __future__ import annotations

import os
from typing import Any, Generator, Optional

import ray
import torch
from verl.workers.rollout.base import BaseRollout

from cpmobius.engine.hf_sampling import torch_dtype
from cpmobius.engine.naming import hf_server_name


class HFServerAdapter(BaseRollout):
    """The in-worker side of the HF rollout: sleep/wake and weight sync for its server.

    verl's `ActorRolloutRefWorker.update_weights` calls `resume`, `update_weights` and `resume`
    again; every rank of the trainer group runs it, since gathering full tensors out of FSDP is a
    collective. Only the first rank of each replica talks to the server.
    """

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1, **kwargs: Any):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        rollout_world_size = (
            self.config.tensor_model_parallel_size
            * self.config.data_parallel_size
            * self.config.pipeline_model_parallel_size
        )
        self.replica_rank = rank // rollout_world_size if replica_rank == -1 else replica_rank
        self._has_server = rank % rollout_world_size == 0
        self._server: Optional[ray.actor.ActorHandle] = None
        self.bucket_bytes = int(self.config.checkpoint_engine.update_weights_bucket_megabytes) << 20
        on_cuda = torch.cuda.is_available()
        self.transfer_dtype = torch_dtype(self.config.dtype) if on_cuda else None

    @property
    def server(self) -> Optional[ray.actor.ActorHandle]:
        if self._has_server and self._server is None:
            self._server = ray.get_actor(hf_server_name(self.config, self.replica_rank, 0))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        if self.server is not None:
            await self.server.wake_up.remote(tags=tags)

    async def release(self) -> None:
        if self.server is not None:
            await self.server.sleep.remote()

    @torch.no_grad()
    async def update_weights(
        self,
        weights: Generator[tuple[str, torch.Tensor], None, None],
        global_steps: Optional[int] = None,
        wire_format: str = "named_tensors",
        **kwargs: Any,
    ) -> None:
        """Send full tensors to the server in buckets of ``update_weights_bucket_megabytes``.

        Raises:
            NotImplementedError: for LoRA adapters or delta wire formats.
        """
        if wire_format != "named_tensors" or kwargs.get("peft_config") is not None:
            raise NotImplementedError("the HF rollout syncs full named tensors only (no LoRA, no delta sync)")
        bucket: list[tuple[str, torch.Tensor]] = []
        bucket_size = 0
        pending = None
        for name, tensor in weights:  # every rank iterates: full_tensor() is a collective
            if self.server is None:
                continue
            if self.transfer_dtype is not None and tensor.is_floating_point():
                tensor = tensor.to(self.transfer_dtype)
            tensor = tensor.detach().to("cpu", copy=True)
            bucket.append((name, tensor))
            bucket_size += tensor.numel() * tensor.element_size()
            if bucket_size >= self.bucket_bytes:
                if pending is not None:
                    await pending
                pending = self.server.load_weights.remote(bucket, False)
                bucket, bucket_size = [], 0
        if self.server is None:
            return
        if pending is not None:
            await pending
        await self.server.load_weights.remote(bucket, True)
        if global_steps is not None:
            await self.server.set_global_steps.remote(global_steps)

    def generate_sequences(self, prompts: Any) -> Any:
        raise NotImplementedError("generate through the HF server (LLMServerManager client), not the adapter")
