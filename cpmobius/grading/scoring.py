r"""Scoring: gold vs response verdicts, one or a batch (stage: grading).

The Player's reward on known answers, validation and Δt, and the benchmark evaluation all call
`grade` / `grade_batch`. Extraction, canonicalisation, then `equivalence.judge` (directional,
gold first); `released` mode runs the released evaluation grader instead.

Departures from the paper / released code: a response without a complete final `\boxed{}` has no
answer; a timeout or grader failure is a status, never a silent 0.
"""

from __future__ import annotations

import logging
from typing import Sequence

from . import released
from .canonical import canonicalize, option_label
from .equivalence import judge
from .extraction import extract_answer
from .placeholders import is_placeholder
from .results import DEFAULT_TIMEOUT_S, BatchGrades, GradeResult, check_mode, count_statuses

_LOG = logging.getLogger(__name__)


def grade(
    gold: str, response: str | None, *, mode: str = "cpmobius", timeout_s: float = DEFAULT_TIMEOUT_S
) -> GradeResult:
    r"""Grade one response against a gold answer.

    Args:
        gold: the reference answer (LaTeX or plain, not boxed; a boxed gold is unwrapped).
        response: the full response text (only its final `\boxed{}` is read), or None.
        mode: "cpmobius" (default policy) or "released" (the released evaluation grader).
        timeout_s: wall-clock budget in seconds for the slow path (pool start-up excluded).

    Returns:
        `GradeResult(correct, extracted, status)`.

    Raises:
        ValueError: unknown mode.
    """
    return grade_batch([gold], [response], mode=mode, timeout_s=timeout_s).results[0]


def grade_batch(
    golds: Sequence[str],
    responses: Sequence[str | None],
    *,
    mode: str = "cpmobius",
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> BatchGrades:
    """Grade responses against golds; one shared deadline for every slow comparison.

    Fast-path pairs are decided in-process; identical (gold, answer) pairs are judged once; the
    remaining comparisons run in parallel in the worker pool, cheapest-looking first, and any not
    decided `timeout_s` seconds after the pool is ready get status "timeout" (their workers are
    killed and replaced). Timeouts and errors are logged at WARNING.

    Args:
        golds: (n,) reference answers.
        responses: (n,) response texts (None counts as no answer).
        mode: "cpmobius" or "released".
        timeout_s: wall-clock budget in seconds of the whole batch's slow path.

    Returns:
        `BatchGrades` with (n,) results and per-status counts.

    Raises:
        ValueError: unknown mode or len(golds) != len(responses).
    """
    check_mode(mode)
    if len(golds) != len(responses):
        raise ValueError(f"{len(golds)} golds but {len(responses)} responses")
    if mode == "released":
        results = released.grade_batch(golds, responses, timeout_s)
    else:
        results = [GradeResult(False, None, "error")] * len(golds)
        pairs, where = [], []
        for i, (gold, resp) in enumerate(zip(golds, responses)):
            extracted = extract_answer(resp) if resp else None
            gold_c = canonicalize(str(gold)) if gold is not None else ""
            if is_placeholder(gold_c):
                _LOG.warning("grading error: invalid gold answer %.80r", gold)
                results[i] = GradeResult(False, extracted, "error")
            elif extracted is None:
                results[i] = GradeResult(False, None, "no_answer")
            else:
                answer_c = canonicalize(extracted)
                if len(gold_c) == 1 and gold_c in "ABCDE" and (label := option_label(extracted)) is not None:
                    answer_c = label  # CPMöbius: against a letter gold, `\text{(B) } 12` answers "B", not 12
                pairs.append((gold_c, answer_c))
                where.append((i, extracted))
        for (i, extracted), (status, ok) in zip(where, judge(pairs, symmetric=False, timeout_s=timeout_s)):
            results[i] = GradeResult(ok and status == "ok", extracted, status)
    counts = count_statuses(results)
    if counts["timeout"] or counts["error"]:
        _LOG.warning("grade_batch: %s", counts)
    return BatchGrades(results, counts)
