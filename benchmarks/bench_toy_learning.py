"""The paper's ablation table in miniature, on the toy world: does the Player's validation accuracy rise,
and by how much more with the full method than without each of its parts?

Runs ``python -m cpmobius.main`` (the embedded default: toy world, CPU) for several seeds of each
variant, one fresh run folder each, and prints a markdown table: mean ± standard error over seeds of
the gain in validation accuracy from the start (step 0, before any update) to the end (the mean of the
last three steps), and the difference full − variant with its standard error, paired by seed, its paired t
and two-sided p and the number of seeds where full is ahead:

    variant            | command override
    full               | (none)
    no_coach_update    | coach.update=false
    no_filter          | filter.enabled=false
    no_warmup          | warmup.enabled=false
    released_reward    | coach.reward=released_uniform   (the released 1.5B script's Coach reward)
    delta_t_constant   | coach.delta_t_source=constant coach.delta_t_constant=M   (does Δt steer the Coach?
    delta_t_noise      | coach.delta_t_source=noise coach.delta_t_noise_sd=S      the Coach's reward with Δt
    delta_t_shuffled   | coach.delta_t_source=shuffled                            replaced; docs/toy.md)
    rent, ttrl         | method=rent, method=ttrl        (the comparison baselines: the Player alone on the
                                                          validation set's questions, docs/baselines.md)
    rzero              | method=rzero                    (R-Zero's Challenger and Solver phases, docs/baselines.md)
    rzero_warmed_up    | method=rzero warmup.enabled=true   (its Coach warmed up as CPMöbius's; R-Zero has no SFT)

M and S are the mean and standard deviation of ``val/delta_t`` over every step and seed of the ``full`` arm's
runs in the same ``--out``, which run first (``coach.delta_t_constant=...`` on the command line sets another).

The seed is the top-level ``seed`` key: it changes everything a run depends on (the toy models'
pretraining, the warm-up data and its order, every Coach and Player sample); the validation set is the
same for every seed. All variants of one seed start from the same pretrained models, so the
differences are paired by seed. The toy models of each seed are pretrained once, before the runs
(cached under ``$CPMOBIUS_CACHE/seed<s>/``).

Usage:
    python benchmarks/bench_toy_learning.py                        # 5 seeds x 4 variants, 2 runs at a time
    python benchmarks/bench_toy_learning.py --seeds 0 1 --variants full no_filter --jobs 1 --out /tmp/bench
    python benchmarks/bench_toy_learning.py --out /tmp/bench --report-only   # the table of finished runs

A finished run folder is not run again, so an interrupted benchmark continues where it stopped with the same
``--out``. A measurement that spans several machines keeps its finished runs in ``--archive DIR`` (one
``<vendor>/<variant>_seed<s>.jsonl.gz`` of each run's per-step metrics, about 16 KB, small enough to commit; the
toy's figures depend on the CPU's vendor, so each vendor has its own): a run found there is restored into ``--out``
and not run again, so a fresh machine with an empty ``--out`` goes on where the last
one stopped (``results/toy_delta_t_steering_2026-12-06/`` is such a folder).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cpmobius.plots import read_run_metrics, series  # noqa: E402

VARIANTS = {
    "full": [],
    "no_coach_update": ["coach.update=false"],
    "no_filter": ["filter.enabled=false"],
    "no_warmup": ["warmup.enabled=false"],
    "released_reward": ["coach.reward=released_uniform"],
    # The constant and the noise SD are the `full` arm's mean and SD of val/delta_t over its runs in the same --out
    # (`delta_t_of_full`), added when these arms start; an override given on the command line wins.
    "delta_t_constant": ["coach.delta_t_source=constant"],
    "delta_t_noise": ["coach.delta_t_source=noise"],
    "delta_t_shuffled": ["coach.delta_t_source=shuffled"],
    "rent": ["method=rent"],
    "ttrl": ["method=ttrl"],
    "rzero": ["method=rzero"],
    # R-Zero has no SFT, so its toy Coach starts unable to write the world's problems: warmed up as CPMöbius's is.
    "rzero_warmed_up": ["method=rzero", "warmup.enabled=true"],
}
DEFAULT_VARIANTS = ["full", "no_coach_update", "no_filter", "no_warmup"]


def prepare_seed(seed: int, extra: list[str]) -> None:
    """Pretrain (or find cached) the toy models and warm-up data of one seed, before its runs start, so
    that runs of one seed never pretrain into the same folder at the same time; on the kernels the runs hold
    (`cpmobius.main.hold_kernels`), or the runs would find the models made on others and pretrain again."""
    command = [
        sys.executable,
        "-c",
        "import sys; from cpmobius.config import compose_config; "
        "from cpmobius.main import hold_kernels, prepare_models; from cpmobius.settings import load_settings; "
        "cfg = compose_config(sys.argv[1:]); hold_kernels(cfg); prepare_models(cfg, load_settings(cfg))",
        f"seed={seed}",
        *extra,
    ]
    subprocess.run(command, cwd=REPO, check=True)


def finished_steps(run_dir: Path) -> int:
    """The last step a run validated after (0 before its first step's validation, or with no metrics)."""
    return max(series(read_run_metrics(run_dir), "val/accuracy")[0], default=0)


def archive_run(run_dir: Path, archive: Path) -> Path:
    """Write one run's per-step metrics (every launch's files, merged: `read_run_metrics`) to
    ``archive/<run folder name>.jsonl.gz`` in verl's file-logger rows; returns the file."""
    archive.mkdir(parents=True, exist_ok=True)
    target = archive / f"{run_dir.name}.jsonl.gz"
    rows = "".join(json.dumps({"step": s, "data": m}) + "\n" for s, m in sorted(read_run_metrics(run_dir).items()))
    partial = target.with_suffix(".part")
    with gzip.open(partial, "wt", compresslevel=9) as f:
        f.write(rows)
    partial.replace(target)  # whole or absent: an archived run is always a finished one
    return target


def restore_run(run_dir: Path, archive: Path) -> bool:
    """Put an archived run's metrics into an empty ``run_dir`` as its ``metrics.jsonl``; False when the archive has
    no such run or ``run_dir`` already holds metrics of its own (never overwritten)."""
    source = archive / f"{run_dir.name}.jsonl.gz"
    if not source.is_file() or (run_dir / "metrics.jsonl").is_file():
        return False
    run_dir.mkdir(parents=True, exist_ok=True)
    with gzip.open(source, "rt") as f:
        (run_dir / "metrics.jsonl").write_text(f.read())
    return True


def run_one(
    out: Path, variant: str, seed: int, extra: list[str], total_steps: int, archive: Optional[Path] = None
) -> tuple[Path, float]:
    """One default run of ``variant`` with ``seed`` in ``out/<variant>_seed<seed>``; returns (folder, wall seconds).

    A run whose metrics already reach ``total_steps`` (in ``out``, or restored from ``archive``) is not run again
    (0 seconds); a finished run is archived when ``archive`` is given.
    """
    run_dir = out / f"{variant}_seed{seed}"
    if archive is not None:
        restore_run(run_dir, archive)
    if finished_steps(run_dir) >= total_steps:
        if archive is not None and not (archive / f"{run_dir.name}.jsonl.gz").is_file():
            archive_run(run_dir, archive)
        return run_dir, 0.0
    run_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "cpmobius.main",
        f"trainer.default_local_dir={run_dir}",
        f"seed={seed}",
        *VARIANTS[variant],
        *extra,
    ]
    started = time.perf_counter()
    with open(run_dir / "bench.log", "a") as log:
        done = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{variant} seed {seed} failed (exit {done.returncode}); see {run_dir / 'bench.log'}")
    if archive is not None and finished_steps(run_dir) >= total_steps:  # a run stopped short is not a result
        archive_run(run_dir, archive)
    return run_dir, wall_s


