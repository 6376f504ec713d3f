"""A broken checkpoint costs one step, not the run.

Checkpoints are written by the real writer (`checkpoint.save_checkpoint`) with stand-in policies that save
files named and shaped as verl's actor shards (torch.save of a state dict). Each corruption found on a
finished toy run (a truncated model shard, a truncated ``loop_state.json``, a truncated ``rng.pt``, a tracker
holding garbage, a tracker naming a missing step) must be reported in one line naming the file and resumed
from the newest intact checkpoint, before Ray starts and before any of its pickles is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from stand_ins import ScriptedPolicy, not_sampled
from test_checkpoint_space import paper_shape_config as paper_shape

from cpmobius import checkpoint
from cpmobius.checkpoint_manifest import MANIFEST_FILE, verify_checkpoint
from cpmobius.checkpoint_space import (
    DiskSpaceError,
    check_checkpoint_space,
    describe_optimizer_resume,
    plan_checkpoint_space,
)
from cpmobius.config import ConfigError
from cpmobius.engine.config import build_policy_configs

REPO = Path(__file__).resolve().parents[1]
SHARDS = ("model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt", "extra_state_world_size_1_rank_0.pt")


class ShardPolicy(ScriptedPolicy):
    """The tests' stand-in saving what verl's FSDP checkpoint manager saves for one rank (three torch.save files,
    a huggingface/ folder) instead of its one JSON file; records every load, which is where verl unpickles."""

    def __init__(self, weight: float, optimizer: bool = True) -> None:
        super().__init__(not_sampled, weight=weight)
        self.optimizer = optimizer

    def save(self, path: str) -> None:
        self.saved.append(path)
        folder = Path(path)
        (folder / "huggingface").mkdir(parents=True)
        (folder / "huggingface" / "config.json").write_text("{}")
        torch.save({"w": torch.full((64, 64), self.weight)}, folder / SHARDS[0])
        if self.optimizer:
            torch.save({"state": {0: {"exp_avg": torch.ones(64, 64)}}}, folder / SHARDS[1])
        torch.save({"lr_scheduler": None}, folder / SHARDS[2])

    def load(self, path: str, global_steps=None) -> None:
        self.loaded.append(path)
        self.weight = float(torch.load(Path(path) / SHARDS[0], weights_only=True)["w"][0, 0])
        if global_steps is not None:
            self.global_steps = global_steps


def save(root: Path, step: int, optimizer: bool = True) -> Path:
    policies = {name: ShardPolicy(float(step), optimizer) for name in ("coach", "player")}
    state = {"step": step, "policies": {n: {"global_steps": step, "generation_calls": 0} for n in policies}}
    return checkpoint.save_checkpoint(root, step, policies, state, OmegaConf.create({"step": step}))


def run_cfg(root: Path, **trainer) -> OmegaConf:
    return OmegaConf.create({"trainer": {"resume_mode": "auto", "default_local_dir": str(root), **trainer}})


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_rng_state_loads_with_weights_only_and_restores_every_stream(tmp_path):
    random.seed(3), np.random.seed(4), torch.manual_seed(5)
    save(tmp_path, 1)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    # The old rng.pt held numpy's state as an ndarray inside a tuple: weights_only=True refused it.
    checkpoint.restore_rng(torch.load(tmp_path / "global_step_1" / "rng.pt", weights_only=True))
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_an_rng_file_of_the_older_layout_still_loads_without_unpickling_code(tmp_path):
    random.seed(7), np.random.seed(8)
    old = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    torch.save(old, tmp_path / "rng.pt")
    expected = (random.random(), np.random.rand())
    checkpoint.restore_rng(checkpoint.load_rng(tmp_path / "rng.pt"))
    assert (random.random(), np.random.rand()) == expected


def test_the_manifest_lists_every_file_with_its_size_and_sha256_and_everything_is_fsynced(tmp_path, monkeypatch):
    synced, real_fsync, real_replace = set(), os.fsync, os.replace
    at_rename = {}

    def fsync(fd):
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src, dst):
        if str(src).endswith(".partial"):
            at_rename["synced"] = set(synced)
            at_rename["files"] = {str(p.resolve()) for p in Path(src).rglob("*")} | {str(Path(src).resolve())}
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    folder = save(tmp_path, 1)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert sorted(manifest["files"]) == [f for f in files if f != MANIFEST_FILE]
    assert "coach/model_world_size_1_rank_0.pt" in manifest["files"] and "rng.pt" in manifest["files"]
    for name, entry in manifest["files"].items():
        data = (folder / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert at_rename["files"] <= at_rename["synced"]  # every file and folder, the manifest too, before the rename
    # the rename and the tracker (written to a temporary name, fsynced, renamed) are on disk too
    assert str(tmp_path.resolve()) in synced
    assert any(Path(p).name.startswith(f".{checkpoint.TRACKER_FILE}.tmp") for p in synced)


CORRUPTIONS = {
    "a truncated model shard": lambda s: truncate(s / "coach" / SHARDS[0]),
    "a truncated loop_state.json": lambda s: truncate(s / "loop_state.json"),
    "a truncated rng.pt": lambda s: truncate(s / "rng.pt"),
    "a byte flipped in an optimizer shard": lambda s: (s / "player" / SHARDS[1]).write_bytes(
        (lambda b: b[:-100] + bytes([b[-100] ^ 1]) + b[-99:])((s / "player" / SHARDS[1]).read_bytes())
    ),
    "a pickle dropped in": lambda s: torch.save({}, s / "player" / "model_world_size_2_rank_0.pt"),
    "a truncated manifest": lambda s: truncate(s / MANIFEST_FILE),
}


def resume_past_a_broken_step_2(tmp_path, corrupt) -> list[str]:
    """Checkpoints of steps 1 and 2, step 2 damaged by ``corrupt``: the resume goes back to step 1; its lines."""
    save(tmp_path, 1), save(tmp_path, 2)
    corrupt(tmp_path / "global_step_2")
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 1
    return lines


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_a_broken_latest_checkpoint_is_named_in_one_line_and_the_run_resumes_one_step_back(tmp_path, kind):
    lines = resume_past_a_broken_step_2(tmp_path, CORRUPTIONS[kind])
    broken = [line for line in lines if "broken" in line]
    assert len(broken) == 1 and "global_step_2" in broken[0] and "\n" not in broken[0], lines
    assert lines[-1] == "[cpmobius] resuming from step 1, the newest intact checkpoint"
    assert (tmp_path / checkpoint.TRACKER_FILE).read_text() == "1"
    assert not (tmp_path / "global_step_2").exists() and (tmp_path / "broken_global_step_2").is_dir()
    coach, player = ShardPolicy(0.0), ShardPolicy(0.0)
    latest = checkpoint.find_latest_checkpoint(tmp_path)
    assert checkpoint.load_checkpoint(latest, {"coach": coach, "player": player})["step"] == 1
    assert (coach.weight, player.weight) == (1.0, 1.0)


@pytest.mark.parametrize(
    "file, named",
    [
        ("coach/" + SHARDS[0], "coach/model_world_size_1_rank_0.pt"),
        ("loop_state.json", "loop_state.json"),
        ("rng.pt", "rng.pt"),
    ],
)
def test_the_line_names_the_broken_file(tmp_path, file, named):
    truncate(save(tmp_path, 1) / file)
    assert verify_checkpoint(tmp_path / "global_step_1").startswith(f"{tmp_path / 'global_step_1' / named} is ")


def test_a_tracker_holding_garbage_resumes_from_the_newest_intact_checkpoint(tmp_path):
    save(tmp_path, 1), save(tmp_path, 2)
    (tmp_path / checkpoint.TRACKER_FILE).write_bytes(b"\x00\x17garbage")
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 2
    assert len(lines) == 1 and checkpoint.TRACKER_FILE in lines[0] and "not a step" in lines[0]
    assert (tmp_path / checkpoint.TRACKER_FILE).read_text() == "2"


def test_a_tracker_naming_a_missing_step_resumes_from_the_newest_checkpoint_before_it(tmp_path):
    save(tmp_path, 1), save(tmp_path, 2)
    (tmp_path / checkpoint.TRACKER_FILE).write_text("7")
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 2
    assert len(lines) == 1 and "names step 7" in lines[0] and str(tmp_path / "global_step_7") in lines[0]
    assert (tmp_path / checkpoint.TRACKER_FILE).read_text() == "2"


def test_checkpoints_whose_tracker_is_lost_are_resumed_not_overwritten(tmp_path):
    """verl reads a missing tracker as a new run: its saves would overwrite and prune the earlier run's
    checkpoints and its metrics be dropped. Here the newest intact checkpoint is resumed and the tracker rewritten."""
    save(tmp_path, 1), save(tmp_path, 2)
    (tmp_path / checkpoint.TRACKER_FILE).unlink()
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 2
    assert len(lines) == 1 and checkpoint.TRACKER_FILE in lines[0] and "missing" in lines[0]
    assert (tmp_path / checkpoint.TRACKER_FILE).read_text() == "2"
    assert checkpoint.check_resume(run_cfg(tmp_path / "fresh"), lines.append) == 0 and len(lines) == 1  # a new run
    (tmp_path / checkpoint.TRACKER_FILE).unlink()
    (tmp_path / checkpoint.TRACKER_FILE).mkdir()
    with pytest.raises(checkpoint.CheckpointCorruptError, match="is not a file"):
        checkpoint.check_resume(run_cfg(tmp_path), lines.append)


def test_no_intact_checkpoint_is_one_line_naming_the_keys_and_nothing_is_unpickled(tmp_path):
    truncate(save(tmp_path, 1) / "player" / SHARDS[0])
    with pytest.raises(checkpoint.CheckpointCorruptError) as none_left:
        checkpoint.check_resume(run_cfg(tmp_path), lambda line: None)
    message = str(none_left.value)
    assert "\n" not in message and "player/model_world_size_1_rank_0.pt" in message
    assert "trainer.resume_mode=disable" in message and "trainer.resume_from_path" in message


def test_load_checkpoint_refuses_a_broken_folder_before_any_policy_loads(tmp_path):
    """trainer.resume_from_path, or any caller that skips the start-up check: verl's pickles are not reached."""
    folder = save(tmp_path, 1)
    truncate(folder / "player" / SHARDS[1])
    with pytest.raises(checkpoint.CheckpointCorruptError, match="optim_world_size_1_rank_0.pt is "):
        checkpoint.check_resume(run_cfg(tmp_path, resume_mode="resume_path", resume_from_path=str(folder)))
    coach, player = ShardPolicy(0.0), ShardPolicy(0.0)
    with pytest.raises(checkpoint.CheckpointCorruptError):
        checkpoint.load_checkpoint(folder, {"coach": coach, "player": player})
    assert coach.loaded == [] and player.loaded == []


