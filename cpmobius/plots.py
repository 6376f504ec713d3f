"""The training-dynamics plot of a run: one PNG from the run's own metrics (`metrics.jsonl`).

Drawn at the end of `python -m cpmobius.main` (and by ``python -m cpmobius.plots RUN_DIR``): per step,
the Player's validation accuracy, Δt, the kept fraction and the mean pass rate of the difficulty
filter, the pseudo-label accuracy (when the ground truth is known, as in the toy world) and the share
of Coach outputs that were well-formed, the Coach's problem length and the Player's response length
(the paper reports the trends of the last three), and where a problem's difficulty is known (the toy
world) the validation accuracy per difficulty and the mean difficulty of the Coach's problems and of
the kept ones (the paper's "problem difficulty rises"). Nothing here computes a metric: every value is read
from the metric keys `cpmobius.metrics` defines.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional, Sequence

# (metric keys, panel title, y label); a panel whose keys were never logged says so instead of a line; a key
# ending in "*" stands for every logged key with that prefix (one line each).
PANELS: tuple[tuple[Sequence[str], str, str], ...] = (
    (("val/accuracy", "val/accuracy_greedy"), "Player validation accuracy", "accuracy"),
    (("val/accuracy/d*",), "validation accuracy per difficulty", "accuracy"),
    (
        ("coach/difficulty_mean", "filter/kept_difficulty_mean"),
        "problem difficulty (Coach's problems, kept)",
        "mean level",
    ),
    (("val/delta_t",), "Δt (val. accuracy after − before the update)", "Δt"),
    (("filter/kept_frac",), "kept fraction (kept / Player groups)", "fraction"),
    (("filter/pass_rate_mean", "filter/kept_pass_rate_mean"), "mean pass rate (all groups, kept)", "pass rate"),
    (("pseudo_label/accuracy", "pseudo_label/kept_accuracy"), "pseudo-label accuracy (all, kept)", "accuracy"),
    (("coach/valid_frac",), "Coach outputs well-formed", "fraction"),
    (("coach/problem_chars/mean",), "Coach problem length", "characters"),
    (("player/response_length/mean",), "Player response length", "tokens"),
)
PLOT_NAME = "training_dynamics.png"


def read_run_metrics(run_dir: str | Path) -> dict[int, dict[str, float]]:
    """Every step's metrics of a run: ``metrics.<k>.jsonl`` of earlier launches, then ``metrics.jsonl``
    (`cpmobius.run_log.metrics_files`; a line cut short by a kill is skipped: `cpmobius.run_log.read_metric_rows`).

    Each step is counted once: a later row for a step updates the earlier one's keys. A resumed launch drops the
    rows it runs again from the earlier files (`cpmobius.run_log.drop_rerun_steps`), so the files themselves
    hold each step once too. Rows are verl's file-logger format ``{"step": s, "data": {key: value}}``.

    Returns:
        step → {metric key → value}, empty when the run logged nothing.
    """
    from cpmobius.run_log import metrics_files, read_metric_rows

    steps: dict[int, dict[str, float]] = {}
    for path in metrics_files(run_dir):
        for row in read_metric_rows(path):
            steps.setdefault(int(row["step"]), {}).update(row.get("data", {}))
    return steps


def series(steps: dict[int, dict[str, float]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric key, in step order, where it was logged."""
    points = sorted((s, float(m[key])) for s, m in steps.items() if m.get(key) is not None)
    return [s for s, _ in points], [v for _, v in points]


def run_title(cfg: Any) -> str:
    """The plot's title for a run's config: "CPMöbius: <trainer.experiment_name> (<model.name>)"."""
    return f"CPMöbius: {cfg.trainer.experiment_name} ({cfg.model.name})"


def saved_run_title(run_dir: str | Path) -> Optional[str]:
    """`run_title` of the config a run's newest checkpoint saved (``global_step_N/config.yaml``), or
    None when the run has no readable checkpoint config: the title the run's own plot carried."""
    from omegaconf import OmegaConf

    configs = sorted(
        Path(run_dir).glob("global_step_*/config.yaml"), key=lambda p: int(p.parent.name.rsplit("_", 1)[1])
    )
    for path in reversed(configs):
        try:
            return run_title(OmegaConf.load(path))
        except Exception:  # an unreadable or foreign config: try an older one, else the folder's name
            continue
    return None


def plot_training_dynamics(
    run_dir: str | Path, out_path: Optional[str | Path] = None, title: Optional[str] = None
) -> Path:
    """Write the dynamics PNG of a run (default ``<run_dir>/training_dynamics.png``).

    The title is ``title``, else the run's own (`saved_run_title`), else one naming ``run_dir``.

    Raises:
        FileNotFoundError: when the run holds no metrics at all (or RUN_DIR does not exist).
    """
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    steps = read_run_metrics(run_dir)
    if not steps:
        raise FileNotFoundError(f"no metrics.jsonl rows in {run_dir}")
    out_path = Path(out_path) if out_path is not None else Path(run_dir) / PLOT_NAME
    fig, axes = plt.subplots(2, 5, figsize=(20, 6.5), sharex=True)
    logged = sorted({key for metrics in steps.values() for key in metrics})
    for ax, (keys, panel_title, ylabel) in zip(axes.flat, PANELS):
        drawn = False
        keys = [
            k for key in keys for k in ([m for m in logged if m.startswith(key[:-1])] if key.endswith("*") else [key])
        ]
        for key, style in zip(keys, ("o-", "s--", "^-", "v--", "d-", "x--", "+-", "*--")):
            xs, ys = series(steps, key)
            if xs:
                ax.plot(xs, ys, style, markersize=3, linewidth=1.2, label=key)
                drawn = True
        if "val/delta_t" in keys and drawn:
            ax.axhline(0.0, color="grey", linewidth=0.8)
        if (len(keys) > 1 or panel_title.endswith("per difficulty")) and drawn:
            ax.legend(fontsize=7)
        if not drawn:
            ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_title(panel_title, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("step")
    title = title or saved_run_title(run_dir) or f"CPMöbius training dynamics: {run_dir}"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
    return out_path


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m cpmobius.plots RUN_DIR [OUT.png]``: (re)draw a run's plot; exit 2 with one line when
    the run holds no metrics."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m cpmobius.plots",
        description="Draw the training-dynamics plot of a run from its metrics.jsonl (verl's file logger, "
        "trainer.logger=[file], the default): Player validation accuracy, Δt, the difficulty "
        "filter's kept fraction and pass rates, pseudo-label accuracy, Coach validity, problem "
        "and response lengths.",
    )
    parser.add_argument(
        "run_dir", metavar="RUN_DIR", help="the run's folder (trainer.default_local_dir, e.g. outputs/cpmobius/default)"
    )
    parser.add_argument(
        "out",
        metavar="OUT.png",
        nargs="?",
        default=None,
        help=f"where to write the picture (default: RUN_DIR/{PLOT_NAME})",
    )
    parser.add_argument(
        "--title", default=None, help="the figure's title (default: the run's own, from its checkpoint's config)"
    )
    args = parser.parse_args(argv)
    try:
        print(plot_training_dynamics(args.run_dir, args.out, title=args.title))
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
