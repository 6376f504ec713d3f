r"""Benchmark scoring, per problem: graded responses, avg@k, pass@k, maj@k (stage: evaluation).

Scoring only (no generation): completions in, per-problem verdicts out; `cpmobius.eval.summary`
turns them into per-benchmark numbers with CIs, `cpmobius.eval.report` into the paper's table.
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
  answer with grader=cpmobius; an unterminated `\boxed{...` has none anyway.
* A response (or pseudo-label) is correct if it matches the gold `answer` or any `alt_answers`.
* Grading failures: a response whose verdict was not reached (status "timeout" or "error" on one
  of its accepted answers, none correct) counts as wrong, and is counted per benchmark
  (`grading`: responses per status). A benchmark whose every grade failed raises `GradingError`
  (`check_batch`, as validation does in training) rather than report zeros.

Default k (the released protocol): 32, 32, 10, 5, 5, 5 for AIME24,
AIME25, AMC, MATH-500, Minerva, OlympiadBench (`DEFAULT_K`); the reported k is what the
completions hold, and `k_protocol` is listed beside it.

Answer keys and graders: `answer_key` is "corrected" (default) or "released"
(`cpmobius.eval.data.gold_answers`); `grader` is "cpmobius" (the project's grader) or "released"
(its imitation of the released evaluation grader, which also keeps only the first accepted answer).
`cpmobius.eval.summary.score_run` can grade the same completions with both and list the problems
where they disagree (`grader_disagreements`).

OOD Avg leaves out the benchmark that drove Δt in training: AMC in the paper (`PAPER_VALIDATION_SET`),
another of the six when a run validated on it (`ood_benchmarks`, CLI `--validation-set`).

Departures from the released evaluation (# CPMöbius:): the released code has no aggregation script
and reports no CIs; its grader strips answers with `str.strip` on phrases and checks only the first
Minerva answer (our grader and the `alt_answers` fix both); its Minerva key holds the previous
sub-problem's answer on 32 rows (MANIFEST §2), corrected by default here; OOD Avg can leave out a
validation set other than AMC (default: AMC, the paper's).

Published numbers: `cpmobius.eval.report.PAPER_RESULTS`. CLI: `python -m cpmobius.eval`
(`cpmobius.eval.cli`; completions files are read by `cpmobius.eval.completions.read_completions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from cpmobius.eval.data import gold_answers
from cpmobius.grading import check_batch, extract_answer, grade_batch, majority_vote

AVG_BENCHMARKS = ("aime24", "aime25", "amc", "math500", "minerva_math", "olympiadbench")
"""The six benchmarks of the paper's Avg column."""

PAPER_VALIDATION_SET = "amc"
"""The paper's validation set: AMC drives Δt in training, so the paper's OOD Avg leaves it out."""


def ood_benchmarks(validation_set: str = PAPER_VALIDATION_SET) -> tuple[str, ...]:
    """The benchmarks of OOD Avg: the six of Avg without the one that drove Δt in training.

    Args:
        validation_set: the benchmark the trained Player was validated on (`validation.dataset`),
            one of `AVG_BENCHMARKS`; "amc" (default) is the paper's.

    Returns:
        The other five, in the paper's column order.

    Raises:
        ValueError: `validation_set` is not one of `AVG_BENCHMARKS`.
    """
    if validation_set not in AVG_BENCHMARKS:
        raise ValueError(
            f"unknown validation set {validation_set!r}: --validation-set takes one of "
            f"{', '.join(AVG_BENCHMARKS)} (the benchmark that drove Δt in training, left out of OOD Avg)"
        )
    # CPMöbius: the paper fixes AMC here (its validation set); with another Δt set that one is in-distribution
    # instead and is the one left out. The default, amc, is the paper's OOD Avg.
    return tuple(b for b in AVG_BENCHMARKS if b != validation_set)


OOD_BENCHMARKS = ood_benchmarks()
"""The five benchmarks of the paper's OOD Avg column (Avg without AMC)."""

NO_MINERVA_AVG = "Avg w/o Minerva"
"""The column averaging the six without Minerva, whose released answer key is wrong on 32 of its 272 problems
(the previous sub-problem's answer; MANIFEST of the benchmark copies) and whose gains decide the released table's
ranking: CPMöbius leads R-Zero and RENT on Qwen2.5-Math-1.5B by 1.7 points Avg, by 0.2-0.3 without Minerva."""


