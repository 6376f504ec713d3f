"""The driver side of the ``rollout.name=hf`` rollout: verl's `RolloutReplica` for HF generation servers.

`HFRolloutReplica` launches one `cpmobius.engine.hf_server.HFGenerationServer` Ray actor per
replica, on the node and device of the replica's trainer worker (as verl's vLLM replica does),
named per policy (`cpmobius.engine.naming.hf_server_name`). It is registered with verl's
`RolloutReplicaRegistry` under ``hf`` (`cpmobius.engine.extensions.load_hf_replica`), so that
verl's `LLMServerManager`, agent loop and checkpoint engine drive it exactly as they drive vLLM.
"""

from __future__ import annotations

import ray
from verl.workers.rollout.replica import RolloutReplica

from cpmobius.engine.hf_server import HFGenerationServer
from cpmobius.engine.naming import HF_BACKEND_PREFIX, hf_server_name


class HFRolloutReplica(RolloutReplica):
    """verl rollout replica backed by one `HFGenerationServer` per replica (hybrid mode).

    Like verl's vLLM replica, the server is placed on the node of the replica's trainer worker and
    sees the same device. Only tensor/data/pipeline parallel size 1 is supported.
    """

    async def launch_servers(self) -> None:
        if self.world_size != 1:
            raise ValueError(
                "rollout.name=hf serves one device per replica: set tensor_model_parallel_size, "
                f"data_parallel_size and pipeline_model_parallel_size to 1 (world size is {self.world_size})"
            )
        worker = self.workers[0]
        node_id, device_ids = await worker.__ray_call__.remote(
            lambda self: (
                ray.get_runtime_context().get_node_id(),
                ray.get_runtime_context().get_accelerator_ids().get("GPU", []),
            )
        )
        on_cuda = _cluster_has_cuda()
        name = hf_server_name(self.config, self.replica_rank, 0)
        env_vars = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"} if on_cuda else {}
        server = (
            ray.remote(HFGenerationServer)
            .options(
                name=name,
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_id, soft=False
                ),
                runtime_env={"env_vars": env_vars},
                max_concurrency=self.max_concurrency,
                num_cpus=0,
            )
            .remote(
                config=self.config,
                model_config=self.model_config,
                rollout_mode=self.rollout_mode,
                replica_rank=self.replica_rank,
                cuda_visible_devices=",".join(str(d) for d in device_ids) if on_cuda else None,
            )
        )
        await server.launch_server.remote()
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"hf://{name}"

    def _get_server_name_prefix(self) -> str:
        return HF_BACKEND_PREFIX


def _cluster_has_cuda() -> bool:
    from verl.utils.device import get_device_name

    return get_device_name() == "cuda"
