"""vLLM rollouts for both policies on one CUDA GPU (issue: the scale path). Skipped without CUDA or vLLM.

Qwen2-shaped models of about 0.5B parameters, bf16 serving, FSDP training on the same GPU:

1. the two-policy check (`conftest.check_two_policies`) with vLLM engines: each engine serves its
   own policy's weights, an update reaches the engine at the next sync (served prompt log-probs
   equal the trainer's), the other policy's engine is untouched, save → load restores outputs;
2. two steps of the CPMöbius loop (toy world, models pretrained on the GPU for a few seconds),
   with, after every engine wake, the device memory in use (only one engine may hold memory) and,
   after the steps, a served-vs-trained log-prob check for both policies.

Run on the lent H200 (scripts/device/vllm_check.sh does the install and prints the tables):
``python -m pytest -s tests/engine/test_vllm_gpu.py``.
"""

from __future__ import annotations

import os
import time

import pytest

from cpmobius.toy.tiny_models import QWEN2_0P5B_SPEC

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

UTILIZATION = 0.3  # per engine; two engines awake together would hold 2 × 0.3 of the GPU
# About 0.5B parameters, Qwen2.5-0.5B's shape with more layers and the byte tokenizer's vocabulary:
# verl's vLLM worker masks logits beyond the tokenizer's vocabulary (monkey_patch_compute_logits), the
# trainer does not, so a model padded to 151,936 rows with a 260-token tokenizer would not score alike.
SPEC = {**{k: v for k, v in QWEN2_0P5B_SPEC.items() if k != "vocab_size"}, "num_hidden_layers": 32}


def _vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except Exception:
        return False
    return True


if not _vllm_available():
    pytest.skip("vLLM is not installed", allow_module_level=True)


