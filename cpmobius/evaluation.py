r"""Benchmark scoring: avg@k, pass@k, maj@k, bootstrap CIs, the paper's table (stage: evaluation).

Scoring only (no generation): completions in, per-benchmark numbers and a markdown table out.
Every verdict comes from the project's one grader (`cpmobius.grading`): `grade_batch` for
response-vs-gold, `majority_vote` for maj@k.

Metrics (all in percent, per benchmark = mean over its problems; a problem with n responses of
which c are correct):

* avg@k: c / n, the mean accuracy of single samples (the paper's reported number).
* pass@k: the unbiased estimator 1 − C(n−c, k) / C(n, k) (Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code", eq. 1). Here k is the number of responses actually present
  (the smallest n over the benchmark's problems), so with a uniform n it is "any correct".
* maj@k: the majority vote of the problem's n responses (`majority_vote`, equivalence clusters)
  is correct iff its pseudo-label, graded against the gold with `grade_batch`, is correct; a tie
  or no label (nothing answered) is wrong.
* A response (or pseudo-label) is correct if it matches the gold `answer` or any `alt_answers`.
* 95% confidence intervals: percentile bootstrap over problems (1000 resamples, seed 0).
* Avg: the unweighted mean of the per-benchmark numbers of the six paper benchmarks (AIME24,
  AIME25, AMC, MATH-500, Minerva, OlympiadBench); OOD Avg: the same over the five without AMC
  (AMC is the training validation set, so it is in-distribution for Δt). Both are None unless
  every benchmark they average is present. Their CIs come from a stratified bootstrap
  (problems resampled within each benchmark, then the macro mean).

Default k (the released protocol, notes/upstream_cpmobius.md §5): 32, 32, 10, 5, 5, 5 for AIME24,
AIME25, AMC, MATH-500, Minerva, OlympiadBench (`DEFAULT_K`); the reported k is what the
completions hold, and `k_protocol` is listed beside it.

Departures from the released evaluation: the released code has no aggregation script and
reports no CIs; its grader strips answers with `str.strip` on phrases and checks only the first
Minerva answer (our grader and the `alt_answers` fix both). The Minerva key used is the corrected
`answer` of ../shared/data (MANIFEST §2); `answer_key=released` is not implemented here yet.

CLI (scoring mode)::

    python -m cpmobius.evaluation --completions FILE.jsonl [--data-dir DIR] [--out DIR]

FILE.jsonl holds one JSON object per line with at least `benchmark`, `problem_id` (the
benchmark row's `id`) and `response` (a string, or null for no response). Writes
`results.json` and `results.md` to `--out` (default: the completions file's folder).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from cpmobius.grading import grade_batch, majority_vote
from cpmobius.jsonl import JSONLineError, json_objects

BENCHMARKS = ("amc", "aime24", "aime25", "math500", "minerva_math", "olympiadbench", "amc23")
"""Every known benchmark name (folder and file stem under the data dir)."""

AVG_BENCHMARKS = ("aime24", "aime25", "amc", "math500", "minerva_math", "olympiadbench")
"""The six benchmarks of the paper's Avg column."""

OOD_BENCHMARKS = ("aime24", "aime25", "math500", "minerva_math", "olympiadbench")
"""The five benchmarks of the paper's OOD Avg column (Avg without AMC)."""

DEFAULT_K = {"aime24": 32, "aime25": 32, "amc": 10, "math500": 5, "minerva_math": 5,
             "olympiadbench": 5, "amc23": 32}
"""Responses per problem of the released protocol (amc23 is not in the paper; 32 as for AIME)."""

TABLE_COLUMNS = (("AIME24", "aime24"), ("AIME25", "aime25"), ("AMC", "amc"), ("MATH-500", "math500"),
                 ("Minerva", "minerva_math"), ("OlympiadBench", "olympiadbench"),
                 ("Avg", "Avg"), ("OOD Avg", "OOD Avg"))
"""(column header, summary key) in the paper's column order."""

METRICS = ("avg@k", "pass@k", "maj@k")


def default_data_dir() -> Path:
    """`$CPMOBIUS_SHARED_DATA/eval`, else `../shared/data/eval` beside the checkout."""
    env = os.environ.get("CPMOBIUS_SHARED_DATA")
    if env:
        return Path(env) / "eval"
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "eval"


