"""Tracking (docs/metrics.md): `trainer.logger=[file,tensorboard]` through the driver's `make_tracking`
(verl's `Tracking`) writes `metrics.jsonl` and TensorBoard event files in the run folder, and the
events hold our metric keys at the loop's step numbers (read back with TensorBoard's own reader)."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

# Keys of every stage, as the loop logs them (cpmobius/metrics.py; docs/metrics.md).
KEYS = (
    "val/accuracy",
    "val/delta_t",
    "filter/kept_frac",
    "filter/pass_rate_mean",
    "coach/valid_frac",
    "coach/updated",
    "pseudo_label/accuracy",
    "player/actor/pg_loss",
    "coach/actor/grad_norm",
    "timing_s/step",
)


def _row(step: int) -> dict[str, float]:
    return {key: step + i / 100 for i, key in enumerate(KEYS)}


def test_tensorboard_events_hold_our_keys_at_our_steps(tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from cpmobius.run_log import make_tracking

    # The driver only sets these when unset (a user's own TENSORBOARD_DIR wins): start unset, and
    # have monkeypatch remove what the driver sets when the test ends.
    for name in ("TENSORBOARD_DIR", "VERL_FILE_LOGGER_PATH"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    run_dir = tmp_path / "run"
    cfg = OmegaConf.create(
        {
            "trainer": {
                "project_name": "cpmobius",
                "experiment_name": "tb",
                "logger": ["file", "tensorboard"],
                "default_local_dir": str(run_dir),
            }
        }
    )
    tracking = make_tracking(cfg)
    steps = (0, 1, 2, 3)  # step 0: the validation before the loop, as the default run logs it
    for step in steps:
        tracking.log(data=_row(step), step=step)
    tracking.finish()

    events = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1, sorted(p.name for p in (run_dir / "tensorboard").iterdir())
    reader = EventAccumulator(str(run_dir / "tensorboard"))
    reader.Reload()
    assert set(reader.Tags()["scalars"]) == set(KEYS)
    for key in KEYS:
        scalars = reader.Scalars(key)
        assert [s.step for s in scalars] == list(steps)
        assert [s.value for s in scalars] == pytest.approx([_row(step)[key] for step in steps])

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(steps) and rows[2]["data"] == pytest.approx(_row(2))


def test_a_tensorboard_dir_from_the_environment_wins(tmp_path, monkeypatch):
    from cpmobius.run_log import make_tracking

    monkeypatch.setenv("TENSORBOARD_DIR", str(tmp_path / "elsewhere"))
    cfg = OmegaConf.create(
        {
            "trainer": {
                "project_name": "cpmobius",
                "experiment_name": "tb",
                "logger": ["tensorboard"],
                "default_local_dir": str(tmp_path / "run"),
            }
        }
    )
    tracking = make_tracking(cfg)
    tracking.log(data={"val/accuracy": 0.5}, step=1)
    tracking.finish()
    assert list((tmp_path / "elsewhere").glob("events.out.tfevents.*"))
    assert not (tmp_path / "run" / "tensorboard").exists()


def test_the_step_table_of_the_toy_world_shows_the_greedy_pass_and_the_coach_level(capsys):
    from cpmobius.methods import table_columns
    from cpmobius.run_log import POOL_TABLE_COLUMNS, RZERO_TABLE_COLUMNS, TABLE_COLUMNS, StepTable

    toy = table_columns("cpmobius", greedy_beside=True, levels=True)
    labels = [label for _, _, label in toy]
    assert labels[:3] == ["step", "val_acc", "greedy"]
    assert labels[labels.index("valid") + 1] == "c_level"
    assert len(toy) == len(TABLE_COLUMNS) + 2
    assert table_columns("cpmobius") == TABLE_COLUMNS  # a real model's run: neither column
    assert table_columns("rzero", True, True) == RZERO_TABLE_COLUMNS
    assert table_columns("ttrl", True, True) == POOL_TABLE_COLUMNS

    table = StepTable(toy)
    table.log({"val/accuracy": 0.3204, "val/accuracy_greedy": 0.390625}, step=0)
    table.log({"val/accuracy": 0.3333, "val/accuracy_greedy": 0.375, "coach/difficulty_mean": 0.4166}, step=1)
    header, first, second = capsys.readouterr().out.splitlines()
    assert header.split()[:3] == ["step", "val_acc", "greedy"]
    assert first.split()[:3] == ["0", "0.320", "0.391"] and len(first.split()) == len(toy)
    cells = second.split()
    assert cells[2] == "0.375" and cells[labels.index("c_level")] == "0.42"


def test_a_run_logs_to_its_own_folder_whatever_logger_path_it_inherits_and_leaves_the_environment_as_found(
    tmp_path, monkeypatch
):
    """A process that made one run (its driver sets the file logger's path) and then starts another, in process
    or as a child inheriting its environment: the second run's rows go to its own ``metrics.jsonl``, not the
    first run's file, and making a run's loggers leaves the environment as it was."""
    import os

    from cpmobius.run_log import make_tracking, read_metric_rows

    first = tmp_path / "first" / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(first))  # what an earlier run in this process left
    monkeypatch.delenv("TENSORBOARD_DIR", raising=False)
    run_dir = tmp_path / "second"
    cfg = OmegaConf.create(
        {
            "trainer": {
                "project_name": "p",
                "experiment_name": "e",
                "logger": ["file"],
                "default_local_dir": str(run_dir),
            }
        }
    )
    tracking = make_tracking(cfg)
    tracking.log(data={"val/accuracy": 0.5}, step=0)
    tracking.finish()
    assert [row["step"] for row in read_metric_rows(run_dir / "metrics.jsonl")] == [0]
    assert not first.exists()
    assert os.environ["VERL_FILE_LOGGER_PATH"] == str(first) and "TENSORBOARD_DIR" not in os.environ
