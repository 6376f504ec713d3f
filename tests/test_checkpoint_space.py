"""Checkpoint space: the size of one checkpoint, the room a run needs, the start-up refusal, a failed save.

The 1.5B run that died at step 4 wrote 42 GB checkpoints onto a 64 GB disk (a new one is written before
the old one is deleted); these tests pin the arithmetic that would have refused it at start-up, and the
one-line stop of a save that fails anyway.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from stand_ins import ScriptedPolicy, not_sampled

from cpmobius import checkpoint
from cpmobius.checkpoint_space import (
    DiskSpaceError,
    check_checkpoint_space,
    checkpoints_held,
    count_parameters,
    plan_checkpoint_space,
    saves_between,
)
from cpmobius.config import compose_config
from cpmobius.engine.config import build_policy_configs

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "start, total, save_freq, expected",
    [
        (0, 15, 1, 15),  # every step
        (0, 999, 10, 100),  # 99 multiples of 10 up to 990, and the last step
        (0, 1000, 10, 100),  # the last step is a multiple: counted once
        (4, 10, 2, 3),  # resumed at 4: 6, 8, 10
        (10, 10, 2, 0),  # nothing left to do
        (0, 7, 0, 1),  # save_freq 0: only after the last step
    ],
)
def test_saves_between(start, total, save_freq, expected):
    assert saves_between(start, total, save_freq) == expected


@pytest.mark.parametrize(
    "existing, saves, keep, expected",
    [
        (0, 15, None, 15),  # keep all: every save stays
        (0, 15, 1, 2),  # keep 1: the old one and the one being written
        (0, 15, 3, 4),
        (0, 2, 3, 2),  # fewer saves than the limit
        (3, 10, 3, 1),  # resumed with the limit reached: one more while writing
        (5, 10, 3, 1),  # more on disk than the limit (pruned after the next save)
        (2, 0, 1, 0),  # nothing to write
    ],
)
def test_checkpoints_held_at_the_fullest_moment(existing, saves, keep, expected):
    assert checkpoints_held(existing, saves, keep) == expected


def test_parameter_count_of_the_1p5b_shape_from_its_config_alone(tmp_path):
    """Qwen2.5-Math-1.5B's shape (untied head): 1.78 B parameters, counted without building real weights."""
    from transformers import Qwen2Config

    Qwen2Config(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=False,
    ).save_pretrained(tmp_path)
    # embeddings 151936·1536 twice (untied) + 28 layers of attention (q, k, v with biases, o) and MLP + norms
    layer = (1536 * 1536 + 1536) + 2 * (1536 * 256 + 256) + 1536 * 1536 + 3 * 1536 * 8960 + 2 * 1536
    assert count_parameters(str(tmp_path)) == 2 * 151936 * 1536 + 28 * layer + 1536 == 1_777_088_000


def paper_shape_config(tmp_path, *overrides):
    from transformers import Qwen2Config

    model = tmp_path / "model"
    Qwen2Config(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=False,
    ).save_pretrained(model)
    return compose_config(
        [
            f"model.coach_path={model}",
            f"model.player_path={model}",
            "model.name=qwen_test",
            "warmup.enabled=false",
            f"trainer.default_local_dir={tmp_path / 'run'}",
            *overrides,
        ]
    )


def test_the_1p5b_checkpoint_and_the_disk_that_could_not_hold_it(tmp_path, monkeypatch):
    """Both policies in fp32 with AdamW: 1.777 B × 12 bytes ≈ 21.3 GB each, ≈ 42.7 GB a checkpoint; keeping
    one means two on disk while the next is written: 85 GB, more than the 64 GB disk that filled at step 4."""
    cfg = paper_shape_config(
        tmp_path, "trainer.save_freq=2", "trainer.max_actor_ckpt_to_keep=1", "trainer.total_training_steps=999"
    )
    plan = plan_checkpoint_space(cfg, build_policy_configs(cfg))
    player = plan.policies[0]
    assert player.weight_bytes == 1_777_088_000 * 4 and player.optimizer_bytes == 1_777_088_000 * 8
    assert 42.6e9 < plan.checkpoint_bytes < 42.8e9
    assert plan.checkpoints == 2 and plan.extra_bytes == 0
    monkeypatch.setattr("cpmobius.checkpoint_space.free_bytes", lambda folder: 60_000_000_000)
    with pytest.raises(DiskSpaceError) as refused:
        check_checkpoint_space(cfg, build_policy_configs(cfg))
    message = str(refused.value)
    assert "\n" not in message
    for needle in (
        "one checkpoint is 42.7 GB",
        "player 21.3 GB",
        "2 of them",
        "85.3 GB",
        "60.0 GB free",
        "do not fit here",
        "trainer.default_local_dir",
    ):
        assert needle in message, needle
    monkeypatch.setattr("cpmobius.checkpoint_space.free_bytes", lambda folder: 90_000_000_000)
    assert check_checkpoint_space(cfg, build_policy_configs(cfg)).startswith(
        "[cpmobius] checkpoints: one checkpoint is 42.7 GB"
    )


