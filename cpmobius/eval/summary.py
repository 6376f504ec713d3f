"""Per-benchmark summaries: avg@k / pass@k / maj@k with bootstrap CIs, coverage, Avg and OOD Avg
(stage: evaluation).

From the per-problem verdicts of `cpmobius.eval.scoring` (whose docstring defines the metrics) to
the numbers a run reports; `score_run` does both steps for one run's completions.

* 95% confidence intervals: percentile bootstrap over problems (1000 resamples, seed 0).
* Avg: the unweighted mean of the per-benchmark numbers of the six paper benchmarks (AIME24,
  AIME25, AMC, MATH-500, Minerva, OlympiadBench); OOD Avg: the same over the five without AMC
  (AMC is the training validation set, so it is in-distribution for Δt), or without the run's own
  validation set when it was another of the six (`validation_set`, CLI `--validation-set`). Their
  CIs come from a stratified bootstrap (problems resampled within each benchmark, then the macro mean).
* Coverage: each benchmark records the problems scored (`n_problems`), the problems of the
  evaluated set (`n_problems_expected`: the benchmark, or its first N problems with `--limit N`)
  and of the whole benchmark (`n_problems_benchmark`); `complete` = every problem of the evaluated
  set is scored. Avg / OOD Avg are None, with a `reason`, unless every benchmark they average is
  present and complete; `allow_partial` (CLI `--allow-partial`) averages partial benchmarks
  deliberately and lists them in `partial_benchmarks`. A `--limit N` run is complete for its slice
  (the table's footnote says it is a slice, not comparable with the paper).
* Uneven responses per problem are an error naming the problems (`uneven_message`), unless
  accepted (`allow_uneven`, CLI `--allow-uneven-k`).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, Mapping, Optional, Sequence

from cpmobius.eval.scoring import (
    DEFAULT_K,
    GRADERS,
    METRICS,
    PAPER_VALIDATION_SET,
    ProblemScores,
    averages,
    avg_at_k,
    golds_for,
    grader_disagreements,
    ood_benchmarks,
    pass_at_k,
    score_completions,
)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of sorted values, q in [0, 1]."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _bootstrap(strata: Sequence[Sequence[float]], n_boot: int, seed: int) -> tuple[float, float]:
    """Percentile 95% interval of the macro mean (mean of per-stratum means), strata resampled independently."""
    import random

    if any(len(s) == 0 for s in strata) or not strata:
        raise ValueError("bootstrap over an empty set of problems")
    if n_boot < 1:
        raise ValueError(f"bootstrap needs at least one resample (got n_boot={n_boot})")
    rng = random.Random(seed)
    stats = sorted(_macro_mean([rng.choices(s, k=len(s)) for s in strata]) for _ in range(n_boot))
    return _percentile(stats, 0.025), _percentile(stats, 0.975)


def _macro_mean(strata: Sequence[Sequence[float]]) -> float:
    """Mean of per-stratum means: the point estimate, computed exactly as each bootstrap statistic is
    (so a degenerate sample, every score equal, gives an interval that is that very number)."""
    return sum(sum(s) / len(s) for s in strata) / len(strata)


def bootstrap_ci(per_problem_scores: Sequence[float], n_boot: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean over problems.

    Args:
        per_problem_scores: (n_problems,) per-problem scores (e.g. avg@k of each problem).
        n_boot: bootstrap resamples (problems drawn with replacement).
        seed: RNG seed (same inputs and seed → same interval).

    Returns:
        (low, high), in the scores' unit.

    Raises:
        ValueError: no problems.
    """
    return _bootstrap([list(per_problem_scores)], n_boot, seed)


def _per_problem(problems: Sequence[ProblemScores], k: int) -> dict[str, list[float]]:
    """metric → (n_problems,) per-problem scores in [0, 1]."""
    return {
        "avg@k": [avg_at_k(p.correct) for p in problems],
        "pass@k": [pass_at_k(len(p.correct), sum(p.correct), k) for p in problems],
        "maj@k": [float(p.maj_correct) for p in problems],
    }


