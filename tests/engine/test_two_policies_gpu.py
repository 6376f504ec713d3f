"""The two-policy check on a CUDA GPU: verl's FSDP engine on CUDA, the HF rollout in bf16, and a
random Qwen2-shaped model of about 0.5B parameters for both policies. Skipped without CUDA.

Run on the lent H200 with ``python -m pytest -s tests/engine/test_two_policies_gpu.py``; it prints a table
of per-phase timings."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.fixture(scope="module")
def two_policies_gpu(tmp_path_factory, harness):
    import ray

    from cpmobius.toy.tiny_models import QWEN2_0P5B_SPEC

    cache = tmp_path_factory.mktemp("models")
    overrides = [
        "backend=cuda_hf",
        f"model.cache_dir={cache}",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "data.max_response_length=32",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",  # so that a sampled "greedy" pass shows
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
    ]
    policies, guard, timings = harness.start_two_policies(overrides, tiny_spec=QWEN2_0P5B_SPEC)
    yield policies, guard, timings
    ray.shutdown()


def test_two_policies_on_cuda_with_a_half_billion_parameter_model(two_policies_gpu, tmp_path, harness):
    import ray

    policies, guard, start_timings = two_policies_gpu
    player_server = policies["player"].server_handles()[0]
    n_params = ray.get(player_server.get_parameter_count.remote())
    assert n_params > 4e8
    # bf16 serving vs bf16-compute FSDP: log-probs agree to a few hundredths, not to float32 precision.
    timings = harness.check_two_policies(policies, guard, tmp_path, atol=0.1)
    peak = {name: ray.get(p.server_handles()[0].get_peak_memory_gib.remote()) for name, p in policies.items()}
    print(f"\nparameters per policy: {n_params / 1e6:.0f}M; peak GPU memory of the rollout servers (GiB): {peak}")
    for key, value in {**start_timings, **timings}.items():
        print(f"{key:<24} {value:>10.2f}")


def test_greedy_validation_on_the_cuda_hf_rollout_is_greedy(two_policies_gpu, harness):
    policies, _, _ = two_policies_gpu
    harness.check_greedy_validation(policies["player"])
