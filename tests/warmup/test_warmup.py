"""Coach SFT warm-up through verl's SFT trainer on the CPU platform (torchrun, one process)."""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.slow


def toy_warmup_data(path, instruction, rows=48):
    import pandas as pd

    from cpmobius.toy.world import make_problem

    rng = random.Random(0)
    messages = [
        [{"role": "user", "content": instruction}, {"role": "assistant", "content": make_problem(rng).text}]
        for _ in range(rows)
    ]
    pd.DataFrame({"messages": messages}).to_parquet(path)


def test_warmup_trains_the_coach_through_verl_and_is_reused(tmp_path, model_cache, monkeypatch):
    import torch
    from safetensors.torch import load_file

    from cpmobius.config import ConfigError, compose_config
    from cpmobius.main import prepare_models
    from cpmobius.settings import load_settings
    from cpmobius.warmup.sft import run_warmup

    data = tmp_path / "warmup.parquet"
    cfg = compose_config(
        [
            f"model.cache_dir={model_cache}",
            f"trainer.default_local_dir='{tmp_path / 'run quota=4,n=8'}'",  # a run named by its overrides
            "warmup.enabled=true",
            f"warmup.data={data}",
            "warmup.max_steps=3",
            "warmup.batch_size=8",
            "warmup.micro_batch_size_per_gpu=8",
            "warmup.lr=1e-3",
            "warmup.max_length=128",
            f"warmup.cache_dir={tmp_path / 'warmups'}",
        ]
    )
    settings = load_settings(cfg)
    with pytest.raises(ConfigError, match="warmup.data"):
        run_warmup(cfg)
    toy_warmup_data(data, settings.coach.instruction)
    prepare_models(cfg, settings)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    hf_dir = run_warmup(cfg)
    assert hf_dir.name == "huggingface" and hf_dir.parent.name == "global_step_3"
    # Every file of the warm-up is in the run folder: Hydra's logs too, not outputs/<date> in the cwd.
    assert (hf_dir.parents[1] / "hydra").is_dir() and not any((tmp_path / "cwd").iterdir())
    before = load_file(f"{cfg.model.coach_path}/model.safetensors")
    after = load_file(str(hf_dir / "model.safetensors"))
    assert set(after) <= set(before) and all(not torch.equal(before[k], after[k].to(before[k].dtype)) for k in after)
    log = (hf_dir.parents[1] / "sft.log").read_text()
    assert "train/loss" in log
    mtime = (hf_dir.parents[1] / "sft.log").stat().st_mtime
    assert run_warmup(cfg) == hf_dir and (hf_dir.parents[1] / "sft.log").stat().st_mtime == mtime  # not run twice

    # Stored under warmup.cache_dir: another run of the same inputs starts from it without any SFT.
    import subprocess

    from omegaconf import open_dict

    from cpmobius.warmup.sft import start_warmup

    def no_process(*args, **kwargs):
        raise AssertionError("the warm-up ran again")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    with open_dict(cfg):
        cfg.trainer.default_local_dir = str(tmp_path / "second_run")
    stored = start_warmup(cfg).wait()
    assert stored.parents[2] == tmp_path / "warmups" and not (tmp_path / "second_run").exists()
    assert load_file(str(stored / "model.safetensors")).keys() == after.keys()
    assert all(torch.equal(load_file(str(stored / "model.safetensors"))[k], after[k]) for k in after)
    with open_dict(cfg):
        cfg.warmup.lr = 2e-3  # another input (tests/warmup/test_warmup_cache.py has them all): another warm-up
    with pytest.raises(AssertionError, match="ran again"):
        start_warmup(cfg)


def test_toy_warmup_raises_the_format_validity_of_coach_samples(tmp_path, model_cache):
    """On the tiny CPU model, the share of Coach samples the Coach-output validator accepts is
    higher after the warm-up (verl's SFT trainer on toy problems in the messages format) than before."""
    from cpmobius.config import compose_config
    from cpmobius.main import prepare_models
    from cpmobius.settings import load_settings
    from cpmobius.warmup.sft import measure_coach_validity, run_warmup

    cfg = compose_config(
        [
            f"model.cache_dir={model_cache / 'generic'}",
            f"trainer.default_local_dir={tmp_path / 'run'}",
            # the default run's generic Coach (arithmetic in four surface forms, one of them a question),
            # pretrained shorter; the Player is not used here
            "model.pretrain.coach_steps=150",
            "model.pretrain.player_steps=1",
            "model.pretrain.coach_corpus=generic",
            "model.toy_warmup.count=320",
            "warmup.enabled=true",
            "warmup.batch_size=16",
            "warmup.micro_batch_size_per_gpu=16",
            "warmup.lr=1e-3",
            "warmup.max_length=128",
        ]
    )
    prepare_models(cfg, load_settings(cfg))
    before, before_rejected = measure_coach_validity(cfg.model.coach_path, cfg, count=128)
    after, after_rejected = measure_coach_validity(run_warmup(cfg), cfg, count=128)
    print(
        f"Coach samples valid before the warm-up: {before:.3f} {before_rejected}; after: {after:.3f} {after_rejected}"
    )
    # generic corpus: about 1/4 of its texts are questions; the warm-up teaches the question form
    assert before < 0.6 and after > before + 0.25