def as_written_before_manifests(folder):
    """A checkpoint as earlier versions wrote it: no manifest, and no mark of one in its loop state."""
    (folder / MANIFEST_FILE).unlink()
    state = json.loads((folder / "loop_state.json").read_text())
    state.pop("manifest_format")
    (folder / "loop_state.json").write_text(json.dumps(state))
    return folder


def test_a_checkpoint_from_before_manifests_resumes_with_a_one_line_warning(tmp_path):
    as_written_before_manifests(save(tmp_path, 1))
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 1
    assert len(lines) == 1 and "no manifest" in lines[0] and "cannot be checked" in lines[0]


def test_an_old_checkpoint_with_its_loop_state_cut_short_or_a_file_named_as_a_step_is_passed_over(tmp_path):
    """Without a manifest nothing can be checked but the loop state, which the resume reads after Ray started."""
    save(tmp_path, 1), truncate(as_written_before_manifests(save(tmp_path, 2)) / "loop_state.json")
    (tmp_path / "global_step_3").write_text("not a checkpoint")
    (tmp_path / checkpoint.TRACKER_FILE).write_text("3")
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 1
    assert "global_step_3 is not a folder" in lines[0] and "loop_state.json is missing or unreadable" in lines[1]
    assert (tmp_path / "broken_global_step_3").is_file() and (tmp_path / "broken_global_step_2").is_dir()


