r"""Benchmark scoring: avg@k, pass@k, maj@k, bootstrap CIs, the paper's table (stage: evaluation).

Scoring only (no generation): completions in, per-benchmark numbers and a markdown table out.
Every verdict comes from the project's one grader (`cpmobius.grading`): `grade_batch` for
response-vs-gold, `majority_vote` for maj@k.

Metrics (all in percent, per benchmark = mean over its problems; a problem with n responses of
which c are correct):

* avg@k: c / n, the mean accuracy of single samples (the paper's reported number).
* pass@k: the unbiased estimator 1 − C(n−c, k) / C(n, k) (Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code", eq. 1). Here k is the number of responses actually present,
  so it is "any correct". Every problem of a benchmark must have the same n: uneven counts are an
  error naming the problems, unless accepted (`allow_uneven`, CLI `--allow-uneven-k`); then k is
  the smallest n and `n_min` / `n_max` are reported.
* maj@k: the majority vote of the problem's n responses (`majority_vote`, equivalence clusters)
  is correct iff its pseudo-label (one of the responses' extracted answers) was graded correct for
  those responses; a tie or no label (nothing answered) is wrong. "No answer" never votes, with
  either grader (the released grader's empty extraction included), so maj@k <= pass@k.
* A response stopped by the token limit (`finish_reason` "length") while its final answer was
  still being written (`answer_cut_off`: `... \boxed 1` could have become `\boxed 12`) has no
  answer with grader=cpmobius; an unterminated `\boxed{...` has none anyway (BR-13).
* A response (or pseudo-label) is correct if it matches the gold `answer` or any `alt_answers`.
* 95% confidence intervals: percentile bootstrap over problems (1000 resamples, seed 0).
* Avg: the unweighted mean of the per-benchmark numbers of the six paper benchmarks (AIME24,
  AIME25, AMC, MATH-500, Minerva, OlympiadBench); OOD Avg: the same over the five without AMC
  (AMC is the training validation set, so it is in-distribution for Δt). Their CIs come from a
  stratified bootstrap (problems resampled within each benchmark, then the macro mean).
* Coverage: each benchmark records the problems scored (`n_problems`), the problems of the
  evaluated set (`n_problems_expected`: the benchmark, or its first N problems with `--limit N`)
  and of the whole benchmark (`n_problems_benchmark`); `complete` = every problem of the evaluated
  set is scored. Avg / OOD Avg are None, with a `reason`, unless every benchmark they average is
  present and complete; `allow_partial` (CLI `--allow-partial`) averages partial benchmarks
  deliberately and lists them in `partial_benchmarks`. A `--limit N` run is complete for its slice
  (the table's footnote says it is a slice, not comparable with the paper).
* Grading failures: a response whose verdict was not reached (status "timeout" or "error" on one
  of its accepted answers, none correct) counts as wrong, and is counted per benchmark
  (`grading`: responses per status). A benchmark whose every grade failed raises `GradingError`
  (`check_batch`, as validation does in training) rather than report zeros.

Default k (the released protocol, notes/upstream_cpmobius.md §5): 32, 32, 10, 5, 5, 5 for AIME24,
AIME25, AMC, MATH-500, Minerva, OlympiadBench (`DEFAULT_K`); the reported k is what the
completions hold, and `k_protocol` is listed beside it.

Answer keys and graders: `answer_key` is "corrected" (default) or "released"
(`eval_data.gold_answers`); `grader` is "cpmobius" (the project's grader) or "released" (its
imitation of the released evaluation grader, which also keeps only the first accepted answer).
`score_run` can grade the same completions with both and list the problems where they disagree.

Published numbers (`PAPER_RESULTS`): only the Avg / OOD Avg values quoted in
notes/upstream_cpmobius.md §5.4 (the released README table); every other paper cell is "—".

Departures from the released evaluation (# CPMöbius:): the released code has no aggregation script
and reports no CIs; its grader strips answers with `str.strip` on phrases and checks only the first
Minerva answer (our grader and the `alt_answers` fix both); its Minerva key holds the previous
sub-problem's answer on 32 rows (MANIFEST §2), corrected by default here.

CLI: `python -m cpmobius.evaluate` (generation and scoring; `--completions FILE.jsonl` scores
existing completions: one JSON object per line with at least `benchmark`, `problem_id` (the
benchmark row's `id`) and `response` (a string, or null)). `python -m cpmobius.evaluation` is the
same command, kept for old invocations.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from cpmobius.eval_data import BENCHMARKS, default_data_dir, gold_answers, load_benchmark  # noqa: F401
from cpmobius.grading import check_batch, extract_answer, grade_batch, majority_vote
from cpmobius.jsonl import JSONLineError, json_objects

# BENCHMARKS, default_data_dir, gold_answers, load_benchmark: re-exported from eval_data for old imports.

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

GRADERS = ("cpmobius", "released")
"""`grader=cpmobius`: the project's one grader; `grader=released`: its imitation of the released
evaluation grader (`cpmobius.grading` "released mode": `match_answer`, the `str.strip` quirk, gold
`lstrip("0")`, first answer of a list only)."""

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
        statuses: (n,) per response, "ok" (a verdict), "no_answer", or "timeout" / "error" (the
            grader reached no verdict on an accepted answer and none matched: counted wrong).
    """

    problem_id: str
    golds: list[str]
    correct: list[bool]
    extracted: list[Optional[str]]
    maj_label: Optional[str] = None
    maj_correct: bool = False
    statuses: list[str] = field(default_factory=list)


