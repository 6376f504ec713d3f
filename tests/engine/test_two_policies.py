"""Coach and Player side by side on one Ray resource pool, through verl's real FSDP engine and the
HF rollout on the CPU platform: generation, updates, weight sync, the one-engine-awake guard,
save and load. (~2 minutes on 2 cores: each policy starts a verl worker and a rollout server.)"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def two_policies(tmp_path_factory, harness):
    import ray

    cache = tmp_path_factory.mktemp("models")
    overrides = [
        f"model.cache_dir={cache}",
        "actor_rollout_ref.actor.optim.lr=1e-3",  # large enough that one step visibly moves log-probs
        "data.max_response_length=16",
        # a sampled validation setting, so that a "greedy" pass that is really sampled shows
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
    ]
    policies, guard, timings = harness.start_two_policies(overrides)
    yield policies, guard
    ray.shutdown()


def test_two_policies_generate_update_sync_save_load(two_policies, tmp_path, harness):
    policies, guard = two_policies
    timings = harness.check_two_policies(policies, guard, tmp_path)
    assert timings["engine_switches"] >= 6


def test_greedy_validation_is_greedy_and_logs_what_it_used(two_policies, harness):
    policies, _ = two_policies
    harness.check_greedy_validation(policies["player"])