def test_a_deleted_manifest_is_a_broken_checkpoint_not_an_old_one(tmp_path):
    """Deleting manifest.json (to slip a file past the check) does not make a checkpoint pass as unchecked."""
    save(tmp_path, 1)
    (save(tmp_path, 2) / MANIFEST_FILE).unlink()
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 1  # back to the intact step 1
    assert any("manifest.json is missing" in line and "global_step_2" in line for line in lines)


def test_a_weights_only_resume_says_the_optimizers_restart(tmp_path):
    save(tmp_path, 1, optimizer=False)

    def policy_cfgs(load_contents):
        arr = {"actor_rollout_ref": {"actor": {"checkpoint": {"load_contents": load_contents}}}}
        return {name: OmegaConf.create(arr) for name in ("coach", "player")}

    line = describe_optimizer_resume(run_cfg(tmp_path), policy_cfgs(["model", "extra"]))
    assert "\n" not in line and "without optimizer state" in line and "restarts" in line
    assert "for the coach and the player" in line
    # verl would fail on the missing shard in a worker, after Ray and both engines are up
    with pytest.raises(ConfigError, match=r"actor_rollout_ref\.actor\.checkpoint\.load_contents=\[model,extra\]"):
        describe_optimizer_resume(run_cfg(tmp_path), policy_cfgs(["model", "optimizer", "extra"]))
    save(tmp_path, 2)
    assert describe_optimizer_resume(run_cfg(tmp_path), policy_cfgs(["model", "optimizer", "extra"])) is None


