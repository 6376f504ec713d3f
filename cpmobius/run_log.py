"""What a run prints and logs: one table row per step, and verl's `Tracking` backends (``trainer.logger``)."""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig

TABLE_COLUMNS = (
    ("step", "{:>4}", "step"),
    ("val/accuracy", "{:>7.3f}", "val_acc"),
    ("val/delta_t", "{:>+8.3f}", "delta_t"),
    ("filter/kept", "{:>4.0f}", "kept"),
    ("filter/attempts", "{:>4.0f}", "att"),
    ("filter/kept_pass_rate_mean", "{:>9.2f}", "pass_rate"),
    ("pseudo_label/accuracy", "{:>8.2f}", "label_ok"),
    ("pseudo_label/kept_accuracy", "{:>7.2f}", "kept_ok"),
    ("coach/valid_frac", "{:>7.2f}", "valid"),
    ("coach/updated", "{:>5.0f}", "c_upd"),
    ("timing_s/coach", "{:>7.1f}", "coach_s"),
    ("timing_s/difficulty_filter", "{:>8.1f}", "filter_s"),
    ("timing_s/player_update", "{:>8.1f}", "update_s"),
    ("timing_s/validation", "{:>7.1f}", "val_s"),
    ("timing_s/step", "{:>7.1f}", "step_s"),
)

# The baselines on a fixed pool (method=ttrl|rent): no Coach, no filter; the Player's mean reward instead.
# Step and accuracy first, the update, validation and step timings last, as in `TABLE_COLUMNS`.
POOL_TABLE_COLUMNS = (
    *TABLE_COLUMNS[:2],
    ("player/reward_mean", "{:>+7.3f}", "reward"),
    ("pool/questions", "{:>4.0f}", "qs"),
    ("timing_s/difficulty_filter", "{:>9.1f}", "rollout_s"),
    *TABLE_COLUMNS[-3:],
)

# R-Zero (method=rzero): the phase (0 Challenger, 1 Solver), that phase's mean reward (the Coach's in a Challenger
# step, the Player's in a Solver step), the Solver's questions a step, and the Coach's time beside the shared ones.
RZERO_TABLE_COLUMNS = (
    *TABLE_COLUMNS[:2],
    ("rzero/phase", "{:>5.0f}", "phase"),
    ("rzero/reward_mean", "{:>+7.3f}", "reward"),
    ("pool/questions", "{:>4.0f}", "qs"),
    ("timing_s/coach", "{:>7.1f}", "coach_s"),
    ("timing_s/difficulty_filter", "{:>9.1f}", "rollout_s"),
    ("timing_s/coach_update", "{:>8.1f}", "c_upd_s"),
    *TABLE_COLUMNS[-3:],
)


def table_columns(method: str, greedy_beside: bool = False, levels: bool = False) -> tuple:
    """The step table's ``(metric key, format, label)`` columns for a run of ``method``.

    A CPMöbius run's table gains the greedy pass's accuracy beside ``val_acc`` when ``greedy_beside``
    (``validation.metric=expected``: ``val_acc`` is then the expected accuracy) and the mean level of the Coach's
    well-formed problems after ``valid`` when ``levels`` (the toy world, where a problem's level is known).
    """
    if method == "rzero":
        return RZERO_TABLE_COLUMNS
    if method != "cpmobius":
        return POOL_TABLE_COLUMNS
    columns = list(TABLE_COLUMNS)
    if levels:
        at = next(i for i, (key, _, _) in enumerate(columns) if key == "coach/valid_frac") + 1
        columns.insert(at, ("coach/difficulty_mean", "{:>7.2f}", "c_level"))
    if greedy_beside:
        columns.insert(2, ("val/accuracy_greedy", "{:>6.3f}", "greedy"))
    return tuple(columns)


class StepTable:
    """Prints one row per step (a logger backend next to verl's `Tracking`).

    Args:
        columns: ``(metric key, format, label)`` per column (`TABLE_COLUMNS`, `POOL_TABLE_COLUMNS`, ...).
    """

    def __init__(self, columns: tuple = TABLE_COLUMNS) -> None:
        self.columns = columns
        self._header_printed = False

    def log(self, data: dict[str, Any], step: int) -> None:
        if not self._header_printed:
            print(
                " ".join(f"{label:>{len(fmt.format(0)) if 'f' in fmt else 4}}" for _, fmt, label in self.columns),
                flush=True,
            )
            self._header_printed = True
        cells = []
        for key, fmt, _ in self.columns:
            value = step if key == "step" else data.get(key)
            width = len(fmt.format(0))
            cells.append(fmt.format(value) if value is not None else " " * (width - 1) + "-")
        print(" ".join(cells), flush=True)


class Loggers:
    """Fan-out to verl's `Tracking` backends and the step table."""

    def __init__(self, *backends: Any) -> None:
        self.backends = [b for b in backends if b is not None]

    def log(self, data: dict[str, Any], step: int) -> None:
        for backend in self.backends:
            backend.log(data=data, step=step)


def make_tracking(cfg: DictConfig) -> Any:
    """verl's `Tracking` for ``trainer.logger`` (console, file = JSONL, tensorboard, wandb, ...)."""
    from omegaconf import OmegaConf
    from verl.utils.tracking import Tracking

    backends = list(cfg.trainer.logger)
    if not backends:
        return None
    os.makedirs(cfg.trainer.default_local_dir, exist_ok=True)
    metrics_path = os.path.join(cfg.trainer.default_local_dir, "metrics.jsonl")
    if "file" in backends and os.path.exists(metrics_path):
        # verl's file logger truncates its file: keep an earlier launch's metrics as metrics.<k>.jsonl.
        k = 1
        while os.path.exists(os.path.join(cfg.trainer.default_local_dir, f"metrics.{k}.jsonl")):
            k += 1
        os.replace(metrics_path, os.path.join(cfg.trainer.default_local_dir, f"metrics.{k}.jsonl"))
    os.environ.setdefault("VERL_FILE_LOGGER_PATH", metrics_path)
    os.environ.setdefault("TENSORBOARD_DIR", os.path.join(cfg.trainer.default_local_dir, "tensorboard"))
    return Tracking(
        project_name=cfg.trainer.project_name,
        experiment_name=cfg.trainer.experiment_name,
        default_backend=backends,
        config=OmegaConf.to_container(cfg, resolve=True),
    )