def score_completions(records: Sequence[Mapping[str, Any]],
                      golds: Mapping[str, Mapping[str, Sequence[str]]],
                      grader: str = "cpmobius") -> dict[str, list[ProblemScores]]:
    """Grade every response and take each problem's majority vote.

    Args:
        records: dicts with `benchmark`, `problem_id`, `response` (str or None); k per problem,
            in any order.
        golds: benchmark → problem id → accepted answers (see `gold_answers`).
        grader: one of `GRADERS` (the grading mode of `grade_batch` and `majority_vote`).

    Returns:
        benchmark → `ProblemScores` per problem (in first-seen order), responses in record order.

    Raises:
        ValueError: a record names a benchmark or problem id missing from `golds`.
        cpmobius.grading.GradingError: every grade of a benchmark failed (timeouts/errors;
            `check_batch`), so its zeros would mean nothing.
    """
    if grader not in GRADERS:
        raise ValueError(f"unknown grader {grader!r}; expected one of {GRADERS}")
    grouped: dict[str, dict[str, list[Optional[str]]]] = {}
    for i, rec in enumerate(records):
        bench, pid = rec["benchmark"], str(rec["problem_id"])
        if bench not in golds:
            raise ValueError(f"record {i}: no gold answers for benchmark {bench!r}")
        if pid not in golds[bench]:
            raise ValueError(f"record {i}: benchmark {bench!r} has no problem {pid!r}")
        response = rec["response"]
        if grader == "cpmobius" and rec.get("finish_reason") == "length" and answer_cut_off(response):
            response = None  # CPMöbius: the final answer was still being written at the token limit
        grouped.setdefault(bench, {}).setdefault(pid, []).append(response)

    # One grading batch: every (accepted answer, response) pair.
    pair_golds, pair_resps, where = [], [], []
    for bench, problems in grouped.items():
        for pid, responses in problems.items():
            for j, resp in enumerate(responses):
                for g, gold in enumerate(golds[bench][pid]):
                    pair_golds.append(gold)
                    pair_resps.append(resp)
                    where.append((bench, pid, j, g))
    results = grade_batch(pair_golds, pair_resps, mode=grader).results
    for bench in grouped:
        # As training's validation does: a benchmark whose every grade failed is not reported as zeros.
        check_batch([res for (b, *_), res in zip(where, results) if b == bench],
                    context=f"evaluation of {bench}, grader={grader}; no results written")
    out: dict[str, dict[str, ProblemScores]] = {
        bench: {pid: ProblemScores(pid, list(golds[bench][pid]), [False] * len(resps), [None] * len(resps))
                for pid, resps in problems.items()}
        for bench, problems in grouped.items()}
    pair_statuses: dict[tuple[str, str, int], list[str]] = {}
    for (bench, pid, j, g), res in zip(where, results):
        ps = out[bench][pid]
        ps.correct[j] = ps.correct[j] or res.correct
        pair_statuses.setdefault((bench, pid, j), []).append(res.status)
        if g == 0:
            # "No answer" never votes: the released grader reports it as "" (status no_answer or not).
            ps.extracted[j] = res.extracted if res.extracted and res.status != "no_answer" else None
    for (bench, pid, j), statuses in pair_statuses.items():
        ps = out[bench][pid]
        ps.statuses.append(response_status(ps.correct[j], statuses))

    # maj@k: vote on the extracted answers. The pseudo-label is one of the responses' own extracted
    # answers, so its verdict is theirs (re-grading it as a new `\boxed{label}` response would run the
    # released grader's heuristics a second time on an already extracted answer).
    for problems in out.values():
        for ps in problems.values():
            # Unanswered responses are left out of the vote (the released vote would let a "None" majority
            # void the label; maj@k counts answers only, with either grader).
            answered = [a for a in ps.extracted if a is not None]
            ps.maj_label = majority_vote(answers=answered, mode=grader).pseudo_label
            ps.maj_correct = ps.maj_label is not None and any(
                ok for ans, ok in zip(ps.extracted, ps.correct) if ans == ps.maj_label)
    return {bench: list(problems.values()) for bench, problems in out.items()}


