"""Two ranks per policy on the CPU platform (``trainer.n_gpus_per_node=2``, gloo), as on a GPU node:
both policies FSDP-sharded over the ranks, one rollout replica per rank, two loop steps with a checkpoint
after each; then a resume from step 1 on the same two ranks replays step 2 into the same state (loop state,
both policies' weight and optimizer shards of every rank), every replica serves the trained weights, and
the start-up estimate of a checkpoint's size matches the files (about 2 minutes on 2 cores)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from stand_ins import FAST_TOY

pytestmark = pytest.mark.slow

RANKS = 2
# The quick toy world (`stand_ins`) at its own learning rates: Δt (the expected accuracy) moves at every Player
# update, so the Coach is updated too and both optimizers hold state to compare; both steps train. (At the large
# steps of `stand_ins.LARGE_STEPS` the Player boxed no answer after step 1, and step 2 was skipped: a replay of
# nothing.)


def compose(out_dir: Path, cache_dir: Path):
    from cpmobius.config import compose_config

    return compose_config(
        [
            f"model.cache_dir={cache_dir}",
            f"trainer.default_local_dir={out_dir}",
            *FAST_TOY,
            f"trainer.n_gpus_per_node={RANKS}",
            "trainer.total_training_steps=2",
            "trainer.save_freq=1",
            "filter.quota=2",
            "player.n=4",
            "validation.size=16",
        ]
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory, model_cache):
    """The loop after two steps at two ranks, and the folder of its checkpoints."""
    import ray

    from cpmobius.main import build_loop

    out = tmp_path_factory.mktemp("two_ranks")
    loop = build_loop(compose(out, model_cache / "fast_toy"))
    loop.fit()
    yield loop, out
    ray.shutdown()


def test_both_policies_are_sharded_over_the_ranks_with_a_replica_each(run):
    loop, out = run
    for name, policy in loop.policies.items():
        assert policy.worker_group.world_size == RANKS
        assert len(set(policy.server_handles())) == RANKS  # one rollout replica per rank, as verl lays them out
        files = sorted(p.name for p in (out / "global_step_2" / name).glob("model_world_size_*"))
        assert files == [f"model_world_size_{RANKS}_rank_{r}.pt" for r in range(RANKS)], files


def test_every_replica_serves_the_weights_the_trainer_holds(run, harness):
    import ray
    import torch

    loop, _ = run
    for policy in (loop.player, loop.coach):
        policy.activate()
        batch = policy.generate([[{"role": "user", "content": "What is 3 + 4?"}]], n=2)
        prompt, response = harness.unpad_row(batch, 0)
        trained = harness.trained_log_probs(policy, batch, 0)
        for handle in policy.server_handles():
            served = torch.tensor(ray.get(handle.compute_log_probs.remote(prompt, response)))
            assert torch.allclose(served, trained, atol=1e-4), policy.name


def shards(folder: Path) -> dict[str, dict]:
    """Every rank's model and optimizer shard of both policies, as plain (local) tensors."""
    import torch

    def local(value):
        if isinstance(value, dict):
            return {k: local(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [local(v) for v in value]
        return value.to_local() if hasattr(value, "to_local") else value

    return {
        f"{policy}/{f.name}": local(torch.load(f, weights_only=False))
        for policy in ("coach", "player")
        for f in sorted((folder / policy).glob("*_world_size_*_rank_*.pt"))
        if f.name.startswith(("model", "optim"))
    }


def assert_same(a, b, where: str) -> None:
    import torch

    if isinstance(a, dict):
        assert set(a) == set(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


def test_resume_from_step_1_on_two_ranks_replays_step_2_exactly(run, tmp_path):
    import torch

    from cpmobius import checkpoint
    from cpmobius.loop import CoachPlayerLoop

    loop, out = run
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(out / "global_step_1", resumed_dir / "global_step_1")
    (resumed_dir / checkpoint.TRACKER_FILE).write_text("1")
    cfg = compose(resumed_dir, Path(str(loop.cfg.model.cache_dir)))
    resumed = CoachPlayerLoop(
        cfg,
        loop.settings,
        loop.coach,
        loop.player,
        None,
        loop.ground_truth,
        val_set=loop.val_set,
        difficulty_of=loop.difficulty_of,
    )
    assert resumed.fit().step == 2
    straight_state = json.loads((out / "global_step_2" / "loop_state.json").read_text())
    assert json.loads((resumed_dir / "global_step_2" / "loop_state.json").read_text()) == straight_state
    straight, replayed = shards(out / "global_step_2"), shards(resumed_dir / "global_step_2")
    assert len(straight) == 2 * 2 * RANKS  # model and optimizer, both policies, every rank
    assert straight["player/optim_world_size_2_rank_1.pt"]["state"], "the Player's optimizer holds no state"
    before = shards(out / "global_step_1")["player/model_world_size_2_rank_0.pt"]
    step_2 = straight["player/model_world_size_2_rank_0.pt"]
    assert any(not torch.equal(before[k], step_2[k]) for k in before), (
        "step 2 did not train the Player: nothing to replay"
    )
    assert_same(straight, replayed, "global_step_2")


def test_the_start_up_estimate_of_a_checkpoint_matches_its_files(run):
    from cpmobius.checkpoint_space import plan_checkpoint_space
    from cpmobius.engine.config import build_policy_configs

    loop, out = run
    plan = plan_checkpoint_space(loop.cfg, build_policy_configs(loop.cfg))
    written = sum(f.stat().st_size for f in (out / "global_step_2").rglob("*") if f.is_file())
    coach_optimizer = sum(f.stat().st_size for f in (out / "global_step_2" / "coach").glob("optim_*"))
    if coach_optimizer < plan.policies[1].optimizer_bytes / 2:  # no Coach update yet: its Adam moments are empty
        written += plan.policies[1].optimizer_bytes
    assert 0.9 * plan.checkpoint_bytes <= written <= 1.1 * plan.checkpoint_bytes, (written, plan.checkpoint_bytes)
