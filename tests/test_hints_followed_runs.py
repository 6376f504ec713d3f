"""The hints a run prints about its checkpoints work when followed as printed: the keys that choose a checkpoint
when none is intact, the line of a run already at its last step, the line of an interrupt, of a failed save and of
a full disk (which say how to resume), and the advice of a disk too small for the run's checkpoints.

Checkpoints are written by the real writer with the stand-in policies of `test_checkpoint_integrity` (files named
and shaped as verl's shards); each test takes the keys, values or folders out of the printed line, applies them to
the same command line (accepted by ``--cfg job``'s checks, in-process: `accepted`) and checks what the line says they do: which
step the next launch resumes from (`check_resume`, and the first step it logs), or that the run then fits its disk.
"""

from __future__ import annotations

import errno
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_checkpoint_integrity import SHARDS, ShardPolicy, save, truncate
from test_checkpoint_space import disk_policy
from test_config_errors import run_cli
from test_hints_followed import accepted

import cpmobius.interrupts
import cpmobius.main
from cpmobius import checkpoint
from cpmobius.config import ConfigError, compose_config
from cpmobius.engine.config import build_policy_configs
from cpmobius.loop import CoachPlayerLoop
from cpmobius.loop_state import LoopState
from cpmobius.run_log import first_logged_step


def overrides_in(text: str) -> list[str]:
    """The ``key=value`` overrides a printed phrase names, a ``<placeholder>`` or ``[list]`` value kept whole."""
    return [f"{key}={value}" for key, value in re.findall(r"([\w.]+)=(<[^>]*>|\[[^\]]*\]|[^\s,;)]+)", text)]


def resumes_from(args: list[str]) -> int:
    """The checkpoint step a launch of ``args`` resumes from (0: it starts afresh), the command line accepted
    first: the step before the first one it logs, its checkpoint checked as at a run's start."""
    cfg, _ = accepted(args)
    checkpoint.check_resume(cfg, lambda line: None)
    first = first_logged_step(cfg)
    return 0 if first == 0 else first - 1


# --------------------------------------------------------------------------- no intact checkpoint to resume


def broken_run(tmp_path, picked: bool) -> tuple[list[str], dict[str, int]]:
    """Checkpoints of steps 1 and 2, step 2 broken: named by ``trainer.resume_from_path`` when ``picked``, else
    step 1 broken too. The command line, and the step each way out should resume from (0: start afresh)."""
    run = tmp_path / "run"
    save(run, 1), save(run, 2)
    truncate(run / "global_step_2" / "player" / SHARDS[0])
    args = [f"trainer.default_local_dir={run}"]
    if picked:
        args += ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={run / 'global_step_2'}"]
    else:
        truncate(run / "global_step_1" / "coach" / SHARDS[0])
    intact = 1 if picked else 3  # picked: step 1 of the run; else a checkpoint of another run
    if not picked:
        save(tmp_path / "other", 3)
    return args, {"start again": 0, "to pick": intact, "newest intact": 1, "or another": 0}


@pytest.mark.parametrize("picked", [False, True], ids=["no intact checkpoint", "the picked one broken"])
def test_each_way_out_of_a_broken_checkpoint_is_accepted_and_does_what_it_says(tmp_path, picked):
    """The line's three ways out, each typed beside the same command line: a ``<placeholder>`` gets an intact
    checkpoint folder, a key named without a value a new folder."""
    args, expected = broken_run(tmp_path, picked)
    with pytest.raises(checkpoint.CheckpointCorruptError) as refused:
        checkpoint.check_resume(compose_config(args), lambda line: None)
    ways = str(refused.value).split("; set ", 1)[1].split(", ")
    assert len(ways) == 3 and ways[-1].startswith("or "), ways
    intact = tmp_path / ("run/global_step_1" if picked else "other/global_step_3")
    for way in ways:
        fixes = [re.sub(r"<[^>]*>", str(intact), fix) for fix in overrides_in(way)]
        if not fixes:  # "or another KEY"
            (key,) = re.fullmatch(r"or another ([\w.]+)", way).groups()
            fixes = [f"{key}={tmp_path / 'another'}"]
        (purpose,) = [name for name in expected if name in way]
        assert resumes_from([*args, *fixes]) == expected[purpose], way