def response_status(correct: bool, pair_statuses: Sequence[str]) -> str:
    """One response's grading status from its (accepted answer) pairs' statuses.

    "ok" when correct or every pair reached a verdict; else "error" / "timeout" when a pair failed
    (a verdict that might have been "correct" was not reached); "no_answer" when nothing was graded.
    """
    if correct:
        return "ok"
    for failure in ("error", "timeout"):
        if failure in pair_statuses:
            return failure
    return "no_answer" if pair_statuses and all(s == "no_answer" for s in pair_statuses) else "ok"


def answer_cut_off(response: Optional[str]) -> bool:
    r"""Whether a response stopped by the token limit ends while its final answer is still being written.

    The final answer of such a response is a guess at a prefix: `... \boxed 1` may have been going
    to be `\boxed 12`. Detected as "the extracted answer changes if the text went on" (one more digit
    appended). An unterminated `\boxed{...` already has no answer (the grader's rule, BR-13).
    """
    if not response:
        return False
    return extract_answer(response) != extract_answer(response + "0")


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
    return (f"{bench}: uneven responses per problem (n_min={min(ns.values())}, n_max={n_max}); problems with "
            f"fewer than {n_max}: {', '.join(short[:limit])}{more}. Complete the completions, or pass "
            "--allow-uneven-k to accept them (pass@k then uses k = n_min)")


def _benchmark_entry(problems: Sequence[ProblemScores], expected: int, in_benchmark: int) -> dict[str, Any]:
    """Counts of one benchmark: coverage, responses per problem, grading statuses."""
    ns = [len(p.correct) for p in problems]
    grading = dict.fromkeys(("ok", "no_answer", "timeout", "error"), 0)
    for p in problems:
        for status in p.statuses:
            grading[status] += 1
    return {"n_problems": len(problems), "n_problems_expected": expected, "n_problems_benchmark": in_benchmark,
            "complete": len(problems) >= expected, "k": min(ns), "n_min": min(ns), "n_max": max(ns),
            "n_responses": sum(ns), "grading": grading}


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