def paper_shape_config(tmp_path, *overrides):
    """The 1.5B shape of `test_checkpoint_space`, keeping one checkpoint of a long run."""
    return paper_shape(
        tmp_path,
        "trainer.save_freq=2",
        "trainer.max_actor_ckpt_to_keep=1",
        "trainer.total_training_steps=999",
        *overrides,
    )


def test_the_disk_refusal_names_the_weights_only_key_and_its_size(tmp_path, monkeypatch):
    """1.5B shape, keep 1: 2 × 42.7 GB does not fit 60 GB; weights only, 2 × 1.777 B × 4 bytes ≈ 14.2 GB a
    checkpoint and 2 of them ≈ 28.4 GB, would."""
    monkeypatch.setattr("cpmobius.checkpoint_space.free_bytes", lambda folder: 60_000_000_000)
    cfg = paper_shape_config(tmp_path)
    with pytest.raises(DiskSpaceError) as refused:
        check_checkpoint_space(cfg, build_policy_configs(cfg))
    message = str(refused.value)
    assert "\n" not in message and "85.3 GB" in message
    assert "actor_rollout_ref.actor.checkpoint.save_contents=[model,extra]" in message
    assert "14.2 GB a checkpoint, 28.4 GB needed" in message and "restarts both optimizers" in message
    # the key the line names is the one that makes the run fit
    light = paper_shape_config(tmp_path, "actor_rollout_ref.actor.checkpoint.save_contents=[model,extra]")
    plan = plan_checkpoint_space(light, build_policy_configs(light))
    assert 14.1e9 < plan.checkpoint_bytes < 14.3e9 and plan.needed_bytes < 60e9
    # a disk too small even for weights only gets no such advice
    monkeypatch.setattr("cpmobius.checkpoint_space.free_bytes", lambda folder: 20_000_000_000)
    with pytest.raises(DiskSpaceError) as refused:
        check_checkpoint_space(cfg, build_policy_configs(cfg))
    assert "save_contents" not in str(refused.value)


