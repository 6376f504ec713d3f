"""What a run prints and logs: one table row per step, and verl's `Tracking` backends (``trainer.logger``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

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


def with_validation_columns(columns: list[tuple], snr: bool = False, ood: bool = False) -> tuple:
    """A method's step-table ``columns`` (`cpmobius.methods.table_columns`) with the validation extras every
    method's table shows: with ``ood`` (``validation.ood_dataset``) the out-of-distribution set's accuracy after the
    validation accuracies, and with ``snr`` (a sampled validation, k ≥ 2) |Δt| over its standard error after Δt."""
    columns = list(columns)

    def after(*keys: str) -> int:
        return 1 + max(i for i, (key, _, _) in enumerate(columns) if key in keys)

    if ood:
        columns.insert(after("val/accuracy", "val/accuracy_greedy"), ("val/ood_accuracy", "{:>6.3f}", "ood"))
    if snr:  # after Δt, or after the accuracies in the tables without a Δt column
        columns.insert(after("val/accuracy", "val/ood_accuracy", "val/delta_t"), ("val/delta_t_snr", "{:>5.2f}", "snr"))
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


def metrics_files(run_dir: str | os.PathLike) -> list[Path]:
    """A run's metrics files in the order they were written: ``metrics.<k>.jsonl`` of earlier launches by k,
    then ``metrics.jsonl`` (the last launch's); only those that exist."""
    run_dir = Path(run_dir)
    earlier = sorted(
        (p for p in run_dir.glob("metrics.*.jsonl") if p.name.split(".")[1].isdigit()),
        key=lambda p: int(p.name.split(".")[1]),
    )
    return [p for p in [*earlier, run_dir / "metrics.jsonl"] if p.is_file()]


def read_metric_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of one metrics file, verl's file-logger format ``{"step": s, "data": {key: value}}``, in order.

    A line that is not a whole row (the last line of a launch killed while writing it) is skipped.
    """
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int):
            rows.append(row)
    return rows


def drop_rerun_steps(run_dir: str | os.PathLike, first_step: int) -> Optional[str]:
    """Drop from an earlier launch's metrics the rows of steps this launch logs again (``step >= first_step``).

    A launch killed after its last checkpoint logged steps that the resumed launch runs again, and a run started
    again in its own folder (``trainer.resume_mode=disable``) runs them all again; without this, anything that
    concatenates ``metrics*.jsonl`` counts those steps twice, or mixes the two runs. Each file is rewritten atomically
    (`cpmobius.jsonl.write_jsonl`), without a line cut short by the kill; a file left with no row is removed.

    Returns:
        One line saying which steps were dropped, or None when nothing was.
    """
    from cpmobius.jsonl import write_jsonl

    dropped: dict[str, list[int]] = {}
    for path in metrics_files(run_dir):
        rows = read_metric_rows(path)
        kept = [row for row in rows if row["step"] < first_step]
        whole = len(rows) == sum(1 for line in path.read_text().splitlines() if line.strip())
        if len(kept) == len(rows) and whole:
            continue
        dropped[path.name] = sorted({row["step"] for row in rows if row["step"] >= first_step})
        if kept:
            write_jsonl(path, kept)
        else:
            path.unlink()
    if not dropped:
        return None
    steps = sorted({step for found in dropped.values() for step in found})
    return (
        f"[cpmobius] metrics: steps {steps} logged by an earlier launch are dropped from {', '.join(sorted(dropped))}: "
        "this launch runs them again"
    )


def set_aside_metrics(run_dir: str | os.PathLike) -> Optional[str]:
    """A run started again in its own folder (``trainer.resume_mode=disable``): the earlier launches' metrics files
    are kept as ``earlier.<name>`` (``earlier<n>.<name>`` when that exists), so that the run's metrics are its own
    (`metrics_files` reads no other name). Returns one line saying so, or None when there were none."""
    moved = []
    for path in metrics_files(run_dir):
        target, n = path.with_name(f"earlier.{path.name}"), 1
        while target.exists():
            n += 1
            target = path.with_name(f"earlier{n}.{path.name}")
        os.replace(path, target)
        moved.append(target.name)
    if not moved:
        return None
    kept = ", ".join(moved)
    return f"[cpmobius] metrics: the run starts again (trainer.resume_mode=disable); the earlier files are {kept}"


def first_logged_step(cfg: DictConfig) -> Optional[int]:
    """The first step this launch logs: 0 for a fresh start (the validation before step 1; ``trainer.resume_mode=
    disable`` starts afresh too), S + 1 when it resumes from checkpoint S (``auto``: the run folder's latest;
    ``resume_path``: ``trainer.resume_from_path``); None when that folder is not named as a step's."""
    from cpmobius.checkpoint import checkpoint_step, resume_step

    mode = cfg.trainer.get("resume_mode")
    if mode == "resume_path":
        done = checkpoint_step(Path(str(cfg.trainer.resume_from_path)).expanduser())
        return None if done is None else done + 1
    done = resume_step(cfg) if mode == "auto" else 0
    return done + 1 if done > 0 else 0


def make_tracking(cfg: DictConfig) -> Any:
    """verl's `Tracking` for ``trainer.logger`` (console, file = JSONL, tensorboard, wandb, ...).

    With the ``file`` backend, an earlier launch's ``metrics.jsonl`` is kept as ``metrics.<k>.jsonl`` and the
    rows of steps this launch runs again are dropped from the earlier files (`drop_rerun_steps`): every step
    is in the run's metrics files once. A run started again (``trainer.resume_mode=disable``) sets the earlier
    files aside (`set_aside_metrics`).
    """
    from omegaconf import OmegaConf
    from verl.utils.tracking import Tracking

    backends = list(cfg.trainer.logger)
    if not backends:
        return None
    os.makedirs(cfg.trainer.default_local_dir, exist_ok=True)
    metrics_path = os.path.join(cfg.trainer.default_local_dir, "metrics.jsonl")
    if "file" in backends and cfg.trainer.get("resume_mode") == "disable":
        said = set_aside_metrics(cfg.trainer.default_local_dir)
        if said:
            print(said, flush=True)
    if "file" in backends and os.path.exists(metrics_path):
        # verl's file logger truncates its file: keep an earlier launch's metrics as metrics.<k>.jsonl.
        k = 1
        while os.path.exists(os.path.join(cfg.trainer.default_local_dir, f"metrics.{k}.jsonl")):
            k += 1
        os.replace(metrics_path, os.path.join(cfg.trainer.default_local_dir, f"metrics.{k}.jsonl"))
    first_step = first_logged_step(cfg) if "file" in backends else None
    if first_step is not None:
        said = drop_rerun_steps(cfg.trainer.default_local_dir, first_step)
        if said:
            print(said, flush=True)
    # verl's loggers read their paths from the environment when they are built. The file logger always gets this
    # run's file (an inherited path, e.g. from an earlier run made in the parent process, would take this run's
    # rows); a TensorBoard folder the user set wins. Both are put back afterwards, so that nothing of this run
    # reaches a later run made in the same process or started from it.
    names = ("VERL_FILE_LOGGER_PATH", "TENSORBOARD_DIR")
    before = {name: os.environ.get(name) for name in names}
    os.environ["VERL_FILE_LOGGER_PATH"] = metrics_path
    os.environ.setdefault("TENSORBOARD_DIR", os.path.join(cfg.trainer.default_local_dir, "tensorboard"))
    try:
        return Tracking(
            project_name=cfg.trainer.project_name,
            experiment_name=cfg.trainer.experiment_name,
            default_backend=backends,
            config=OmegaConf.to_container(cfg, resolve=True),
        )
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
