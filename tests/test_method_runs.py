"""The baselines as a newcomer runs them in the toy world: ``python -m cpmobius.main method=ttrl|rent|rzero``
exits 0, prints the method's reward and validation accuracy every step, and a RENT run and an R-Zero run (inside
a Solver phase) resumed from an uninterrupted run's checkpoint end in that run's state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def run_main(out_dir: Path | None, model_cache: Path, *overrides: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """A toy run in ``out_dir``, or (None) in the folder the run names itself under ``cwd``."""
    folders = [f"trainer.default_local_dir={out_dir}", "hydra.run.dir=" + str(out_dir / "hydra")] if out_dir else []
    method = next((o.split("=", 1)[1] for o in overrides if o.startswith("method=")), "cpmobius")
    per_step = [] if method == "cpmobius" else ["method.prompts_per_step=4"]  # a key of the baselines only
    command = [
        sys.executable,
        "-m",
        "cpmobius.main",
        f"model.cache_dir={model_cache}",
        *folders,
        "validation.size=8",
        *per_step,
        *overrides,
    ]
    done = subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def table_rows(stdout: str) -> dict[int, dict[str, str]]:
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["step", "val_acc"])
    names = lines[header].split()
    rows = {}
    for line in lines[header + 1 :]:
        cells = line.split()
        if len(cells) == len(names) and cells[0].isdigit():
            rows[int(cells[0])] = dict(zip(names, cells))
    return rows


def test_ttrl_runs_in_the_toy_world_and_logs_its_reward_and_accuracy_every_step(tmp_path, model_cache):
    out = tmp_path / "ttrl"
    done = run_main(out, model_cache, "method=ttrl", "method.votes=8", "player.n=4", "trainer.total_training_steps=2")
    rows = table_rows(done.stdout)
    assert sorted(rows) == [0, 1, 2]
    for step in (1, 2):
        assert rows[step]["reward"] != "-" and rows[step]["val_acc"] != "-" and rows[step]["qs"] == "4"
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    by_step = {entry["step"]: entry["data"] for entry in logged if "step" in entry}
    for step in (1, 2):
        assert 0.0 <= by_step[step]["player/reward_mean"] <= 1.0 and "val/accuracy" in by_step[step]
        assert "coach/updated" not in by_step[step]  # no Coach in this method
    assert not (out / "global_step_2" / "coach").exists()


def test_rent_after_the_default_run_is_its_own_run_and_resumed_ends_where_an_uninterrupted_run_does(
    tmp_path, model_cache
):
    """The README's order in one folder: the default run's checkpoints there, then ``method=rent``, which runs
    RENT in its own folder (``outputs/cpmobius/default_rent``) instead of resuming from the default's; a RENT run
    resumed from that run's step-2 checkpoint (``trainer.resume_from_path``: the files a run stopped there leaves)
    ends in its state. The same command resuming in its own folder is `test_resume`'s, for the default method.

    The default run's folder is laid out as that run leaves it after step 1 (its tracker file naming step 1,
    the step's folder) rather than run (a launch costs about a minute of the suite): a RENT run that took it for
    its own would resume from it, print so, and fail on the step folder."""
    import torch

    from cpmobius.checkpoint import TRACKER_FILE

    clone = tmp_path / "clone"
    default = clone / "outputs" / "cpmobius" / "default"
    (default / "global_step_1").mkdir(parents=True)
    (default / TRACKER_FILE).write_text("1")
    straight, resumed_dir = clone / "outputs" / "cpmobius" / "default_rent", tmp_path / "resumed"
    done = run_main(None, model_cache, "method=rent", "trainer.total_training_steps=3", cwd=clone)
    assert "resumed from" not in done.stdout and "already at step" not in done.stdout
    rows = table_rows(done.stdout)
    assert all(float(rows[step]["reward"]) < 0 for step in (1, 2, 3))  # RENT's rows: minus an entropy
    assert (straight / "global_step_3").is_dir() and not (default / "global_step_2").exists()

    picked = ("trainer.resume_mode=resume_path", f"trainer.resume_from_path={straight / 'global_step_2'}")
    resumed = run_main(resumed_dir, model_cache, "method=rent", *picked, "trainer.total_training_steps=3")
    assert f"resumed from {straight / 'global_step_2'} at step 2" in resumed.stdout
    timings = ("rollout_s", "update_s", "val_s", "step_s")
    assert {k: v for k, v in table_rows(resumed.stdout)[3].items() if k not in timings} == {
        k: v for k, v in rows[3].items() if k not in timings
    }

    states = [json.loads((d / "global_step_3" / "loop_state.json").read_text()) for d in (straight, resumed_dir)]
    assert states[0]["step"] == states[1]["step"] and states[0]["policies"] == states[1]["policies"]
    assert states[0]["delta_t_history"] == pytest.approx(states[1]["delta_t_history"])
    weights = [
        torch.load(d / "global_step_3" / "player" / "model_world_size_1_rank_0.pt", weights_only=False)
        for d in (straight, resumed_dir)
    ]
    for name, tensor in weights[0].items():
        other = weights[1][name]
        tensor = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
        other = other.full_tensor() if hasattr(other, "full_tensor") else other
        assert torch.allclose(tensor, other, atol=1e-6), f"player.{name} differs after resume"


def test_rzero_alternates_its_phases_logs_every_step_and_resumes_inside_a_solver_phase(tmp_path, model_cache):
    """A Challenger step, then two Solver steps; a run resumed from the checkpoint after the first Solver step
    (the uninterrupted run's, by ``trainer.resume_from_path``: the files a run stopped there leaves) goes on with
    the saved Solver set (no new questions written) and ends in the uninterrupted run's state."""
    rzero = (
        "method=rzero",
        "method.challenger_steps=1",
        "method.solver_steps=2",
        "method.challenger_prompts=2",
        "method.solver_questions=8",
        # Keep every voted question: in the toy default's steep world most of the few well-formed questions are
        # level 0, which the Player always answers alike (share 1.0, above R-Zero's band), and the test is of the
        # phases and the resume, not of the band.
        "method.solver_band_low=0.0",
        "method.solver_band_high=1.0",
    )
    straight, resumed_dir = tmp_path / "straight", tmp_path / "resumed"
    done = run_main(straight, model_cache, *rzero, "trainer.total_training_steps=3")
    rows = table_rows(done.stdout)
    assert sorted(rows) == [0, 1, 2, 3]
    assert [rows[step]["phase"] for step in (1, 2, 3)] == ["0", "1", "1"]  # a Challenger step, then Solver steps
    for step in (1, 2, 3):
        assert rows[step]["reward"] != "-" and rows[step]["val_acc"] != "-"
    logged = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    by_step = {entry["step"]: entry["data"] for entry in logged if "step" in entry}
    # the Challenger's reward: min(p, 1 - p) - a cluster share in [-2, 0.5]; the Player's: a share of rollouts
    assert -2.0 <= by_step[1]["coach/reward_mean"] <= 0.5 and by_step[1]["coach/updated"] == 1.0
    assert "player/reward_mean" not in by_step[1]  # the Player does not train in a Challenger step
    assert 0.0 <= by_step[2]["player/reward_mean"] <= 1.0 and by_step[2]["rzero/solver_written"] == 8.0
    assert "rzero/solver_written" not in by_step[3]  # the phase's set is written once, at its first step
    assert all("val/accuracy" in by_step[step] for step in (1, 2, 3))
    assert (straight / "global_step_3" / "coach").is_dir()  # the Coach is trained and checkpointed

    picked = ("trainer.resume_mode=resume_path", f"trainer.resume_from_path={straight / 'global_step_2'}")
    resumed = run_main(resumed_dir, model_cache, *rzero, *picked, "trainer.total_training_steps=3")
    assert f"resumed from {straight / 'global_step_2'} at step 2" in resumed.stdout
    logged = [json.loads(line) for line in (resumed_dir / "metrics.jsonl").read_text().splitlines()]
    resumed_steps = {entry["step"]: entry["data"] for entry in logged if "step" in entry}
    assert 3 in resumed_steps and "rzero/solver_written" not in resumed_steps[3]  # the saved set, not a new one
    timings = ("coach_s", "rollout_s", "c_upd_s", "update_s", "val_s", "step_s")
    assert {k: v for k, v in table_rows(resumed.stdout)[3].items() if k not in timings} == {
        k: v for k, v in rows[3].items() if k not in timings
    }
    states = [json.loads((d / "global_step_3" / "loop_state.json").read_text()) for d in (straight, resumed_dir)]
    assert states[1]["problem_source"] == states[0]["problem_source"] and states[0]["problem_source"]["iteration"] == 1
    assert states[1]["step"] == states[0]["step"] == 3 and states[1]["policies"] == states[0]["policies"]
