"""What the Coach's update and the difficulty filter did over finished toy runs, from their own logs: how often Δt
was 0 (no Coach update), how often the Coach's gradient norm exceeded verl's clip (so that only the direction of
its step, not Δt's size, reached the weights), which pass rates the filter kept and why it dropped the rest, and
the levels of the problems it saw and kept.

Reads each run folder's ``metrics.jsonl`` (`cpmobius.plots.read_run_metrics`) and ``problems/step_*.jsonl`` (the
problem archive); levels are `cpmobius.toy.world.problem_difficulty` of the problem text ("other" for text that is
no problem of the world). Runs nothing; prints one Markdown block for all the folders given.

Usage:
    python benchmarks/toy_run_audit.py /tmp/bench/full_seed*                  # e.g. bench_toy_learning.py's runs
    python benchmarks/toy_run_audit.py RUN_DIR --clip 1.0                     # the Coach's actor.grad_clip
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpmobius.plots import read_run_metrics  # noqa: E402
from cpmobius.toy.world import problem_difficulty  # noqa: E402


def audit(run_dirs: list[Path], clip: float = 1.0) -> dict:
    """Counts over the steps (step 0, the validation before training, aside) and the archived groups of
    ``run_dirs``: ``steps``, ``delta_t_zero``, ``coach_updates``, ``clipped`` (Coach updates whose gradient norm
    exceeded ``clip``), ``grad_norm_median``, ``groups`` (problems the Player rolled out), ``kept_pass_rates``
    and ``drop_reasons`` (Counters), ``levels`` and ``kept_levels`` (Counters by level or "other").

    Raises:
        FileNotFoundError: a folder with no ``metrics.jsonl``.
    """
    out = {"steps": 0, "delta_t_zero": 0, "coach_updates": 0, "clipped": 0, "groups": 0}
    norms: list[float] = []
    rates, drops, levels, kept_levels = Counter(), Counter(), Counter(), Counter()
    for run_dir in run_dirs:
        if not (run_dir / "metrics.jsonl").is_file():
            raise FileNotFoundError(f"{run_dir / 'metrics.jsonl'} does not exist: is {run_dir} a run folder?")
        for step, metrics in read_run_metrics(run_dir).items():
            if step == 0:
                continue
            out["steps"] += 1
            out["delta_t_zero"] += metrics.get("val/delta_t") == 0.0
            if metrics.get("coach/updated"):
                out["coach_updates"] += 1
                norm = metrics.get("coach/actor/grad_norm")
                if norm is not None:
                    norms.append(norm)
                    out["clipped"] += norm > clip
        for path in sorted((run_dir / "problems").glob("step_*.jsonl")):
            for line in path.read_text().splitlines():
                row = json.loads(line) if line.strip() else {}
                if "pass_rate" not in row:  # a rejected Coach output: never rolled out
                    continue
                level = problem_difficulty(row["text"])
                out["groups"] += 1
                levels["other" if level is None else level] += 1
                if row.get("kept"):
                    rates[round(row["pass_rate"], 3)] += 1
                    kept_levels["other" if level is None else level] += 1
                else:
                    drops[row.get("drop_reason") or "unknown"] += 1
    out["grad_norm_median"] = statistics.median(norms) if norms else None
    out.update(kept_pass_rates=rates, drop_reasons=drops, levels=levels, kept_levels=kept_levels)
    return out


def _counts(counter: Counter) -> str:
    order = sorted(counter, key=lambda key: (isinstance(key, str), key))
    return ", ".join(f"{key}: {counter[key]}" for key in order) or "none"


def format_audit(figures: dict, clip: float = 1.0, runs: Optional[int] = None) -> str:
    """The figures of `audit` as a short Markdown list."""
    median = figures["grad_norm_median"]
    kept = sum(figures["kept_pass_rates"].values())
    return "\n".join(
        [
            f"- runs: {runs if runs is not None else '?'}, steps: {figures['steps']}",
            f"- Δt = 0 on {figures['delta_t_zero']} steps; the Coach was updated on {figures['coach_updates']}, its"
            f" gradient norm above the clip ({clip:g}) on {figures['clipped']}"
            + (f" (median {median:.2f})" if median is not None else ""),
            f"- groups rolled out: {figures['groups']}; kept: {kept}; dropped: {_counts(figures['drop_reasons'])}",
            f"- kept pass rates: {_counts(figures['kept_pass_rates'])}",
            f"- levels rolled out: {_counts(figures['levels'])}",
            f"- levels kept: {_counts(figures['kept_levels'])}",
        ]
    )


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="run folders (trainer.default_local_dir)")
    parser.add_argument("--clip", type=float, default=1.0, help="the Coach's actor.grad_clip (verl's default 1.0)")
    args = parser.parse_args(argv)
    print(format_audit(audit(args.runs, args.clip), args.clip, runs=len(args.runs)))


if __name__ == "__main__":
    main()
