"""Cumulative counters after a kill and a resume: ``loop/engine_switches`` goes on from the checkpoint, as an
uninterrupted run's would. The loop's real `fit`, `save` and `try_resume` run with a scripted Player (no Ray,
no model); each step only counts engine wakes on the shared guard."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf
from stand_ins import ScriptedPolicy, not_sampled

from cpmobius.engine.sharing import EngineGuard
from cpmobius.loop import CoachPlayerLoop
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet

WAKES_PER_STEP = {1: 3, 2: 5, 3: 4}  # engine wakes step k makes (attempts differ from step to step)


def make_loop(run_dir: Path, total_steps: int) -> tuple[CoachPlayerLoop, list[tuple[int, dict]]]:
    cfg = OmegaConf.create(
        {
            "seed": 0,
            "trainer": {
                "default_local_dir": str(run_dir),
                "total_training_steps": total_steps,
                "save_freq": 1,
                "resume_mode": "auto",
            },
        }
    )
    settings = load_settings(
        OmegaConf.create(
            {"coach": {}, "filter": {}, "validation": {"greedy": True}, "player": {"n": 4, "answer_format": "template"}}
        )
    )
    guard = EngineGuard()  # one guard for both policies, as `build_loop` makes it
    coach = ScriptedPolicy(not_sampled, name="coach", guard=guard)
    player = ScriptedPolicy(lambda question, i: ["\\boxed{1}"] * 4, name="player", guard=guard)
    val_set = ValidationSet("v", ["0", "1"], ["q?", "q?"], ["1", "1"])
    loop = CoachPlayerLoop(cfg, settings, coach, player, val_set=val_set)
    logged: list[tuple[int, dict]] = []
    loop._log = lambda data, step: logged.append((step, data))

    def counted_step():
        guard.switches += WAKES_PER_STEP[loop.state.step + 1]
        return {}

    loop.step = counted_step
    return loop, logged


def switches_by_step(logged: list[tuple[int, dict]]) -> dict[int, float]:
    return {step: data["loop/engine_switches"] for step, data in logged if "loop/engine_switches" in data}


def test_engine_switches_after_a_kill_and_a_resume_equal_an_uninterrupted_runs(tmp_path):
    loop, logged = make_loop(tmp_path / "straight", 3)
    loop.fit()
    uninterrupted = switches_by_step(logged)
    assert uninterrupted == {1: 4.0, 2: 9.0, 3: 13.0}  # the Player's wake for step 0's validation, then each step's

    first, _ = make_loop(tmp_path / "killed", 1)
    first.fit()  # step 1 and its checkpoint
    first.player.guard.switches += WAKES_PER_STEP[2]  # step 2 ran, then SIGKILL before its checkpoint
    resumed, resumed_logged = make_loop(tmp_path / "killed", 3)  # a new process: a new guard at 0
    resumed.fit()
    assert switches_by_step(resumed_logged) == {2: 9.0, 3: 13.0}
    saved = json.loads((tmp_path / "killed" / "global_step_3" / "loop_state.json").read_text())
    assert saved["engine_switches"] == 13


def test_a_checkpoint_without_the_counter_resumes_it_from_zero(tmp_path):
    from cpmobius.loop_state import LoopState

    saved = {key: value for key, value in LoopState(step=2).__dict__.items() if key != "engine_switches"}
    assert LoopState.from_saved(saved).engine_switches == 0


# =========================================================================== metrics files after a resume


def write_rows(path: Path, steps, tail: str = "") -> None:
    path.write_text("".join(json.dumps({"step": s, "data": {"val/accuracy": s / 10}}) + "\n" for s in steps) + tail)


def tracking_cfg(run_dir: Path, resume_mode: str = "auto"):
    return OmegaConf.create(
        {
            "trainer": {
                "project_name": "cpmobius",
                "experiment_name": "resume",
                "logger": ["file"],
                "default_local_dir": str(run_dir),
                "resume_mode": resume_mode,
            }
        }
    )


def checkpointed_at(run_dir: Path, step: int) -> None:
    from cpmobius.checkpoint import TRACKER_FILE

    (run_dir / f"global_step_{step}").mkdir(parents=True)
    (run_dir / TRACKER_FILE).write_text(str(step))


def test_a_resumed_launch_leaves_each_step_in_the_metrics_files_once(tmp_path, monkeypatch, capsys):
    from cpmobius.run_log import make_tracking, metrics_files, read_metric_rows

    run = tmp_path / "run"
    checkpointed_at(run, 1)
    # the killed launch: steps 0-2 logged, checkpoint 1 only, and a row cut short by SIGKILL
    write_rows(run / "metrics.jsonl", [0, 1, 2], tail='{"step": 3, "data": {"val/acc')
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(run / "metrics.jsonl"))
    tracking = make_tracking(tracking_cfg(run))
    for step in (2, 3):  # the resumed launch runs step 2 again, then step 3
        tracking.log(data={"val/accuracy": step / 10}, step=step)
    tracking.finish()
    assert "steps [2] logged by an earlier launch are dropped" in capsys.readouterr().out
    concatenated = [row["step"] for path in metrics_files(run) for row in read_metric_rows(path)]
    assert concatenated == [0, 1, 2, 3]
    assert [json.loads(line)["step"] for line in (run / "metrics.1.jsonl").read_text().splitlines()] == [0, 1]


def test_a_fresh_start_after_a_kill_before_any_checkpoint_supersedes_the_killed_launchs_rows(tmp_path):
    from cpmobius.run_log import drop_rerun_steps

    write_rows(tmp_path / "metrics.1.jsonl", [0, 1])  # killed before checkpoint 1: the start runs step 0 again
    assert "steps [0, 1]" in drop_rerun_steps(tmp_path, first_step=0)
    assert not (tmp_path / "metrics.1.jsonl").exists()


def test_the_shared_reader_counts_a_step_logged_twice_once_and_skips_a_cut_line(tmp_path):
    from cpmobius.plots import read_run_metrics
    from cpmobius.run_report import read_metrics

    write_rows(tmp_path / "metrics.1.jsonl", [0, 1, 2], tail='{"step": 3, "da')  # as a killed launch left it
    write_rows(tmp_path / "metrics.jsonl", [2, 3])  # step 2 run again by the resumed launch
    for steps in (read_run_metrics(tmp_path), read_metrics(tmp_path)):
        assert sorted(steps) == [0, 1, 2, 3] and steps[2] == {"val/accuracy": 0.2}
