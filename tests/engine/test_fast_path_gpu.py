"""The fast-path checks of ``tests/engine/test_fast_path.py`` on CUDA: verl's FSDP engine in bf16 mixed precision,
sdpa attention for the Player and PyTorch's varlen flash kernel for the Coach (``sdpa_varlen``), Liger's
kernels (RMSNorm, rotary, SwiGLU) for the Coach alone as the GPU presets set them, a random Qwen2 of about
0.5B parameters. Remove padding here takes a different sdpa kernel
than the padded pass (a block-diagonal mask over one packed row), so the passes agree to bf16 rounding,
within the same 1e-2 relative. Skipped without CUDA.

Run on the lent H200 with ``python -m pytest -s tests/engine/test_fast_path_gpu.py`` (about 2 minutes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _cpu_checks():
    """The helpers of tests/engine/test_fast_path.py (the test folder is not a package)."""
    path = Path(__file__).with_name("test_fast_path.py")
    spec = importlib.util.spec_from_file_location("fast_path_checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checks = _cpu_checks()


@pytest.fixture(scope="module")
def knob_policies_gpu(tmp_path_factory):
    import ray

    from cpmobius.toy.tiny_models import QWEN2_0P5B_SPEC, materialize_tiny_model

    path = materialize_tiny_model(tmp_path_factory.mktemp("models") / "qwen2_0p5b", spec=QWEN2_0P5B_SPEC, seed=3)
    policies = checks.start_knob_policies(
        [
            "backend=cuda_hf",
            "data.max_response_length=48",
            # both policies resident on one GPU, no offload: nothing here needs the host round trip
            "actor_rollout_ref.actor.fsdp_config.param_offload=false",
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
            "++player.verl.model.use_liger=false",  # the plain pass; the Coach keeps the preset's Liger kernels
        ],
        str(path),
    )
    vocab = len(policies["player"].tokenizer)
    baseline = checks.one_update(policies["player"], {}, vocab)
    yield policies, baseline, vocab
    ray.shutdown()


@pytest.mark.parametrize("knob", sorted(checks.KNOBS))
def test_a_per_call_knob_computes_the_same_pass_on_cuda(knob_policies_gpu, knob):
    policies, baseline, vocab = knob_policies_gpu
    checks.assert_same_pass(checks.one_update(policies["player"], checks.KNOBS[knob], vocab), baseline, atol=1e-3)


def test_gradient_checkpointing_the_fused_output_layer_and_liger_compute_the_same_update_on_cuda(knob_policies_gpu):
    policies, baseline, vocab = knob_policies_gpu
    checks.assert_same_pass(checks.one_update(policies["coach"], {}, vocab), baseline, atol=1e-3)
    checks.assert_same_pass(
        checks.one_update(policies["coach"], checks.KNOBS["dynamic_bsz_remove_padding"], vocab), baseline, atol=1e-3
    )
