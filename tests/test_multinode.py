"""Two nodes: a Ray cluster of two nodes on this machine (Ray's own `ray.cluster_utils.Cluster`, one
logical GPU each) and ``trainer.nnodes=2``. The driver joins it through ``RAY_ADDRESS`` as it joins a real
cluster; both policies' workers and rollout replicas spread over both nodes, and two loop steps run with a
checkpoint (about 2 minutes on 2 cores). ``pytest -k multinode`` selects it.

What one machine cannot show (NCCL between hosts, real IP addresses, a checkpoint folder every node can
reach) is listed in docs/multinode.md."""

from __future__ import annotations

import pytest
from stand_ins import FAST_TOY

pytestmark = pytest.mark.slow


@pytest.fixture
def two_node_cluster(monkeypatch):
    """A head node and a second node, each with 8 logical CPUs and 1 logical GPU; ``RAY_ADDRESS`` names it."""
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    node = {"num_cpus": 8, "num_gpus": 1, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=node)
    cluster.add_node(**{k: v for k, v in node.items() if k != "include_dashboard"})
    cluster.wait_for_nodes()
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def node_of(actor) -> str:
    import ray

    return ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()))


def test_multinode_two_steps_with_both_policies_spread_over_both_nodes(two_node_cluster, tmp_path, model_cache):
    import ray

    from cpmobius.config import compose_config
    from cpmobius.main import build_loop

    cfg = compose_config(
        [
            f"model.cache_dir={model_cache / 'fast_toy'}",
            f"trainer.default_local_dir={tmp_path}",
            *FAST_TOY,
            "trainer.nnodes=2",
            "trainer.n_gpus_per_node=1",
            "trainer.total_training_steps=2",
            "trainer.save_freq=2",
            "filter.quota=2",
            "player.n=4",
            "validation.size=8",
        ]
    )
    loop = build_loop(cfg)
    nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert len(nodes) == 2
    for policy in loop.policies.values():
        assert policy.worker_group.world_size == 2
        assert {node_of(worker) for worker in policy.worker_group._workers} == nodes, policy.name
        assert {node_of(server) for server in policy.server_handles()} == nodes, policy.name
    state = loop.fit()
    assert state.step == 2 and len(state.delta_t_history) == 2
    assert sorted(p.name for p in (tmp_path / "global_step_2" / "player").glob("model_world_size_*")) == [
        "model_world_size_2_rank_0.pt",
        "model_world_size_2_rank_1.pt",
    ]
