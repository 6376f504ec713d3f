"""The HF rollout's seeded sampler on CUDA: the draw stays on the device (tests/engine/test_hf_sampling.py holds the rest)."""

from __future__ import annotations

import math

import pytest
import torch

from cpmobius.engine.hf_sampling import SeededSampler, counter_uniform


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_draw_stays_on_the_device_and_matches_the_cpu_vectorised_stream():
    scores = torch.randn(4, 1000, generator=torch.Generator().manual_seed(2))
    on_gpu = SeededSampler([1, 2, 3, 4])(None, scores.cuda()).argmax(-1).cpu()
    on_cpu = SeededSampler([1, 2, 3, 4], vectorised=True)(None, scores).argmax(-1)
    assert torch.equal(on_gpu, on_cpu)
    assert math.isfinite(float(counter_uniform(torch.tensor([1]).cuda(), 0).sum()))