def test_starting_again_in_the_same_folder_leaves_none_of_the_earlier_runs_metrics(tmp_path, monkeypatch):
    """``trainer.resume_mode=disable to start again``: the new run's metrics are the run's metrics (the earlier
    launch's rows, steps 0-4, would otherwise sit beside them in ``metrics.1.jsonl`` and in every plot); the
    earlier file is kept aside."""
    from test_resume_counters import tracking_cfg, write_rows

    from cpmobius.run_log import make_tracking, metrics_files, read_metric_rows

    run = tmp_path / "run"
    truncate(save(run, 4) / "coach" / SHARDS[0])
    write_rows(run / "metrics.jsonl", [0, 1, 2, 3, 4])
    with pytest.raises(checkpoint.CheckpointCorruptError) as refused:
        checkpoint.check_resume(tracking_cfg(run), lambda line: None)
    (fix,) = overrides_in(str(refused.value).split("; set ", 1)[1].split(" to start again")[0])
    key, mode = fix.split("=")
    assert key == "trainer.resume_mode"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(run / "metrics.jsonl"))
    tracking = make_tracking(tracking_cfg(run, resume_mode=mode))
    tracking.log(data={"val/accuracy": 0.5}, step=0)
    tracking.finish()
    assert [row["step"] for path in metrics_files(run) for row in read_metric_rows(path)] == [0]
    assert [row["step"] for row in read_metric_rows(run / "earlier.metrics.jsonl")] == [0, 1, 2, 3, 4]  # kept


# --------------------------------------------------------------------------- a run already at its last step


def test_both_ways_on_from_a_finished_run_start_a_run(tmp_path, capsys, monkeypatch):
    """``is already at step 2 ...: Raise trainer.total_training_steps to continue, or set
    trainer.default_local_dir for a new run``: either, typed as the line names it, gets past that stop."""

    class Started(Exception):
        """The run went on past the already-done check (to the GPU driver check)."""

    def started(platform):
        raise Started

    run = tmp_path / "run"
    save(run, 1), save(run, 2)
    monkeypatch.setattr(cpmobius.main, "hold_kernels", lambda cfg: None)
    monkeypatch.setattr("cpmobius.engine.gpu_driver.check_this_machine", started)
    args = [f"trainer.default_local_dir={run}", "trainer.total_training_steps=2"]
    assert cpmobius.main.run(compose_config(args)) is None
    line = capsys.readouterr().out.strip()
    done, raised, folder = re.fullmatch(
        r"\[cpmobius\] \S+ is already at step (\d+) of \S+: nothing to run\. Raise ([\w.]+) to continue, "
        r"or set ([\w.]+) for a new run\.",
        line,
    ).groups()
    for fix, first in ((f"{raised}={int(done) + 1}", int(done)), (f"{folder}={tmp_path / 'new'}", 0)):
        assert resumes_from([*args, fix]) == first
        with pytest.raises(Started):
            cpmobius.main.run(compose_config([*args, fix]))


# --------------------------------------------------------------------------- the lines that say how to resume

RESUME_MODES = {
    "auto": [],
    "disable": ["trainer.resume_mode=disable"],  # a run started again
    "resume_path": ["trainer.resume_mode=resume_path"],  # a run started from a picked checkpoint
}


def run_with_two_checkpoints(tmp_path, mode: str) -> tuple[Path, list[str]]:
    """A run folder whose newest checkpoint is step 2, and the command line of a launch in ``mode``."""
    run = tmp_path / "run"
    save(run, 1), save(run, 2)
    picked = [f"trainer.resume_from_path={run / 'global_step_1'}"] if mode == "resume_path" else []
    return run, [f"trainer.default_local_dir={run}", "trainer.total_training_steps=5", *RESUME_MODES[mode], *picked]


def followed(line: str, args: list[str]) -> list[str]:
    """The command line ``... run the same command[ with OVERRIDES] to resume ...`` asks for."""
    (extra,) = re.search(r"run the same command((?: with \S+)?) to resume", line).groups()
    return [*args, *overrides_in(extra)]