def uneven_message(bench: str, problems: Sequence[ProblemScores], limit: int = 10) -> str:
    """The error for a benchmark whose problems hold different numbers of responses (names them)."""
    ns = {p.problem_id: len(p.correct) for p in problems}
    n_max = max(ns.values())
    short = [f"{pid} ({n})" for pid, n in ns.items() if n < n_max]
    more = f" and {len(short) - limit} more" if len(short) > limit else ""
    return (
        f"{bench}: uneven responses per problem (n_min={min(ns.values())}, n_max={n_max}); problems with "
        f"fewer than {n_max}: {', '.join(short[:limit])}{more}. Complete the completions, or pass "
        "--allow-uneven-k to accept them (pass@k then uses k = n_min)"
    )


def _benchmark_entry(problems: Sequence[ProblemScores], expected: int, in_benchmark: int) -> dict[str, Any]:
    """Counts of one benchmark: coverage, responses per problem, grading statuses."""
    ns = [len(p.correct) for p in problems]
    grading = dict.fromkeys(("ok", "no_answer", "timeout", "error"), 0)
    for p in problems:
        for status in p.statuses:
            grading[status] += 1
    return {
        "n_problems": len(problems),
        "n_problems_expected": expected,
        "n_problems_benchmark": in_benchmark,
        "complete": len(problems) >= expected,
        "k": min(ns),
        "n_min": min(ns),
        "n_max": max(ns),
        "n_responses": sum(ns),
        "grading": grading,
    }


def _average_blocked(summary: Mapping[str, Any], members: Sequence[str], allow_partial: bool) -> Optional[str]:
    """Why Avg / OOD Avg over `members` cannot be computed (None when it can)."""
    missing = [b for b in members if b not in summary]
    if missing:
        return f"not scored: {', '.join(missing)}"
    partial = [b for b in members if not summary[b]["complete"]]
    if partial and not allow_partial:
        detail = ", ".join(f"{b} {summary[b]['n_problems']}/{summary[b]['n_problems_expected']}" for b in partial)
        return f"partial benchmarks (problems scored/expected): {detail}; pass --allow-partial to average a slice"
    return None