def summarise(per_benchmark: Mapping[str, Sequence[ProblemScores]], n_boot: int = 1000, seed: int = 0, *,
              problems_expected: Optional[Mapping[str, int]] = None,
              problems_in_benchmark: Optional[Mapping[str, int]] = None,
              allow_partial: bool = False, allow_uneven: bool = False) -> dict[str, Any]:
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

    Returns:
        {benchmark: {"n_problems", "n_problems_expected", "n_problems_benchmark", "complete", "k",
         "n_min", "n_max", "k_protocol", "n_responses", "grading", metric, metric + "_ci"},
         "Avg": {...}, "OOD Avg": {...}}. k is the responses per problem (pass@k uses it); Avg /
        OOD Avg are the unweighted means of the per-benchmark numbers over `AVG_BENCHMARKS` /
        `OOD_BENCHMARKS`, with a stratified-bootstrap CI, or None with a `reason` (a benchmark
        missing, or partial without `allow_partial`).

    Raises:
        ValueError: uneven responses per problem without `allow_uneven` (names benchmark and problems).
    """
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
    for name, members in (("Avg", AVG_BENCHMARKS), ("OOD Avg", OOD_BENCHMARKS)):
        reason = _average_blocked(summary, members, allow_partial)
        entry = {"benchmarks": list(members), "reason": reason,
                 "partial_benchmarks": [] if reason else [b for b in members if not summary[b]["complete"]]}
        for metric in METRICS:
            if reason is None:
                # From the per-benchmark numbers (their unscaled means), as the bootstrap computes them.
                entry[metric] = 100.0 * _macro_mean([scores[b][metric] for b in members])
                lo, hi = _bootstrap([scores[b][metric] for b in members], n_boot, seed)
                entry[metric + "_ci"] = [100.0 * lo, 100.0 * hi]
            else:
                entry[metric], entry[metric + "_ci"] = None, None
        summary[name] = entry
    return summary


def read_completions(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate a completions JSONL file.

    Raises:
        ValueError: a file that is not UTF-8, a line that is not a JSON object with `benchmark`
            (a known name), `problem_id` (str or int) and `response` (str or null), or a repeated
            (benchmark, problem_id, sample) when records carry `sample`; the message names file:line.
        OSError: the file cannot be read.
    """
    records = []
    seen: dict[tuple, int] = {}
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line_no = raw.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}:{line_no}: not UTF-8 text (byte {raw[error.start]:#04x})") from None
    try:
        # Split on "\n" only: `str.splitlines` also splits inside JSON strings at U+2028, U+0085, ...
        lines = list(json_objects(text.split("\n")))
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
        if "sample" in rec:
            key = (rec["benchmark"], str(rec["problem_id"]), rec["sample"], rec.get("model"))
            if key in seen:
                raise ValueError(f"{where}: duplicate of line {seen[key]} (same benchmark, problem_id, sample)")
            seen[key] = line_no
        records.append(rec)
    if not records:
        raise ValueError(f"{path}: no completions")
    return records


def golds_for(rows_by_benchmark: Mapping[str, Sequence[Mapping[str, Any]]], answer_key: str,
              grader: str) -> dict[str, dict[str, list[str]]]:
    """benchmark → problem id → accepted answers for one answer key and one grader.

    The released grader used only the first element of a list-valued key (notes §5.2), so with
    `grader=released` only the first accepted answer is kept.
    """
    return {b: gold_answers(rows, answer_key, first_only=(grader == "released"))
            for b, rows in rows_by_benchmark.items()}


def grader_disagreements(primary: Mapping[str, Sequence[ProblemScores]], other: Mapping[str, Sequence[ProblemScores]],
                         responses: Mapping[tuple[str, str], Sequence[Optional[str]]]) -> list[dict[str, Any]]:
    """Problems where two gradings of the same responses disagree on at least one response.

    Args:
        primary, other: `score_completions` outputs for the same records (e.g. grader=cpmobius and
            grader=released).
        responses: (benchmark, problem id) → the responses in record order (for the examples).

    Returns:
        One dict per problem with a disagreement: benchmark, problem_id, golds of each grading,
        n (responses), n_disagree, and the first disagreeing response's extracted answers and verdicts.
    """
    out = []
    for bench, problems in primary.items():
        others = {p.problem_id: p for p in other.get(bench, [])}
        for p in problems:
            q = others.get(p.problem_id)
            if q is None:
                continue
            differ = [j for j, (a, b) in enumerate(zip(p.correct, q.correct)) if a != b]
            if not differ:
                continue
            j = differ[0]
            text = (responses.get((bench, p.problem_id)) or [None] * (j + 1))[j] or ""
            out.append({"benchmark": bench, "problem_id": p.problem_id, "golds": p.golds, "golds_other": q.golds,
                        "n": len(p.correct), "n_disagree": len(differ), "example_extracted": p.extracted[j],
                        "example_extracted_other": q.extracted[j], "example_correct": p.correct[j],
                        "example_correct_other": q.correct[j], "example_response_tail": text[-300:]})
    return out


def score_run(records: Sequence[Mapping[str, Any]], rows_by_benchmark: Mapping[str, Sequence[Mapping[str, Any]]],
              answer_key: str = "corrected", grader: str = "cpmobius", compare: bool = True,
              n_boot: int = 1000, seed: int = 0, *, benchmark_sizes: Optional[Mapping[str, int]] = None,
              allow_partial: bool = False, allow_uneven: bool = False) -> dict[str, Any]:
    """Grade a run's completions and summarise them; optionally grade again with the other grader.

    Args:
        records: completion records (`benchmark`, `problem_id`, `response`).
        rows_by_benchmark: benchmark → the rows of the evaluated set (uniform schema): a benchmark
            whose rows are not all in `records` is partial (see `summarise`).
        answer_key: "corrected" or "released" (`eval_data.gold_answers`).
        grader: the reported grader, one of `GRADERS`.
        compare: also grade with the other grader and list the disagreements.
        n_boot, seed: bootstrap settings.
        benchmark_sizes: benchmark → problems of the whole benchmark, when the rows are a slice.
        allow_partial, allow_uneven: see `summarise`.

    Returns:
        {"answer_key", "grader", "summary", "problems", and with `compare`: "other_grader",
        "other_summary", "disagreements"} (summaries as in `summarise`).

    Raises:
        ValueError: unknown key / grader, records naming unknown benchmarks or problems, uneven
            responses per problem without `allow_uneven`.
        cpmobius.grading.GradingError: every grade of a benchmark failed.
    """
    coverage = dict(problems_expected={b: len(rows) for b, rows in rows_by_benchmark.items()},
                    problems_in_benchmark=benchmark_sizes, allow_partial=allow_partial, allow_uneven=allow_uneven)
    per_benchmark = score_completions(records, golds_for(rows_by_benchmark, answer_key, grader), grader)
    result: dict[str, Any] = {"answer_key": answer_key, "grader": grader,
                              "summary": summarise(per_benchmark, n_boot, seed, **coverage),
                              "problems": {b: [asdict(p) for p in ps] for b, ps in per_benchmark.items()}}
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m cpmobius.evaluation` = `python -m cpmobius.evaluate` (kept for old commands)."""
    from cpmobius.evaluate import main as evaluate_main

    return evaluate_main(argv)


if __name__ == "__main__":
    sys.exit(main())
