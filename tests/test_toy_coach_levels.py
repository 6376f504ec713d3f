"""The toy Coach's levels on its checkpoints (`benchmarks/toy_coach_levels.py`): a verl checkpoint read back as an
HF folder with the same weights, and a folder that is no run named."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

spec = importlib.util.spec_from_file_location(
    "toy_coach_levels", Path(__file__).resolve().parents[1] / "benchmarks" / "toy_coach_levels.py"
)
toy_coach_levels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy_coach_levels)


def test_a_one_rank_checkpoint_becomes_an_hf_folder_with_the_same_weights(tmp_path):
    from transformers import AutoModelForCausalLM

    from cpmobius.toy.tiny_models import build_char_tokenizer, build_tiny_qwen2

    tokenizer = build_char_tokenizer()
    model = build_tiny_qwen2(tokenizer, seed=3)
    checkpoint = tmp_path / "global_step_4" / "coach"
    model.config.save_pretrained(checkpoint / "huggingface")
    tokenizer.save_pretrained(checkpoint / "huggingface")
    torch.save(model.state_dict(), checkpoint / "model_world_size_1_rank_0.pt")

    folder = toy_coach_levels.checkpoint_as_hf(checkpoint, tmp_path / "hf")
    loaded = AutoModelForCausalLM.from_pretrained(folder)
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    assert (folder / "tokenizer_config.json").is_file()

    never_updated = tmp_path / "frozen" / "coach"
    never_updated.mkdir(parents=True)
    assert toy_coach_levels.checkpoint_as_hf(never_updated, tmp_path / "hf2") is None


def test_a_folder_that_is_no_run_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="is it a run folder"):
        toy_coach_levels.run_config(tmp_path)