def test_a_run_folder_with_no_intact_checkpoint_stops_in_one_line_exit_2_before_anything_starts(tmp_path):
    """The command line: one line on stderr, exit 2, no toy model built, no Ray."""
    run = tmp_path / "run"
    truncate(save(run, 1) / "coach" / SHARDS[0])
    cache = tmp_path / "no-models-here"
    done = subprocess.run(
        [sys.executable, "-m", "cpmobius.main", f"model.cache_dir={cache}", f"trainer.default_local_dir={run}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no intact checkpoint to resume from"), done.stderr
    assert "coach/model_world_size_1_rank_0.pt" in lines[0] and "trainer.resume_mode=disable" in lines[0]
    assert not cache.exists()


def _link_the_player_folder_elsewhere(step: Path) -> None:
    """The player's shards moved to another disk and linked back, a stale shard of another world size among them."""
    elsewhere = step.parent / "elsewhere"
    (step / "player").rename(elsewhere)
    (step / "player").symlink_to(elsewhere)
    torch.save({}, elsewhere / "model_world_size_2_rank_0.pt")


LINKED_OR_HIDDEN = {
    "an unlisted pickle in a linked folder": _link_the_player_folder_elsewhere,
    "a linked folder outside the run": lambda s: (s / "coach" / "etc").symlink_to("/etc"),
    "an unlisted file named manifest.json in a subfolder": lambda s: torch.save({}, s / "player" / MANIFEST_FILE),
    "a manifest that is a folder": lambda s: ((s / MANIFEST_FILE).unlink(), (s / MANIFEST_FILE).mkdir()),
}


@pytest.mark.parametrize("kind", LINKED_OR_HIDDEN)
def test_files_behind_links_or_named_like_the_manifest_are_checked_too(tmp_path, kind):
    lines = resume_past_a_broken_step_2(tmp_path, LINKED_OR_HIDDEN[kind])
    assert len(lines) == 2 and "checkpoint of step 2 is broken" in lines[0], lines


def test_a_linked_folder_whose_files_match_is_intact_and_a_link_cycle_is_walked_once(tmp_path):
    folder = save(tmp_path, 1)
    elsewhere = tmp_path / "elsewhere"
    (folder / "player").rename(elsewhere)
    (folder / "player").symlink_to(elsewhere)
    assert verify_checkpoint(folder) is None
    (elsewhere / "loop").symlink_to(elsewhere)  # a link back to its own folder
    assert verify_checkpoint(folder) is None


@pytest.mark.parametrize("stray", ["global_step_02", "global_step_\u00b2", "global_step_\u0663", "global_step_-1"])
def test_a_folder_whose_name_is_not_how_a_step_is_written_is_not_a_checkpoint(tmp_path, stray):
    save(tmp_path, 1)
    (tmp_path / stray).mkdir()
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 1
    assert lines == []
    assert checkpoint.prune_checkpoints(tmp_path, 1) == [] and (tmp_path / stray).is_dir()


def test_a_zero_padded_copy_is_not_resumed_as_the_missing_step_it_spells(tmp_path):
    save(tmp_path, 1), save(tmp_path, 2)
    (tmp_path / "global_step_2").rename(tmp_path / "global_step_02")
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 1
    assert len(lines) == 1 and "names step 2" in lines[0], lines


def test_a_tracker_of_thousands_of_digits_is_not_a_step(tmp_path):
    save(tmp_path, 1)
    (tmp_path / checkpoint.TRACKER_FILE).write_text("9" * 5000)
    lines = []
    assert checkpoint.check_resume(run_cfg(tmp_path), lines.append) == 1
    assert len(lines) == 1 and "not a step" in lines[0]