def summarise(
    per_benchmark: Mapping[str, Sequence[ProblemScores]],
    n_boot: int = 1000,
    seed: int = 0,
    *,
    problems_expected: Optional[Mapping[str, int]] = None,
    problems_in_benchmark: Optional[Mapping[str, int]] = None,
    allow_partial: bool = False,
    allow_uneven: bool = False,
    validation_set: str = PAPER_VALIDATION_SET,
) -> dict[str, Any]:
    """Per-benchmark avg@k / pass@k / maj@k (percent) with 95% CIs, plus Avg and OOD Avg.

    Args:
        per_benchmark: benchmark → problems, as returned by `score_completions`.
        n_boot, seed: bootstrap settings (see `bootstrap_ci`).
        problems_expected: benchmark → problems of the evaluated set (default: those scored, i.e.
            complete); fewer scored marks the benchmark partial.
        problems_in_benchmark: benchmark → problems of the whole benchmark (default: expected);
            larger than expected for a `--limit` slice.
        allow_partial: average partial benchmarks into Avg / OOD Avg (listed in `partial_benchmarks`).
        allow_uneven: accept problems with different numbers of responses (k = n_min).
        validation_set: the benchmark that drove Δt in training, left out of OOD Avg (`ood_benchmarks`;
            default amc, the paper's).

    Returns:
        {benchmark: {"n_problems", "n_problems_expected", "n_problems_benchmark", "complete", "k",
         "n_min", "n_max", "k_protocol", "n_responses", "grading", metric, metric + "_ci"},
         "Avg": {...}, "OOD Avg": {..., "validation_set"}, "Avg w/o Minerva": {...}}. k is the responses per
        problem (pass@k uses it); the averages are the unweighted means of the per-benchmark numbers over
        their members (`cpmobius.eval.scoring.averages`), with a stratified-bootstrap CI, or None with a
        `reason` (a benchmark missing, or partial without `allow_partial`).

    Raises:
        ValueError: uneven responses per problem without `allow_uneven` (names benchmark and problems);
            an unknown `validation_set`.
    """
    averaged = averages(validation_set)
    summary: dict[str, Any] = {}
    scores: dict[str, dict[str, list[float]]] = {}
    for bench, problems in per_benchmark.items():
        if not problems:
            continue
        expected = (problems_expected or {}).get(bench, len(problems))
        entry = _benchmark_entry(problems, expected, (problems_in_benchmark or {}).get(bench, expected))
        if entry["n_min"] != entry["n_max"] and not allow_uneven:
            raise ValueError(uneven_message(bench, problems))
        entry["k_protocol"] = DEFAULT_K.get(bench)
        scores[bench] = _per_problem(problems, entry["k"])
        for metric, values in scores[bench].items():
            entry[metric] = 100.0 * _macro_mean([values])
            lo, hi = bootstrap_ci(values, n_boot, seed)
            entry[metric + "_ci"] = [100.0 * lo, 100.0 * hi]
        summary[bench] = entry
    for name, members in averaged:
        reason = _average_blocked(summary, members, allow_partial)
        entry = {
            "benchmarks": list(members),
            "reason": reason,
            "partial_benchmarks": [] if reason else [b for b in members if not summary[b]["complete"]],
        }
        for metric in METRICS:
            if reason is None:
                # From the per-benchmark numbers (their unscaled means), as the bootstrap computes them.
                entry[metric] = 100.0 * _macro_mean([scores[b][metric] for b in members])
                lo, hi = _bootstrap([scores[b][metric] for b in members], n_boot, seed)
                entry[metric + "_ci"] = [100.0 * lo, 100.0 * hi]
            else:
                entry[metric], entry[metric + "_ci"] = None, None
        summary[name] = entry
    summary["OOD Avg"]["validation_set"] = validation_set
    return summary


def score_run(
    records: Sequence[Mapping[str, Any]],
    rows_by_benchmark: Mapping[str, Sequence[Mapping[str, Any]]],
    answer_key: str = "corrected",
    grader: str = "cpmobius",
    compare: bool = True,
    n_boot: int = 1000,
    seed: int = 0,
    *,
    benchmark_sizes: Optional[Mapping[str, int]] = None,
    allow_partial: bool = False,
    allow_uneven: bool = False,
    validation_set: str = PAPER_VALIDATION_SET,
) -> dict[str, Any]:
    """Grade a run's completions and summarise them; optionally grade again with the other grader.

    Args:
        records: completion records (`benchmark`, `problem_id`, `response`).
        rows_by_benchmark: benchmark → the rows of the evaluated set (uniform schema): a benchmark
            whose rows are not all in `records` is partial (see `summarise`).
        answer_key: "corrected" or "released" (`cpmobius.eval.data.gold_answers`).
        grader: the reported grader, one of `GRADERS`.
        compare: also grade with the other grader and list the disagreements.
        n_boot, seed: bootstrap settings.
        benchmark_sizes: benchmark → problems of the whole benchmark, when the rows are a slice.
        allow_partial, allow_uneven, validation_set: see `summarise`.

    Returns:
        {"answer_key", "grader", "validation_set", "summary", "problems", and with `compare`:
        "other_grader", "other_summary", "disagreements"} (summaries as in `summarise`).

    Raises:
        ValueError: unknown key / grader / validation set, records naming unknown benchmarks or
            problems, uneven responses per problem without `allow_uneven`.
        cpmobius.grading.GradingError: every grade of a benchmark failed.
    """
    ood_benchmarks(validation_set)  # an unknown name fails before any grading
    coverage = dict(
        problems_expected={b: len(rows) for b, rows in rows_by_benchmark.items()},
        problems_in_benchmark=benchmark_sizes,
        allow_partial=allow_partial,
        allow_uneven=allow_uneven,
        validation_set=validation_set,
    )
    per_benchmark = score_completions(records, golds_for(rows_by_benchmark, answer_key, grader), grader)
    result: dict[str, Any] = {
        "answer_key": answer_key,
        "grader": grader,
        "validation_set": validation_set,
        "summary": summarise(per_benchmark, n_boot, seed, **coverage),
        "problems": {b: [asdict(p) for p in ps] for b, ps in per_benchmark.items()},
    }
    if compare:
        other = GRADERS[1 - GRADERS.index(grader)]
        other_scores = score_completions(records, golds_for(rows_by_benchmark, answer_key, other), other)
        responses: dict[tuple[str, str], list] = {}
        for rec in records:
            responses.setdefault((rec["benchmark"], str(rec["problem_id"])), []).append(rec["response"])
        result["other_grader"] = other
        result["other_summary"] = summarise(other_scores, n_boot, seed, **coverage)
        result["disagreements"] = grader_disagreements(per_benchmark, other_scores, responses)
    return result