def test_a_model_config_out_of_reach_leaves_the_space_unchecked_and_the_run_going(tmp_path, hub_offline):
    """A hub id with the hub unreachable (the launch scripts accept hub ids): one line, no traceback."""
    cfg = paper_shape_config(tmp_path, "model.player_path=nobody/no-such-model")
    line = check_checkpoint_space(cfg, build_policy_configs(cfg))
    assert (
        line.startswith("[cpmobius] checkpoint space not checked: a model's config could not be read")
        and "\n" not in line
    )


def test_rollback_and_warmup_add_their_copies(tmp_path):
    cfg = paper_shape_config(tmp_path, "player.rollback.enabled=true", "warmup.enabled=true")
    plan = plan_checkpoint_space(cfg, build_policy_configs(cfg))
    player, coach = plan.policies
    # best_player and its replacement, then the warm-up's checkpoint with bf16 HF weights
    assert plan.extra_bytes == 2 * player.total_bytes + coach.total_bytes + 2 * coach.parameters


def test_a_baseline_without_a_coach_counts_the_player_alone(tmp_path):
    cfg = paper_shape_config(tmp_path)
    both = plan_checkpoint_space(cfg, build_policy_configs(cfg))
    cfg = paper_shape_config(tmp_path, "method=rent")
    plan = plan_checkpoint_space(cfg, build_policy_configs(cfg))
    assert [p.name for p in plan.policies] == ["player"] and plan.extra_bytes == 0
    assert plan.checkpoint_bytes == both.checkpoint_bytes - both.policies[1].total_bytes


def test_a_resumed_run_counts_only_what_it_still_writes(tmp_path):
    cfg = paper_shape_config(tmp_path, "trainer.save_freq=1", "trainer.total_training_steps=10")
    run = tmp_path / "run"
    for step in (1, 2, 3):
        (run / f"global_step_{step}").mkdir(parents=True)
    (run / checkpoint.TRACKER_FILE).write_text("3")
    assert plan_checkpoint_space(cfg, build_policy_configs(cfg)).checkpoints == 7  # steps 4..10, all kept


def test_a_too_small_disk_stops_the_default_run_before_any_model_loads(tmp_path):
    """The driver on a 20 MB disk (the toy keeps its 15 checkpoints): one line, exit 2, nothing started."""
    code = (
        "import shutil, sys; from collections import namedtuple; "
        "shutil.disk_usage = lambda path: namedtuple('usage', 'total used free')(20_000_000, 0, 20_000_000); "
        "from cpmobius.main import cli; sys.exit(cli(sys.argv[1:]))"
    )
    cache = tmp_path / "no-models-here"
    done = subprocess.run(
        [sys.executable, "-c", code, f"model.cache_dir={cache}", f"trainer.default_local_dir={tmp_path / 'run'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: not enough disk for this run's checkpoints"), done.stderr
    assert "20.0 MB free" in lines[0] and "15 of them" in lines[0]
    assert "trainer.max_actor_ckpt_to_keep=" in lines[0] and "trainer.save_freq (now 1)" in lines[0]
    assert not cache.exists()  # no toy model was built


def disk_policy(weight: float, full: bool = False) -> ScriptedPolicy:
    """A policy whose save writes its file and then, on a ``full`` disk, fails as a full disk does."""
    error = OSError(errno.ENOSPC, "No space left on device", "optim.pt") if full else None
    return ScriptedPolicy(not_sampled, weight=weight, save_error=error)


def test_a_save_on_a_full_disk_keeps_the_previous_checkpoint_and_says_so_in_one_line(tmp_path):
    state = {"step": 1, "policies": {n: {"global_steps": 1, "generation_calls": 0} for n in ("coach", "player")}}
    checkpoint.save_checkpoint(
        tmp_path, 1, {"coach": disk_policy(1.0), "player": disk_policy(1.0)}, state, OmegaConf.create({}), keep=1
    )
    with pytest.raises(checkpoint.CheckpointSaveError) as failed:
        checkpoint.save_checkpoint(
            tmp_path,
            2,
            {"coach": disk_policy(2.0), "player": disk_policy(2.0, full=True)},
            {**state, "step": 2},
            OmegaConf.create({}),
            keep=1,
        )
    message = str(failed.value)
    assert "\n" not in message and "No space left on device" in message and "step 1, is intact" in message
    assert not (tmp_path / ".global_step_2.partial").exists()  # the half-written copy's space is given back
    latest = checkpoint.find_latest_checkpoint(tmp_path)
    assert latest == tmp_path / "global_step_1"
    player = disk_policy(0.0)
    assert checkpoint.load_checkpoint(latest, {"coach": disk_policy(0.0), "player": player})["step"] == 1
    assert player.weight == 1.0