# The Coach-reward arms whose value comes from the full arm's Δt: the key each sets and the statistic it takes.
FROM_FULL = {"delta_t_constant": ("coach.delta_t_constant", "mean"), "delta_t_noise": ("coach.delta_t_noise_sd", "sd")}


def delta_t_of_full(out: Path, seeds: list[int]) -> dict[str, float]:
    """The mean and standard deviation of ``val/delta_t`` over every step of the ``full`` arm's runs of ``seeds`` in
    ``out`` (fractions, as logged): the constant and the noise SD of the Coach-reward ablations, as docs/toy.md's
    measurement fixes them before its runs.

    Raises:
        FileNotFoundError: a seed's ``full`` run has not finished (its folder holds no ``val/delta_t``).
    """
    values = []
    for seed in seeds:
        run_dir = out / f"full_seed{seed}"
        logged = series(read_run_metrics(run_dir), "val/delta_t")[1] if (run_dir / "metrics.jsonl").is_file() else []
        if not logged:
            raise FileNotFoundError(
                f"{run_dir}: no finished full run to take Δt from; run `--variants full` with the same --out and "
                f"seeds first, or give the value (coach.delta_t_constant=..., coach.delta_t_noise_sd=...)"
            )
        values += logged
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def arm_overrides(variant: str, out: Path, seeds: list[int], extra: list[str]) -> list[str]:
    """``extra`` plus, for an arm whose value comes from the full arm (`FROM_FULL`), that value, unless ``extra``
    already sets its key."""
    if variant not in FROM_FULL:
        return extra
    key, statistic = FROM_FULL[variant]
    if any(arg.lstrip("+").split("=", 1)[0] == key for arg in extra):
        return extra
    return [*extra, f"{key}={delta_t_of_full(out, seeds)[statistic]:.6g}"]