def load_benchmark(name: str, data_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Read one benchmark's JSONL (`<data_dir>/<name>/<name>.jsonl`, one row per problem).

    Args:
        name: one of `BENCHMARKS`.
        data_dir: the folder holding one sub-folder per benchmark (default `default_data_dir()`).

    Returns:
        The rows, each with at least `id`, `problem`, `answer` and `alt_answers` (list, may be []).

    Raises:
        ValueError: unknown benchmark name, or a row without `id`/`answer`.
        FileNotFoundError: the file is missing.
    """
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {BENCHMARKS}")
    path = Path(data_dir if data_dir is not None else default_data_dir()) / name / f"{name}.jsonl"
    rows = []
    with open(path, encoding="utf-8") as f:
        try:
            for line_no, row in json_objects(f):
                if "id" not in row or "answer" not in row:
                    raise ValueError(f"benchmark {name!r}: {path}:{line_no} lacks 'id' or 'answer'")
                row.setdefault("alt_answers", [])
                rows.append(row)
        except JSONLineError as error:
            raise ValueError(f"benchmark {name!r}: {path}:{error.line_no}: {error.reason}") from None
    return rows


def gold_answers(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """problem id → accepted answers ([answer, *alt_answers], as strings, duplicates dropped)."""
    golds = {}
    for row in rows:
        accepted = [str(row["answer"])] + [str(a) for a in row.get("alt_answers") or []]
        golds[str(row["id"])] = list(dict.fromkeys(accepted))
    return golds


@dataclass
class ProblemScores:
    """The graded responses of one problem.

    Attributes:
        problem_id: the benchmark row's `id`.
        golds: accepted answers ([answer, *alt_answers]).
        correct: (n,) per response, correct against any accepted answer.
        extracted: (n,) per response, the extracted final answer or None.
        maj_label: the majority vote's pseudo-label, or None (tie / nothing answered).
        maj_correct: whether `maj_label` matches an accepted answer (False without a label).
    """

    problem_id: str
    golds: list[str]
    correct: list[bool]
    extracted: list[Optional[str]]
    maj_label: Optional[str] = None
    maj_correct: bool = False


def score_completions(records: Sequence[Mapping[str, Any]],
                      golds: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, list[ProblemScores]]:
    """Grade every response and take each problem's majority vote.

    Args:
        records: dicts with `benchmark`, `problem_id`, `response` (str or None); k per problem,
            in any order.
        golds: benchmark → problem id → accepted answers (see `gold_answers`).

    Returns:
        benchmark → `ProblemScores` per problem (in first-seen order), responses in record order.

    Raises:
        ValueError: a record names a benchmark or problem id missing from `golds`.
    """
    grouped: dict[str, dict[str, list[Optional[str]]]] = {}
    for i, rec in enumerate(records):
        bench, pid = rec["benchmark"], str(rec["problem_id"])
        if bench not in golds:
            raise ValueError(f"record {i}: no gold answers for benchmark {bench!r}")
        if pid not in golds[bench]:
            raise ValueError(f"record {i}: benchmark {bench!r} has no problem {pid!r}")
        grouped.setdefault(bench, {}).setdefault(pid, []).append(rec["response"])

    # One grading batch: every (accepted answer, response) pair.
    pair_golds, pair_resps, where = [], [], []
    for bench, problems in grouped.items():
        for pid, responses in problems.items():
            for j, resp in enumerate(responses):
                for g, gold in enumerate(golds[bench][pid]):
                    pair_golds.append(gold)
                    pair_resps.append(resp)
                    where.append((bench, pid, j, g))
    results = grade_batch(pair_golds, pair_resps).results
    out: dict[str, dict[str, ProblemScores]] = {
        bench: {pid: ProblemScores(pid, list(golds[bench][pid]), [False] * len(resps), [None] * len(resps))
                for pid, resps in problems.items()}
        for bench, problems in grouped.items()}
    for (bench, pid, j, g), res in zip(where, results):
        ps = out[bench][pid]
        ps.correct[j] = ps.correct[j] or res.correct
        if g == 0:
            ps.extracted[j] = res.extracted

    # maj@k: vote on the extracted answers, then grade the pseudo-label like a response.
    label_golds, label_resps, label_where = [], [], []
    for bench, problems in out.items():
        for pid, ps in problems.items():
            ps.maj_label = majority_vote(answers=ps.extracted).pseudo_label
            if ps.maj_label is not None:
                for gold in ps.golds:
                    label_golds.append(gold)
                    label_resps.append("\\boxed{" + ps.maj_label + "}")
                    label_where.append(ps)
    for ps, res in zip(label_where, grade_batch(label_golds, label_resps).results):
        ps.maj_correct = ps.maj_correct or res.correct
    return {bench: list(problems.values()) for bench, problems in out.items()}


def avg_at_k(correct: Sequence[bool]) -> float:
    """avg@k of one problem: the fraction of its n responses that are correct (c / n).

    Raises:
        ValueError: no responses.
    """
    if not correct:
        raise ValueError("avg@k of a problem without responses")
    return sum(bool(c) for c in correct) / len(correct)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem: 1 − C(n−c, k) / C(n, k).

    Args:
        n: responses sampled; c: correct among them; k: the budget (1 ≤ k ≤ n).

    Source: Chen et al. 2021 (Codex), eq. 1.

    Raises:
        ValueError: unless 0 ≤ c ≤ n and 1 ≤ k ≤ n.
    """
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def maj_at_k(extracted: Sequence[Optional[str]], golds: Sequence[str]) -> bool:
    """maj@k of one problem: the majority vote of its answers is correct.

    Args:
        extracted: (n,) extracted answers (None = no answer; never votes).
        golds: accepted answers; the pseudo-label is graded against each with `grade_batch`.

    Returns:
        True iff the vote has a label (no tie, something answered) that matches an accepted answer.
    """
    label = majority_vote(answers=list(extracted)).pseudo_label
    if label is None:
        return False
    return any(r.correct for r in grade_batch(list(golds), ["\\boxed{" + label + "}"] * len(golds)).results)


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
    rng = random.Random(seed)
    stats = []
    for _ in range(n_boot):
        means = [sum(rng.choices(s, k=len(s))) / len(s) for s in strata]
        stats.append(sum(means) / len(means))
    stats.sort()
    return _percentile(stats, 0.025), _percentile(stats, 0.975)


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


def summarise(per_benchmark: Mapping[str, Sequence[ProblemScores]], n_boot: int = 1000,
              seed: int = 0) -> dict[str, Any]:
    """Per-benchmark avg@k / pass@k / maj@k (percent) with 95% CIs, plus Avg and OOD Avg.

    Args:
        per_benchmark: benchmark → problems, as returned by `score_completions`.
        n_boot, seed: bootstrap settings (see `bootstrap_ci`).

    Returns:
        {benchmark: {"n_problems", "k", "k_protocol", "n_responses", metric, metric + "_ci"},
         "Avg": {...}, "OOD Avg": {...}}. k is the smallest number of responses per problem
        (pass@k uses it); Avg / OOD Avg are the unweighted means of the per-benchmark numbers
        over `AVG_BENCHMARKS` / `OOD_BENCHMARKS` (None when one of them is missing), with a
        stratified-bootstrap CI.
    """
    summary: dict[str, Any] = {}
    scores: dict[str, dict[str, list[float]]] = {}
    for bench, problems in per_benchmark.items():
        if not problems:
            continue
        ns = [len(p.correct) for p in problems]
        k = min(ns)
        scores[bench] = _per_problem(problems, k)
        entry: dict[str, Any] = {"n_problems": len(problems), "k": k, "k_protocol": DEFAULT_K.get(bench),
                                 "n_responses": sum(ns)}
        for metric, values in scores[bench].items():
            entry[metric] = 100.0 * sum(values) / len(values)
            lo, hi = bootstrap_ci(values, n_boot, seed)
            entry[metric + "_ci"] = [100.0 * lo, 100.0 * hi]
        summary[bench] = entry
    for name, members in (("Avg", AVG_BENCHMARKS), ("OOD Avg", OOD_BENCHMARKS)):
        entry = {"benchmarks": list(members)}
        complete = all(b in summary for b in members)
        for metric in METRICS:
            if complete:
                entry[metric] = sum(summary[b][metric] for b in members) / len(members)
                lo, hi = _bootstrap([scores[b][metric] for b in members], n_boot, seed)
                entry[metric + "_ci"] = [100.0 * lo, 100.0 * hi]
            else:
                entry[metric], entry[metric + "_ci"] = None, None
        summary[name] = entry
    return summary


def _cell(entry: Optional[Mapping[str, Any]], metric: str) -> str:
    if not entry or entry.get(metric) is None:
        return "—"
    lo, hi = entry[metric + "_ci"]
    return f"{entry[metric]:.1f} [{lo:.1f}, {hi:.1f}]"


def markdown_table(summary: Mapping[str, Any], paper_row: Optional[Mapping[str, float]] = None,
                   label: str = "ours") -> str:
    """A markdown table in the paper's column order, one row per metric, cells `value [lo, hi]`.

    Args:
        summary: the output of `summarise`.
        paper_row: optional published numbers keyed by column header ("AIME24", ..., "OOD Avg");
            shown first as a "paper" row (missing columns as "—").
        label: row-name prefix of our rows.

    Returns:
        The table (a header, a separator, then the paper row and our avg@k, pass@k, maj@k rows),
        newline-terminated. A `k` line below names the responses per problem.
    """
    headers = [h for h, _ in TABLE_COLUMNS]
    lines = ["| | " + " | ".join(headers) + " |", "|---" * (len(headers) + 1) + "|"]
    if paper_row is not None:
        cells = [f"{paper_row[h]:.1f}" if paper_row.get(h) is not None else "—" for h in headers]
        lines.append("| paper | " + " | ".join(cells) + " |")
    for metric in METRICS:
        cells = [_cell(summary.get(key), metric) for _, key in TABLE_COLUMNS]
        lines.append(f"| {label} {metric} | " + " | ".join(cells) + " |")
    ks = ", ".join(f"{h} {summary[key]['k']}" for h, key in TABLE_COLUMNS[:6] if key in summary)
    lines.append("")
    lines.append(f"k (responses per problem): {ks or '—'}. Cells: percent, [95% bootstrap CI over problems].")
    return "\n".join(lines) + "\n"


def read_completions(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate a completions JSONL file.

    Raises:
        ValueError: a line that is not a JSON object with `benchmark` (a known name),
            `problem_id` (str or int) and `response` (str or null); the message names file:line.
    """
    records = []
    with open(path, encoding="utf-8") as f:
        try:
            lines = list(json_objects(f))
        except JSONLineError as error:
            raise ValueError(f"{path}:{error.line_no}: {error.reason}") from None
        for line_no, rec in lines:
            where = f"{path}:{line_no}"
            missing = [key for key in ("benchmark", "problem_id", "response") if key not in rec]
            if missing:
                raise ValueError(f"{where}: missing field(s) {missing}")
            if rec["benchmark"] not in BENCHMARKS:
                raise ValueError(f"{where}: unknown benchmark {rec['benchmark']!r}; expected one of {BENCHMARKS}")
            if not isinstance(rec["problem_id"], (str, int)) or isinstance(rec["problem_id"], bool):
                raise ValueError(f"{where}: problem_id must be a string or an integer")
            if rec["response"] is not None and not isinstance(rec["response"], str):
                raise ValueError(f"{where}: response must be a string or null")
            records.append(rec)
    if not records:
        raise ValueError(f"{path}: no completions")
    return records


def evaluate_completions(completions: str | Path, data_dir: str | Path | None = None,
                         out_dir: str | Path | None = None) -> dict[str, Any]:
    """Scoring mode: read completions, grade, summarise, write results.json and results.md.

    Returns:
        The summary (as in `summarise`).

    Raises:
        ValueError: malformed completions or unknown benchmark / problem ids.
        FileNotFoundError: a missing completions or benchmark file.
    """
    records = read_completions(completions)
    benches = list(dict.fromkeys(r["benchmark"] for r in records))
    golds = {b: gold_answers(load_benchmark(b, data_dir)) for b in benches}
    per_benchmark = score_completions(records, golds)
    summary = summarise(per_benchmark)
    out = Path(out_dir) if out_dir is not None else Path(completions).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    result = {"completions": str(completions), "summary": summary,
              "problems": {b: [asdict(p) for p in ps] for b, ps in per_benchmark.items()}}
    (out / "results.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "results.md").write_text(markdown_table(summary), encoding="utf-8")
    return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; returns the exit status (2 on bad input, with a one-line message)."""
    parser = argparse.ArgumentParser(prog="python -m cpmobius.evaluation", description=__doc__.split("\n")[0])
    parser.add_argument("--completions", required=True, help="JSONL: benchmark, problem_id, response per line")
    parser.add_argument("--data-dir", default=None, help="folder of <name>/<name>.jsonl (default: ../shared/data/eval)")
    parser.add_argument("--out", default=None, help="output folder (default: the completions file's folder)")
    args = parser.parse_args(argv)
    try:
        summary = evaluate_completions(args.completions, args.data_dir, args.out)
    except (ValueError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(markdown_table(summary), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
