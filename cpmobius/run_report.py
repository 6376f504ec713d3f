"""A finished (or interrupted) run as Markdown: the step table, the Coach's rejections, sample problems.

``python -m cpmobius.run_report RUN_DIR [--problems 8] [--out FILE]`` reads what every run writes under
``trainer.default_local_dir``: ``metrics.jsonl`` and, after a resume, the earlier launches'
``metrics.<k>.jsonl`` (verl's file logger, one ``{"step", "data"}`` row per step; step 0 is the
validation before training) and ``problems/step_*.jsonl`` (the problem archive, one row per Coach
candidate). The README's tables of a run are this output, pasted, never typed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Optional

STAGES = (
    ("coach", "coach"),
    ("difficulty_filter", "filter"),
    ("player_update", "update"),
    ("validation", "val"),
    ("coach_update", "c_upd"),
    ("step", "step"),
)
GPU_MEMORY_KEY = "player/actor/perf/max_memory_allocated_gb"  # verl's peak of the Player update


def read_metrics(run_dir: Path) -> dict[int, dict[str, float]]:
    """``{step: metrics}`` in step order, from every launch of the run: ``metrics.<k>.jsonl`` of earlier
    launches (a resumed run), then ``metrics.jsonl`` (`cpmobius.plots.read_run_metrics`); a step logged
    twice keeps its last row.

    Raises:
        FileNotFoundError: ``run_dir`` holds no metrics file.
    """
    from cpmobius.plots import read_run_metrics

    if not (run_dir / "metrics.jsonl").is_file() and not any(run_dir.glob("metrics.*.jsonl")):
        raise FileNotFoundError(
            f"{run_dir / 'metrics.jsonl'} does not exist: is {run_dir} a run folder (trainer.default_local_dir)?"
        )
    return dict(sorted(read_run_metrics(run_dir).items()))


def read_archive(run_dir: Path) -> list[dict[str, Any]]:
    """Every Coach candidate of the problem archive, in step order."""
    rows: list[dict[str, Any]] = []
    for path in sorted((run_dir / "problems").glob("step_*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def _fmt(value: Optional[float], spec: str) -> str:
    return "–" if value is None else format(value, spec)


def step_table(steps: dict[int, dict[str, float]]) -> str:
    """One row per step: validation accuracy, Δt (points), kept/quota, attempts, Coach validity and its
    most frequent rejection, pass rate of the kept groups, pseudo-label accuracy of the kept problems where
    known ("kept ok", the console table's ``kept_ok``), seconds per stage and the Player update's peak GPU
    memory (GiB; the column is left out when no step used a GPU: verl logs 0 on the CPU). Where logged: the
    greedy pass's accuracy beside the expected one
    (``validation.metric=expected``) and the mean level of the Coach's and the kept problems (toy world)."""
    gpu = any(m.get(GPU_MEMORY_KEY) for m in steps.values())
    greedy = any("val/accuracy_greedy" in m for m in steps.values())
    levels = any("coach/difficulty_mean" in m for m in steps.values())
    head = [
        "step",
        "val acc",
        *(["val greedy"] if greedy else []),
        "Δt (pts)",
        "kept",
        "attempts",
        *(["Coach level", "kept level"] if levels else []),
        "Coach valid",
        "top rejection",
        "kept pass rate",
        "kept ok",
        *[f"{short} s" for _, short in STAGES],
        *(["GPU GiB"] if gpu else []),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for step, m in steps.items():
        rejections = Counter({k.split("/", 2)[2]: v for k, v in m.items() if k.startswith("coach/rejected/") and v})
        top = ", ".join(f"{reason} {int(count)}" for reason, count in rejections.most_common(2)) or "–"
        kept = f"{int(m['filter/kept'])}/{int(m['filter/quota'])}" if "filter/kept" in m else "–"
        delta = m.get("val/delta_t")
        cells = [
            str(step),
            _fmt(m.get("val/accuracy"), ".3f"),
            *([_fmt(m.get("val/accuracy_greedy"), ".3f")] if greedy else []),
            _fmt(None if delta is None else 100 * delta, "+.1f"),
            kept,
            _fmt(m.get("filter/attempts"), ".0f"),
            *(
                [_fmt(m.get(key), ".2f") for key in ("coach/difficulty_mean", "filter/kept_difficulty_mean")]
                if levels
                else []
            ),
            _fmt(m.get("coach/valid_frac"), ".2f"),
            top,
            _fmt(m.get("filter/kept_pass_rate_mean"), ".2f"),
            _fmt(m.get("pseudo_label/kept_accuracy"), ".2f"),
            *[_fmt(m.get(f"timing_s/{stage}"), ".1f") for stage, _ in STAGES],
            *([_fmt(m.get(GPU_MEMORY_KEY), ".1f")] if gpu else []),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rejection_table(archive: list[dict[str, Any]]) -> str:
    """Coach candidates of the whole run by verdict (valid, or the reject reason), with shares."""
    verdicts = Counter("valid" if row.get("valid") else row.get("reject_reason") or "unknown" for row in archive)
    total = sum(verdicts.values())
    lines = ["| verdict | candidates | share |", "|---|---|---|"]
    lines += [f"| {verdict} | {count} | {count / total:.1%} |" for verdict, count in verdicts.most_common()]
    return "\n".join(lines)


def sample_problems(archive: list[dict[str, Any]], count: int, width: int = 300) -> str:
    """``count`` kept problems spread evenly over the run, with pass rate and pseudo-label."""
    kept = [row for row in archive if row.get("kept")]
    if not kept:
        return "(no kept problems)"
    picks = [kept[round(i * (len(kept) - 1) / max(count - 1, 1))] for i in range(min(count, len(kept)))]
    lines = [
        "| step | problem (as the Player saw it) | pass rate | pseudo-label | label right |",
        "|---|---|---|---|---|",
    ]
    for row in picks:
        text = " ".join(str(row["text"]).split()).replace("|", "\\|")
        text = text if len(text) <= width else text[: width - 1] + "…"
        right = {True: "yes", False: "no"}.get(row.get("pseudo_label_correct"), "–")
        lines.append(
            f"| {row['step']} | {text} | {row.get('pass_rate', 0):.2f} | {row.get('pseudo_label')} | {right} |"
        )
    return "\n".join(lines)


def render(run_dir: Path, problems: int = 8) -> str:
    """The whole report (Markdown)."""
    steps, archive = read_metrics(run_dir), read_archive(run_dir)
    parts = [f"### Steps ({run_dir.name})", step_table(steps)]
    if archive:
        parts += [
            f"### Coach candidates ({len(archive)})",
            rejection_table(archive),
            "### Sample of kept problems",
            sample_problems(archive, problems),
        ]
    return "\n\n".join(parts) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpmobius.run_report", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="the run's trainer.default_local_dir")
    parser.add_argument("--problems", type=int, default=8, help="kept problems to show (default 8)")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown here (default: stdout)")
    args = parser.parse_args(argv)
    try:
        text = render(args.run_dir, args.problems)
    except FileNotFoundError as error:
        print(f"[cpmobius] {error}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
