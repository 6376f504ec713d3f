"""The paper's ablation table in miniature, on the toy world: does the Player's validation accuracy rise?

Runs ``python -m cpmobius.main`` (the embedded default: toy world, CPU) for several seeds of each
variant, one fresh run folder each, and prints mean ± sd over seeds of the gain in validation
accuracy from the start (step 0, before any update) to the end (the last step):

    variant            | command override
    full               | (none)
    no_coach_update    | coach.update=false
    no_filter          | filter.enabled=false
    no_warmup          | warmup.enabled=false

The seed is ``actor_rollout_ref.rollout.seed`` (every Coach and Player sample, validation sampling,
the warm-up's data order); the toy models' pretraining is the same for all runs (cached once).

Usage:
    python benchmarks/bench_toy_learning.py                       # 3 seeds x 4 variants (about 1 h on 2 cores)
    python benchmarks/bench_toy_learning.py --seeds 0 --variants full no_warmup --out /tmp/bench
    python benchmarks/bench_toy_learning.py --out /tmp/bench --report-only   # the table of finished runs

A finished run folder is not run again (the driver says so and exits), so an interrupted benchmark
continues where it stopped with the same ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpmobius.plots import read_run_metrics, series  # noqa: E402

VARIANTS = {
    "full": [],
    "no_coach_update": ["coach.update=false"],
    "no_filter": ["filter.enabled=false"],
    "no_warmup": ["warmup.enabled=false"],
}


def run_one(out: Path, variant: str, seed: int, extra: list[str]) -> tuple[Path, float]:
    """One default run of ``variant`` with ``seed`` in ``out/<variant>_seed<seed>``; returns (folder, wall seconds)."""
    run_dir = out / f"{variant}_seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "cpmobius.main", f"trainer.default_local_dir={run_dir}",
               f"actor_rollout_ref.rollout.seed={seed}", *VARIANTS[variant], *extra]
    started = time.perf_counter()
    with open(run_dir / "bench.log", "a") as log:
        done = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{variant} seed {seed} failed (exit {done.returncode}); see {run_dir / 'bench.log'}")
    return run_dir, wall_s


def summarize_run(run_dir: Path) -> dict[str, float]:
    """Start and end validation accuracy of one run, and the means over its steps of the filter's numbers."""
    steps = read_run_metrics(run_dir)
    xs, accuracy = series(steps, "val/accuracy")
    if not xs or xs[0] != 0 or len(xs) < 2:
        raise ValueError(f"{run_dir}: no validation before and after the steps")
    row = {"start": accuracy[0], "end": accuracy[-1], "gain": accuracy[-1] - accuracy[0], "steps": xs[-1],
           "end_last3": statistics.fmean(accuracy[-3:]), "gain_last3": statistics.fmean(accuracy[-3:]) - accuracy[0]}
    for key, name in (("pseudo_label/kept_accuracy", "kept_label_ok"), ("coach/valid_frac", "coach_valid"),
                      ("filter/kept", "kept"), ("player/response_length/mean", "player_len")):
        values = series(steps, key)[1]
        row[name] = statistics.fmean(values) if values else float("nan")
    return row


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):+.3f} ± {sd:.3f}"


def format_table(results: dict[str, list[dict[str, float]]]) -> str:
    """A markdown table: one row per variant, mean ± sd over seeds."""
    lines = [
        "| variant | seeds | val acc start | val acc end | gain (end − start) | gain (mean of last 3 − start) | kept pseudo-label right | Coach outputs valid |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant, rows in results.items():
        if not rows:
            continue
        lines.append(
            f"| {variant} | {len(rows)} | {statistics.fmean(r['start'] for r in rows):.3f} | "
            f"{statistics.fmean(r['end'] for r in rows):.3f} | {mean_sd([r['gain'] for r in rows])} | "
            f"{mean_sd([r['gain_last3'] for r in rows])} | {statistics.fmean(r['kept_label_ok'] for r in rows):.2f} | "
            f"{statistics.fmean(r['coach_valid'] for r in rows):.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench_toy_learning")
    parser.add_argument("--report-only", action="store_true", help="print the table of finished runs, run nothing")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (e.g. trainer.total_training_steps=10)")
    args = parser.parse_args()

    results: dict[str, list[dict[str, float]]] = {v: [] for v in args.variants}
    for variant in args.variants:
        for seed in args.seeds:
            run_dir = args.out / f"{variant}_seed{seed}"
            if not args.report_only:
                run_dir, wall_s = run_one(args.out, variant, seed, args.overrides)
                print(f"[bench] {variant} seed {seed}: {wall_s:.0f} s", flush=True)
            if not (run_dir / "metrics.jsonl").is_file():
                continue
            try:
                row = summarize_run(run_dir)
            except ValueError as unfinished:  # --report-only on a run still in progress
                print(f"[bench] {variant} seed {seed}: skipped, {unfinished}", flush=True)
                continue
            results[variant].append({"seed": seed, **row})
            print(f"[bench] {variant} seed {seed}: val acc {row['start']:.3f} -> {row['end']:.3f} ({row['gain']:+.3f})", flush=True)
    (args.out / "results.json").parent.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(format_table(results))


if __name__ == "__main__":
    main()