@pytest.mark.parametrize("mode", RESUME_MODES)
def test_the_interrupt_line_resumes_from_the_last_checkpoint(tmp_path, mode):
    run, args = run_with_two_checkpoints(tmp_path, mode)
    loop = SimpleNamespace(state=LoopState(step=2), validating_step_0=False)
    line = cpmobius.interrupts.describe_interrupt(compose_config(args), loop)
    assert "the last checkpoint is step 2" in line
    assert resumes_from(followed(line, args)) == 2


@pytest.mark.parametrize("mode", RESUME_MODES)
def test_the_failed_save_line_resumes_from_the_last_checkpoint(tmp_path, mode):
    """The loop's save of step 3 fails on a full disk: the line's way to resume."""
    run, args = run_with_two_checkpoints(tmp_path, mode)
    loop = SimpleNamespace(
        cfg=compose_config(args),
        output_dir=run,
        state=LoopState(step=3),
        delta=SimpleNamespace(state_dict=dict),
        filter=SimpleNamespace(state_dict=dict),
        player=SimpleNamespace(guard=SimpleNamespace(switches=0)),
        policies={"coach": disk_policy(3.0), "player": disk_policy(3.0, full=True)},
    )
    with pytest.raises(checkpoint.CheckpointSaveError) as failed:
        CoachPlayerLoop.save(loop)
    assert "step 2, is intact" in str(failed.value)
    assert resumes_from(followed(str(failed.value), args)) == 2


@pytest.mark.parametrize("mode", RESUME_MODES)
def test_the_full_disk_line_resumes_from_the_last_checkpoint(tmp_path, capsys, monkeypatch, mode):
    """The disk fills while the run writes its metrics: the command line's one line (exit 1), followed."""
    run, args = run_with_two_checkpoints(tmp_path, mode)

    def full(cfg, settings=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(run / "metrics.jsonl"))

    monkeypatch.setattr(cpmobius.main, "run", full)
    monkeypatch.setattr(cpmobius.main, "hold_kernels", lambda cfg: None)
    assert run_cli(args, monkeypatch) == 1
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: the disk is full"), line
    assert resumes_from(followed(line, args)) == 2


def test_a_run_moved_to_a_larger_disk_resumes_where_the_failed_save_line_says(tmp_path):
    """``make room (or move RUN to a larger disk and point trainer.default_local_dir there)``: moved, pointed at,
    the run resumes from its last complete checkpoint, whose files still match their manifest."""
    run, args = run_with_two_checkpoints(tmp_path, "auto")
    policies = {"coach": disk_policy(3.0), "player": disk_policy(3.0, full=True)}
    with pytest.raises(checkpoint.CheckpointSaveError) as failed:
        checkpoint.save_checkpoint(run, 3, policies, {"step": 3}, compose_config(args))
    folder, key = re.search(r"or move (\S+) to a larger disk and point ([\w.]+) there", str(failed.value)).groups()
    larger = tmp_path / "larger" / "run"
    shutil.move(folder, larger)
    moved = [arg for arg in args if not arg.startswith(f"{key}=")] + [f"{key}={larger}"]
    assert resumes_from(moved) == 2
    coach, player = ShardPolicy(0.0), ShardPolicy(0.0)
    checkpoint.load_checkpoint(checkpoint.find_latest_checkpoint(larger), {"coach": coach, "player": player})
    assert (coach.weight, player.weight) == (2.0, 2.0)


# --------------------------------------------------------------------------- a disk too small for the checkpoints

GB = 1_000_000_000


def paper_shape_args(tmp_path, *overrides: str) -> list[str]:
    """`test_checkpoint_space`'s 1.5B shape (42.7 GB a checkpoint, 14.2 GB weights-only) as a command line."""
    from test_checkpoint_space import paper_shape_config

    paper_shape_config(tmp_path)  # writes the model's config.json
    model = tmp_path / "model"
    return [
        f"model.coach_path={model}",
        f"model.player_path={model}",
        "model.name=qwen_test",
        "warmup.enabled=false",
        f"trainer.default_local_dir={tmp_path / 'run'}",
        *overrides,
    ]