def gpu_memory_used_gib() -> float:
    """Device-wide memory in use (all processes), GiB, from NVML (no CUDA context in this process)."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    return pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**30


def gpu_memory_total_gib() -> float:
    import pynvml

    pynvml.nvmlInit()
    return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total / 2**30


VLLM_OVERRIDES = [
    "backend=vllm",
    "trainer.n_gpus_per_node=1",
    f"actor_rollout_ref.rollout.gpu_memory_utilization={UTILIZATION}",
    "actor_rollout_ref.rollout.enforce_eager=true",  # no CUDA-graph capture: a faster start on a lent GPU
    "actor_rollout_ref.rollout.max_model_len=512",
]


class WakeRecorder:
    """Device memory in use around every engine wake (wraps the run's `EngineGuard`).

    ``asleep``: right before an engine wakes, after the guard put the other one to sleep; ``awake``:
    right after the wake. A sleeping vLLM engine gives its weights and KV cache back (level-2 sleep), so
    each wake adds one engine: about ``UTILIZATION`` of the GPU. ``asleep`` grows beside that by the
    trainers' gradients and optimizer states (both policies' fp32 AdamW moments: 14.6 GiB here on an H100
    after two updates each), which do not scale with the card: checked against the card's share, it
    failed on an H100 (80 GB) and passed on an H200 (139 GiB), so only each wake's addition is checked.
    """

    def __init__(self, guard) -> None:
        self.total = gpu_memory_total_gib()
        self.baseline = gpu_memory_used_gib()
        self.samples: list[tuple[str, float, float]] = []  # (policy, asleep, awake) GiB
        before, after = guard.before_wake, guard.after_wake
        pending = {}

        def before_wake(policy):
            before(policy)
            pending[policy.name] = gpu_memory_used_gib()

        def after_wake(policy):
            after(policy)
            self.samples.append((policy.name, pending.pop(policy.name, float("nan")), gpu_memory_used_gib()))

        guard.before_wake, guard.after_wake = before_wake, after_wake

    def report(self) -> str:
        return (
            f"GPU memory in use (GiB of {self.total:.0f}; all engines asleep at the start: {self.baseline:.1f}), "
            "before → after each wake: " + ", ".join(f"{n} {a:.1f}→{b:.1f}" for n, a, b in self.samples)
        )

    def check_one_engine_awake(self) -> None:
        """Every wake adds more than half an engine (an engine that kept its memory while asleep adds next to
        nothing when it wakes) and less than 1.3 engines (never two engines awake together)."""
        engine = UTILIZATION * self.total
        added = [awake - asleep for _, asleep, awake in self.samples]
        assert min(added) > 0.5 * engine, f"an engine kept its memory while asleep: {self.report()}"
        assert max(added) < 1.3 * engine, f"two engines awake together: {self.report()}"


@pytest.fixture(scope="module")
def two_vllm_policies(tmp_path_factory, harness):
    import ray

    cache = tmp_path_factory.mktemp("models")
    overrides = VLLM_OVERRIDES + [
        f"model.cache_dir={cache}",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "data.max_response_length=32",
        "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",  # so that a sampled "greedy" pass shows
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
    ]
    policies, guard, timings = harness.start_two_policies(overrides, tiny_spec=SPEC)
    yield policies, guard, timings
    ray.shutdown()


def test_two_policies_with_vllm_engines_on_one_gpu(two_vllm_policies, tmp_path, harness):
    policies, guard, start_timings = two_vllm_policies
    recorder = WakeRecorder(guard)
    # bf16 serving (vLLM kernels) vs bf16 FSDP: log-probs agree to about a tenth, not to float32 precision.
    timings = harness.check_two_policies(policies, guard, tmp_path, atol=0.15, repeat_atol=0.02, min_change=0.6)
    print("\n" + recorder.report())
    for key, value in {**start_timings, **timings}.items():
        print(f"{key:<24} {value:>10.2f}")
    recorder.check_one_engine_awake()


def test_greedy_validation_on_vllm_is_greedy(two_vllm_policies, harness):
    policies, _, _ = two_vllm_policies
    harness.check_greedy_validation(policies["player"])


def test_two_loop_steps_with_vllm_for_both_policies(tmp_path_factory, harness):
    import ray

    from cpmobius.config import compose_config
    from cpmobius.main import build_loop
    from cpmobius.validation import measure_accuracy

    ray.shutdown()  # the first test's engines are gone; a fresh job for the loop
    run_dir = tmp_path_factory.mktemp("run")
    cfg = compose_config(
        VLLM_OVERRIDES
        + [
            # CPMOBIUS_GPU_MODEL_CACHE: reuse toy models pretrained by an earlier call on the same machine
            f"model.cache_dir={os.environ.get('CPMOBIUS_GPU_MODEL_CACHE') or tmp_path_factory.mktemp('toy_models')}",
            *[f"++model.tiny_spec.{key}={value}" for key, value in SPEC.items()],
            "++model.pretrain.player_steps=300",
            "++model.pretrain.coach_steps=150",
            "warmup.enabled=false",  # tests/warmup/test_warmup_gpu.py runs the warm-up on CUDA
            f"trainer.default_local_dir={run_dir}",
            "actor_rollout_ref.actor.optim.lr=1e-5",
            "data.max_response_length=32",
            "filter.quota=4",
            "filter.enabled=false",  # keep every labelled problem: two short steps must train the Player
            "player.n=4",
            "validation.size=32",
        ]
    )
    t = time.perf_counter()
    loop = build_loop(cfg)
    start_s = time.perf_counter() - t
    recorder = WakeRecorder(loop.coach.guard)
    try:
        loop.delta.start(measure_accuracy(loop.player, loop.val_set, loop.settings.validation).accuracy)
        rows = []
        for _ in range(2):
            t = time.perf_counter()
            metrics = loop.step()
            rows.append((metrics, time.perf_counter() - t))
        checks = {}
        for policy in (loop.coach, loop.player):
            policy.activate()
            batch = policy.generate([[{"role": "user", "content": "What is 3 + 4?"}]], n=2)
            prompt, response = harness.unpad_row(batch, 0)
            served = harness.served_log_probs(policy, prompt, response)
            trained = harness.trained_log_probs(policy, batch, 0)
            checks[policy.name] = (served - trained).abs().max().item()
    finally:
        switches, history = loop.coach.guard.switches, list(loop.coach.guard.history)
        ray.shutdown()

    print(f"\nstart (toy pretraining on the GPU, both policies, vLLM engines) {start_s:.1f} s")
    print("step  val_acc  delta_t  kept  coach_s  filter_s  update_s  val_s  coach_upd_s  step_s")
    for i, (m, step_s) in enumerate(rows, 1):
        print(
            f"{i:>4}  {m.get('val/accuracy', float('nan')):7.3f}  {m.get('val/delta_t', 0.0):+7.3f}  "
            f"{int(m.get('filter/kept', 0)):4d}  {m.get('timing_s/coach', 0):7.1f}  "
            f"{m.get('timing_s/difficulty_filter', 0):8.1f}  {m.get('timing_s/player_update', 0):8.1f}  "
            f"{m.get('timing_s/validation', 0):5.1f}  {m.get('timing_s/coach_update', 0):11.1f}  {step_s:6.1f}"
        )
    print(f"engine switches {switches}: {' → '.join(history)}")
    print(recorder.report())
    print(
        "served vs trained log-prob, max |diff| after 2 steps: "
        + ", ".join(f"{name} {diff:.3f}" for name, diff in checks.items())
    )
    assert all(diff < 0.15 for diff in checks.values()), checks
    recorder.check_one_engine_awake()
    assert switches >= 4 and set(history) == {"coach", "player"}
