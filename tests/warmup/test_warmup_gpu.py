"""The Coach SFT warm-up on a CUDA GPU: verl's SFT trainer (FSDP2, bf16 mixed precision) under
torchrun on a Qwen2-shaped Coach of about 0.5B parameters (toy world). Skipped without CUDA.

Checks: the run writes an HF checkpoint the loop can start the Coach from, every weight changed,
and the training loss falls. Prints loss and wall time (the CPU test is tests/warmup/test_warmup.py)."""

from __future__ import annotations

import re
import time

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

STEPS = 30


def test_coach_warmup_on_cuda(tmp_path):
    import pandas as pd
    import torch
    from safetensors.torch import load_file

    from cpmobius.config import compose_config
    from cpmobius.main import prepare_models
    from cpmobius.settings import load_settings
    from cpmobius.toy.tiny_models import QWEN2_0P5B_SPEC
    from cpmobius.toy.world import make_problem
    from cpmobius.warmup.sft import run_warmup

    data = tmp_path / "warmup.parquet"
    cfg = compose_config(
        [
            "backend=cuda_hf",
            "trainer.n_gpus_per_node=1",
            f"model.cache_dir={tmp_path / 'models'}",
            *[f"++model.tiny_spec.{key}={value}" for key, value in QWEN2_0P5B_SPEC.items()],
            "++model.pretrain.player_steps=10",
            "++model.pretrain.coach_steps=10",
            f"trainer.default_local_dir={tmp_path / 'run'}",
            "warmup.enabled=true",
            f"warmup.data={data}",
            f"warmup.max_steps={STEPS}",
            "warmup.batch_size=32",
            "warmup.micro_batch_size_per_gpu=16",
            "warmup.lr=1e-5",
            "warmup.max_length=128",
        ]
    )
    settings = load_settings(cfg)
    import random

    rng = random.Random(0)
    rows = [
        [
            {"role": "user", "content": settings.coach.instruction},
            {"role": "assistant", "content": make_problem(rng).text},
        ]
        for _ in range(32 * STEPS)
    ]
    pd.DataFrame({"messages": rows}).to_parquet(data)
    prepare_models(cfg, settings)
    t = time.perf_counter()
    hf_dir = run_warmup(cfg)
    wall = time.perf_counter() - t
    log = (hf_dir.parents[1] / "sft.log").read_text()
    losses = [float(x) for x in re.findall(r"train/loss:\s*([0-9.eE+-]+)", log)]
    print(
        f"\nwarm-up on CUDA: {STEPS} steps × 32 rows, 0.5B Coach, {wall:.1f} s including torchrun start and the "
        f"HF save; loss {losses[0]:.3f} (step 1) → {losses[-1]:.3f} (step {len(losses)})"
        if losses
        else log[-3000:]
    )
    assert hf_dir.name == "huggingface" and hf_dir.parent.name == f"global_step_{STEPS}"
    before = load_file(f"{cfg.model.coach_path}/model.safetensors")
    after = load_file(str(hf_dir / "model.safetensors"))
    assert set(after) <= set(before)
    assert all(not torch.equal(before[k], after[k].to(before[k].dtype)) for k in after)
    assert len(losses) >= STEPS // 2 and sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