def paired_test(differences: list[float]) -> tuple[float, float]:
    """The paired t statistic and its two-sided p (Student's t, n − 1 degrees of freedom) of per-seed differences;
    (nan, nan) below two seeds or with no spread."""
    from scipy import stats

    if len(differences) < 2 or statistics.stdev(differences) == 0:
        return float("nan"), float("nan")
    result = stats.ttest_1samp(differences, 0.0)
    return float(result.statistic), float(result.pvalue)


def summarize_run(run_dir: Path) -> dict[str, float]:
    """Start, end and peak validation accuracy of one run, and the means over its steps of the filter's numbers.

    ``end_last3`` is the mean of the last three steps; ``kept_label_ok_last5`` the kept problems'
    pseudo-label accuracy over the last five steps (the bar the toy default was held to in the gentle world,
    docs/toy.md).
    """
    steps = read_run_metrics(run_dir)
    xs, accuracy = series(steps, "val/accuracy")
    if not xs or xs[0] != 0 or len(xs) < 2:
        raise ValueError(f"{run_dir}: no validation before and after the steps")
    row = {
        "start": accuracy[0],
        "end": accuracy[-1],
        "gain": accuracy[-1] - accuracy[0],
        "steps": xs[-1],
        "peak": max(accuracy),
        "end_last3": statistics.fmean(accuracy[-3:]),
        "gain_last3": statistics.fmean(accuracy[-3:]) - accuracy[0],
    }
    for key, name in (
        ("pseudo_label/kept_accuracy", "kept_label_ok"),
        ("coach/valid_frac", "coach_valid"),
        ("filter/kept", "kept"),
        ("player/response_length/mean", "player_len"),
        ("coach/difficulty_mean", "coach_level"),
        ("filter/attempts", "attempts"),
        ("filter/quota_met", "quota_met"),
    ):
        values = series(steps, key)[1]
        row[name] = statistics.fmean(values) if values else float("nan")
    kept_xs, kept_ok = series(steps, "pseudo_label/kept_accuracy")
    last5 = [v for x, v in zip(kept_xs, kept_ok) if x > xs[-1] - 5]
    row["kept_label_ok_last5"] = statistics.fmean(last5) if last5 else float("nan")
    # The Coach's level is averaged over the problems that have one; the share it writes outside the toy's
    # levels (text `problem_difficulty` cannot read, often with no true answer either) shows a Coach drifting
    # off the world, which the level alone hides.
    for key, name in (("coach/difficulty_mean", "coach_level"), ("coach/difficulty/other", "coach_other")):
        values = series(steps, key)[1]
        row[f"{name}_first3"] = statistics.fmean(values[:3]) if values else float("nan")
        row[f"{name}_last3"] = statistics.fmean(values[-3:]) if values else float("nan")
    # The greedy pass beside an expected-accuracy validation (validation.metric=expected), the out-of-distribution
    # set's (validation.ood_dataset), and each level's gain.
    gains = (("val/accuracy_greedy", "greedy"), ("val/ood_accuracy", "ood"))
    for key, name in (*gains, *((f"val/accuracy/d{k}", f"level{k}") for k in range(5))):
        values = series(steps, key)[1]
        row[f"{name}_gain_last3"] = statistics.fmean(values[-3:]) - values[0] if len(values) > 1 else float("nan")
    return row


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sd / sqrt(n); 0 for a single value)."""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return statistics.fmean(values), se


def acceptance(row: dict[str, float]) -> bool:
    """The acceptance bar, per seed: end (mean of the last 3) ≥ 0.8 × peak and ≥ start + 0.25; kept pseudo-label
    accuracy over the last 5 steps ≥ 0.6."""
    return (
        row["end_last3"] >= 0.8 * row["peak"]
        and row["end_last3"] >= row["start"] + 0.25
        and row["kept_label_ok_last5"] >= 0.6
    )


def format_table(results: dict[str, list[dict[str, float]]]) -> str:
    """A markdown table: one row per variant, mean ± SE over seeds; full − variant paired by seed."""
    lines = [
        "| variant | seeds | val acc start | val acc end (last 3) | gain ± SE | full − variant ± SE (paired t, p) | "
        "kept pseudo-label right | Coach level (first 3 → last 3 steps) | Coach batches per step | "
        "kept per step (share of steps at the quota) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    full = {r["seed"]: r for r in results.get("full", [])}
    for variant, rows in results.items():
        if not rows:
            continue
        gain, gain_se = mean_se([r["gain_last3"] for r in rows])
        paired = [full[r["seed"]]["gain_last3"] - r["gain_last3"] for r in rows if r["seed"] in full]
        if variant == "full" or not paired:
            difference = "—"
        else:
            diff, diff_se = mean_se(paired)
            t, p = paired_test(paired)
            ahead = sum(d > 0 for d in paired)
            difference = f"{diff:+.3f} ± {diff_se:.3f}" + (
                f", t({len(paired) - 1}) = {t:+.2f}, p = {p:.3f}, full ahead {ahead}/{len(paired)}"
                if not math.isnan(t)
                else ""
            )
        lines.append(
            f"| {variant} | {len(rows)} | {statistics.fmean(r['start'] for r in rows):.3f} | "
            f"{statistics.fmean(r['end_last3'] for r in rows):.3f} | {gain:+.3f} ± {gain_se:.3f} | {difference} | "
            f"{_mean_cell(rows, 'kept_label_ok', '.2f')} | "
            f"{_mean_cell(rows, 'coach_level_first3', '.2f')} → {_mean_cell(rows, 'coach_level_last3', '.2f')} | "
            f"{_mean_cell(rows, 'attempts', '.1f')} | "
            f"{_mean_cell(rows, 'kept', '.1f')} ({_mean_cell(rows, 'quota_met', '.2f')}) |"
        )
    return "\n".join(lines)


def _mean_cell(rows: list[dict[str, float]], key: str, spec: str) -> str:
    """The mean of ``key`` over ``rows`` formatted with ``spec``, or "—" where a method never logs it (the
    baselines have no difficulty filter or Coach levels: NaN)."""
    mean = statistics.fmean(r[key] for r in rows)
    return "—" if math.isnan(mean) else format(mean, spec)


def format_details(results: dict[str, list[dict[str, float]]]) -> str:
    """A markdown table of the gains (last 3 − step 0) the main table leaves out, mean ± SE over seeds and full −
    variant paired by seed: the greedy pass's (validation.metric=expected runs), the out-of-distribution set's
    (``val/ood_accuracy``) and each level's; "—" where not logged."""
    keys = ["greedy_gain_last3", "ood_gain_last3", *(f"level{k}_gain_last3" for k in range(5))]
    lines = [
        "| variant | greedy | ood | level 0 | level 1 | level 2 | level 3 | level 4 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    full = {r["seed"]: r for r in results.get("full", [])}
    for variant, rows in results.items():
        cells = []
        for key in keys:
            values = [r[key] for r in rows if not math.isnan(r.get(key, float("nan")))]
            if not values:
                cells.append("—")
                continue
            mean, se = mean_se(values)
            cell = f"{mean:+.3f} ± {se:.3f}"
            paired = [full[r["seed"]][key] - r[key] for r in rows if r["seed"] in full and key in r]
            if variant != "full" and len(paired) > 1 and not any(math.isnan(v) for v in paired):
                diff, diff_se = mean_se(paired)
                cell += f" (full − it {diff:+.3f} ± {diff_se:.3f})"
            cells.append(cell)
        if rows:
            lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_seeds(rows: list[dict[str, float]]) -> str:
    """One line per seed of a variant: start, peak, end, kept pseudo-label accuracy, acceptance."""
    return "\n".join(
        f"seed {r['seed']}: start {r['start']:.3f} peak {r['peak']:.3f} end(last 3) {r['end_last3']:.3f} "
        f"kept pseudo-label right (last 5) {r['kept_label_ok_last5']:.2f} -> "
        f"{'meets' if acceptance(r) else 'misses'} the bar"
        for r in rows
    )


def format_off_levels(results: dict[str, list[dict[str, float]]]) -> str:
    """One line per variant: the mean share of the Coach's problems outside the toy's levels, first 3 → last 3 steps."""
    return "\n".join(
        f"{variant}: Coach problems outside the levels {_mean_cell(rows, 'coach_other_first3', '.2f')}"
        f" → {_mean_cell(rows, 'coach_other_last3', '.2f')} (first 3 → last 3 steps)"
        for variant, rows in results.items()
        if rows and not math.isnan(statistics.fmean(r["coach_other_first3"] for r in rows))
    )


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (each uses about one core)")
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench_toy_learning")
    parser.add_argument("--report-only", action="store_true", help="print the table of finished runs, run nothing")
    parser.add_argument(
        "--archive",
        type=Path,
        help="keep each finished run's metrics here (gzipped, small enough to commit) and restore runs found here "
        "instead of running them again",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides for every run (e.g. trainer.total_training_steps=10), before or after the options",
    )
    argv = sys.argv[1:] if argv is None else argv
    # A Hydra override (key=value) may follow a list option (`--variants full filter.band_low=0.1`), where
    # argparse alone would read it as a variant or a seed.
    overrides = [arg for arg in argv if "=" in arg and not arg.startswith("-")]
    args = parser.parse_args([arg for arg in argv if arg not in overrides])
    args.overrides = overrides

    if args.archive is not None:
        from cpmobius.cpu_kernels import cpu_vendor

        # The toy's figures depend on the CPU's vendor (docs/toy.md, "Reading the run"): one archive per vendor.
        args.archive = args.archive / cpu_vendor()
        for variant in args.variants:
            for seed in args.seeds:
                restore_run(args.out / f"{variant}_seed{seed}", args.archive)
    if not args.report_only:
        from cpmobius.config import compose_config

        total_steps = int(compose_config(args.overrides).trainer.total_training_steps)
        for seed in args.seeds:  # the models of seeds with runs to do (a finished run needs none)
            if any(finished_steps(args.out / f"{v}_seed{seed}") < total_steps for v in args.variants):
                prepare_seed(seed, args.overrides)
        # The full arm first: the constant and noise arms take their value from its finished runs.
        phases = [[v for v in args.variants if v == "full"], [v for v in args.variants if v != "full"]]
        for variants in phases:
            runs = [
                (v, seed, arm_overrides(v, args.out, args.seeds, args.overrides))
                for v in variants
                for seed in args.seeds
            ]
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                finished = pool.map(lambda r: run_one(args.out, *r, total_steps, args.archive), runs)
                for (variant, seed, _), (_, wall_s) in zip(runs, finished):
                    done = f"{wall_s:.0f} s" if wall_s else f"finished before ({total_steps} steps), not run again"
                    print(f"[bench] {variant} seed {seed}: {done}", flush=True)
    results: dict[str, list[dict[str, float]]] = {v: [] for v in args.variants}
    for variant in args.variants:
        for seed in args.seeds:
            run_dir = args.out / f"{variant}_seed{seed}"
            if not (run_dir / "metrics.jsonl").is_file():
                continue
            try:
                row = summarize_run(run_dir)
            except ValueError as unfinished:  # --report-only on a run still in progress
                print(f"[bench] {variant} seed {seed}: skipped, {unfinished}", flush=True)
                continue
            results[variant].append({"seed": seed, **row})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    if len(results.get("full", [])) == len(args.seeds):
        full_dt = delta_t_of_full(args.out, args.seeds)
        print(f"full arm's val/delta_t over every step and seed: mean {full_dt['mean']:+.4f}, SD {full_dt['sd']:.4f}")
    if results.get("full"):
        print(format_seeds(results["full"]))
    print(format_table(results))
    print(format_details(results))
    print(format_off_levels(results))


if __name__ == "__main__":
    main()