def paired_difference(
    problems_a: Mapping[str, Sequence[Mapping[str, Any]]],
    problems_b: Mapping[str, Sequence[Mapping[str, Any]]],
    n_boot: int = 1000,
    seed: int = 0,
    *,
    validation_set: str = PAPER_VALIDATION_SET,
) -> dict[str, Any]:
    """avg@k of run B minus run A on the same problems, with paired bootstrap 95% CIs.

    The difference of two models' means is estimated from per-problem differences (B's avg@k minus A's
    on the same problem), resampling problems once for both models, so the interval leaves out the
    between-problem variance the two runs share: narrower than comparing two separate intervals, and
    the right test of "did training change this model's accuracy". Avg and OOD Avg difference the
    macro means, with the stratified bootstrap of `summarise`.

    Args:
        problems_a, problems_b: benchmark → per-problem verdicts, as in `score_run`'s "problems"
            (dicts with `problem_id` and `correct`, the (n,) per-response verdicts).
        n_boot, seed: bootstrap settings (see `bootstrap_ci`).
        validation_set: the benchmark OOD Avg leaves out (see `summarise`).

    Returns:
        {benchmark: {"avg@k", "avg@k_ci", "n_problems", "k"}, "Avg": {...}, "OOD Avg": {...},
        "Avg w/o Minerva": {...}} for the benchmarks both runs scored, in percentage points; an average is
        None with a `reason` when a member is missing from either run.

    Raises:
        ValueError: a benchmark whose problem ids differ between the runs (the pairing would be wrong).
    """
    diffs: dict[str, list[float]] = {}
    out: dict[str, Any] = {}
    for bench in [b for b in problems_a if b in problems_b]:
        a = {str(p["problem_id"]): p for p in problems_a[bench]}
        b = {str(p["problem_id"]): p for p in problems_b[bench]}
        if set(a) != set(b):
            only = sorted(set(a) ^ set(b))
            raise ValueError(
                f"{bench}: the two runs scored different problems ({len(only)} in one run only, "
                f"e.g. {only[:5]}); a paired difference needs the same problems"
            )
        if not a:
            continue
        diffs[bench] = [avg_at_k(b[pid]["correct"]) - avg_at_k(a[pid]["correct"]) for pid in a]
        lo, hi = bootstrap_ci(diffs[bench], n_boot, seed)
        out[bench] = {
            "avg@k": 100.0 * _macro_mean([diffs[bench]]),
            "avg@k_ci": [100.0 * lo, 100.0 * hi],
            "n_problems": len(a),
            "k": min(len(p["correct"]) for p in b.values()),
        }
    for name, members in averages(validation_set):
        missing = [m for m in members if m not in diffs]
        if missing:
            out[name] = {"avg@k": None, "avg@k_ci": None, "reason": f"not scored in both runs: {', '.join(missing)}"}
            continue
        lo, hi = _bootstrap([diffs[m] for m in members], n_boot, seed)
        out[name] = {"avg@k": 100.0 * _macro_mean([diffs[m] for m in members]), "avg@k_ci": [100.0 * lo, 100.0 * hi]}
    out["OOD Avg"]["validation_set"] = validation_set
    return out