def averages(validation_set: str = PAPER_VALIDATION_SET) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The averaged columns and their members: Avg (the six), OOD Avg (`ood_benchmarks`), and Avg w/o Minerva.

    Raises:
        ValueError: `validation_set` is not one of `AVG_BENCHMARKS`.
    """
    # CPMöbius: the third column is ours, not the paper's; it is computed for the published rows too.
    return (
        ("Avg", AVG_BENCHMARKS),
        ("OOD Avg", ood_benchmarks(validation_set)),
        (NO_MINERVA_AVG, tuple(b for b in AVG_BENCHMARKS if b != "minerva_math")),
    )


DEFAULT_K = {
    "aime24": 32,
    "aime25": 32,
    "amc": 10,
    "math500": 5,
    "minerva_math": 5,
    "olympiadbench": 5,
    "amc23": 32,
    "demo": 4,
}
"""Responses per problem of the released protocol (amc23 is not in the paper; 32 as for AIME; the
built-in demo benchmark 4)."""

TABLE_COLUMNS = (
    ("AIME24", "aime24"),
    ("AIME25", "aime25"),
    ("AMC", "amc"),
    ("MATH-500", "math500"),
    ("Minerva", "minerva_math"),
    ("OlympiadBench", "olympiadbench"),
    ("Avg", "Avg"),
    ("OOD Avg", "OOD Avg"),
    (NO_MINERVA_AVG, NO_MINERVA_AVG),
)
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


def score_completions(
    records: Sequence[Mapping[str, Any]], golds: Mapping[str, Mapping[str, Sequence[str]]], grader: str = "cpmobius"
) -> dict[str, list[ProblemScores]]:
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

    # One grading batch per problem: its (accepted answer, response) pairs. The grader's wall-clock
    # deadline is per batch, so a whole run in one batch would mark every comparison still queued at
    # the deadline as a timeout (counted wrong): on 2 cores a 3706-response run lost 108 verdicts that
    # a 16-core machine reached, and its MATH-500 avg@k read 8.3 instead of 8.4. Per problem, the
    # deadline bounds that problem's comparisons only, so the scores do not depend on the machine.
    where, results = [], []
    for bench, problems in grouped.items():
        for pid, responses in problems.items():
            pairs = [(j, g, gold, resp) for j, resp in enumerate(responses) for g, gold in enumerate(golds[bench][pid])]
            where += [(bench, pid, j, g) for j, g, _, _ in pairs]
            results += grade_batch([gold for *_, gold, _ in pairs], [resp for *_, resp in pairs], mode=grader).results
    for bench in grouped:
        # As training's validation does: a benchmark whose every grade failed is not reported as zeros.
        check_batch(
            [res for (b, *_), res in zip(where, results) if b == bench],
            context=f"evaluation of {bench}, grader={grader}; no results written",
        )
    out: dict[str, dict[str, ProblemScores]] = {
        bench: {
            pid: ProblemScores(pid, list(golds[bench][pid]), [False] * len(resps), [None] * len(resps))
            for pid, resps in problems.items()
        }
        for bench, problems in grouped.items()
    }
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
                ok for ans, ok in zip(ps.extracted, ps.correct) if ans == ps.maj_label
            )
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
    appended). An unterminated `\boxed{...` already has no answer (the grader's rule).
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


def golds_for(
    rows_by_benchmark: Mapping[str, Sequence[Mapping[str, Any]]], answer_key: str, grader: str
) -> dict[str, dict[str, list[str]]]:
    """benchmark → problem id → accepted answers for one answer key and one grader.

    The released grader used only the first element of a list-valued key (notes §5.2), so with
    `grader=released` only the first accepted answer is kept.
    """
    return {
        b: gold_answers(rows, answer_key, first_only=(grader == "released")) for b, rows in rows_by_benchmark.items()
    }


def grader_disagreements(
    primary: Mapping[str, Sequence[ProblemScores]],
    other: Mapping[str, Sequence[ProblemScores]],
    responses: Mapping[tuple[str, str], Sequence[Optional[str]]],
) -> list[dict[str, Any]]:
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
            out.append(
                {
                    "benchmark": bench,
                    "problem_id": p.problem_id,
                    "golds": p.golds,
                    "golds_other": q.golds,
                    "n": len(p.correct),
                    "n_disagree": len(differ),
                    "example_extracted": p.extracted[j],
                    "example_extracted_other": q.extracted[j],
                    "example_correct": p.correct[j],
                    "example_correct_other": q.correct[j],
                    "example_response_tail": text[-300:],
                }
            )
    return out