def space_refusal(args: list[str]) -> str:
    from cpmobius.checkpoint_space import DiskSpaceError, check_checkpoint_space

    cfg = compose_config(args)
    with pytest.raises(DiskSpaceError) as refused:
        check_checkpoint_space(cfg, build_policy_configs(cfg))
    return str(refused.value)


def fits(args: list[str]) -> bool:
    """Whether the command line is accepted and its checkpoints fit the (patched) free space."""
    from cpmobius.checkpoint_space import DiskSpaceError, check_checkpoint_space

    cfg, configs = accepted(args)
    try:
        check_checkpoint_space(cfg, configs)
    except DiskSpaceError:
        return False
    return True


def gigabytes(text: str) -> int:
    number, unit = text.split()
    assert unit == "GB", text
    return int(float(number) * GB)


@pytest.mark.parametrize(
    ("keep", "delta"),
    [("null", ""), ("3", ""), ("null", "++player.verl.actor.checkpoint.save_contents=[model,optimizer,extra]")],
    ids=["every checkpoint kept", "three kept", "a policy's own save_contents"],
)
def test_each_way_to_fit_the_disk_the_refusal_names_makes_the_run_fit(tmp_path, monkeypatch, keep, delta):
    """Five saves (save_freq 2 of 10 steps) of 42.7 GB on a disk with 100 GB free: keep fewer, save less often,
    another disk with the printed room, or weights only (5 × 14.2 GB); each typed as printed fits."""
    larger = tmp_path / "larger"
    room = {"free": 100 * GB}
    monkeypatch.setattr(
        "cpmobius.checkpoint_space.free_bytes",
        lambda folder: room["larger"] if str(folder).startswith(str(larger)) else room["free"],
    )
    args = paper_shape_args(
        tmp_path, "trainer.save_freq=2", "trainer.total_training_steps=10", f"trainer.max_actor_ckpt_to_keep={keep}"
    )
    args += [delta] if delta else []
    message = space_refusal(args)
    ways = []
    if (fewer := re.search(r"(?:set ([\w.]+)=(\d+)|lower ([\w.]+) to (\d+)) or less", message)) is not None:
        key, value = [group for group in fewer.groups() if group]
        ways.append([f"{key}={value}"])
    if (less_often := re.search(r"raise ([\w.]+) \(now (\d+)\)", message)) is not None:
        ways.append([f"{less_often.group(1)}=10"])  # raised as far as it goes: one save, after the last step
    key, room["larger"] = re.search(r"point ([\w.]+) at a disk with (\S+ GB) free", message).groups()
    room["larger"] = gigabytes(room["larger"])
    ways.append([f"{key}={larger}"])
    weights_only = re.search(r"or save weights only, ((?:\S+=\S+ )+)\(", message)
    ways.append(weights_only.group(1).split())
    assert len(ways) == (4 if keep == "null" else 3), message
    assert not fits(args)
    for fixes in ways:
        assert fits([*args, *fixes]), fixes


@pytest.mark.parametrize("delta", ["", "++coach.verl.actor.checkpoint.load_contents=[model,optimizer,extra]"])
def test_the_weights_only_resume_refusal_is_followed_as_printed(tmp_path, delta):
    """A checkpoint saved weights-only, resumed with load_contents asking for the optimizer: the printed key makes
    the resume go on, AdamW restarting, for both policies."""
    from cpmobius.checkpoint_space import describe_optimizer_resume

    run = tmp_path / "run"
    save(run, 1, optimizer=False)
    args = [f"trainer.default_local_dir={run}", *([delta] if delta else [])]
    cfg = compose_config(args)
    with pytest.raises(ConfigError) as refused:
        describe_optimizer_resume(cfg, build_policy_configs(cfg))
    fixes = overrides_in(str(refused.value).split(": set ", 1)[1].split(" to resume with")[0])
    line = describe_optimizer_resume(*accepted([*args, *fixes]))
    assert "AdamW restarts from zero moments for the coach and the player" in line
