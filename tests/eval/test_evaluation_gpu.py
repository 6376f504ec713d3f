"""Evaluation generation on a GPU: vLLM (when installed) and HF on CUDA agree on the response format.

Run on a CUDA machine: `python -m pytest -s tests/eval/test_evaluation_gpu.py` (skipped without CUDA, the vLLM
case also without vLLM)."""

from __future__ import annotations

import pytest

from cpmobius.eval.data import encode_prompt
from cpmobius.eval.generation import HFGenerator, SamplingSettings, VLLMGenerator, vllm_available


@pytest.fixture(scope="module")
def tiny_model(model_cache):
    from cpmobius.toy.tiny_models import materialize_tiny_model

    return str(materialize_tiny_model(model_cache / "eval-gpu-tiny", seed=4))


def _prompts(tokenizer):
    return [encode_prompt(tokenizer, f"What is {i} + {i}?").token_ids for i in range(3)]


@pytest.mark.parametrize("greedy", [False, True])
def test_hf_on_cuda(tiny_model, greedy):
    gen = HFGenerator(tiny_model, SamplingSettings(max_new_tokens=12, greedy=greedy), device="cuda", batch_size=4)
    out = gen.generate(_prompts(gen.tokenizer), n=3)
    assert [len(o) for o in out] == [3, 3, 3]
    assert all(c.response_tokens <= 12 and c.finish_reason in ("stop", "length") for o in out for c in o)
    if greedy:
        assert all(len({c.text for c in o}) == 1 for o in out)


@pytest.mark.skipif(not vllm_available(), reason="needs vllm")
def test_vllm_generator(tiny_model):
    gen = VLLMGenerator(tiny_model, SamplingSettings(max_new_tokens=12), gpu_memory_utilization=0.3)
    out = gen.generate(_prompts(gen.tokenizer), n=4, stop=["\n###\nProblem: "])
    assert [len(o) for o in out] == [4, 4, 4]
    assert all(c.response_tokens <= 12 and c.finish_reason in ("stop", "length") for o in out for c in o)
