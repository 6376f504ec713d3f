"""Grading results: statuses, verdict types, the batch guard (stage: grading).

The types every other grading module returns, and `check_batch`, which refuses to train on a
batch whose every score is an error or a timeout. No departures from the paper here; the status
vocabulary itself is ours (see "Statuses and timeouts" in the package docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

DEFAULT_TIMEOUT_S = 10.0
"""Default wall-clock budget (seconds) of one grading call or batch, pool start-up excluded."""

STATUSES = ("ok", "no_answer", "timeout", "error")
"""Every `GradeResult.status` value."""

MODES = ("cpmobius", "released")
"""Every grading mode: our policy, or the released code's behaviour."""


class GradingError(RuntimeError):
    """Raised when a batch cannot be trusted (every score is an error or a timeout)."""


@dataclass(frozen=True)
class GradeResult:
    """Verdict on one response.

    Attributes:
        correct: True only if status is "ok" and the answer matches the gold.
        extracted: the extracted final answer (raw, before canonicalisation), or None.
        status: one of `STATUSES`.
    """

    correct: bool
    extracted: str | None
    status: str

    @property
    def score(self) -> float:
        """1.0 if correct else 0.0 (the binary reward)."""
        return 1.0 if self.correct else 0.0


@dataclass(frozen=True)
class BatchGrades:
    """Verdicts on a batch.

    Attributes:
        results: one `GradeResult` per (gold, response) pair, in input order.
        counts: number of results per status, every key of `STATUSES` present.
    """

    results: list[GradeResult]
    counts: dict[str, int]

    @property
    def scores(self) -> list[float]:
        """Per-pair binary scores, (len(results),) floats in {0.0, 1.0}."""
        return [r.score for r in self.results]


@dataclass(frozen=True)
class VoteResult:
    """Majority vote over one group of responses.

    Attributes:
        pseudo_label: the majority answer (a raw extracted string of the winning cluster), or None
            (no answered response, or a tie at the top).
        pass_rate: size of the largest cluster / number of responses n (reported on a tie too;
            0.0 when nothing was answered). Released mode: 0.0 on a tie or a None majority.
        clusters: response indices per cluster, largest first (ties by representative string);
            responses without an answer are in no cluster.
        agrees: per response, whether it belongs to the label's cluster (all False without a label);
            use this as the Player's binary reward so reward and clustering share one rule.
        answers: per response, the extracted answer or None.
        n_timeouts: comparisons that hit the wall-clock/cost budget (treated as "different").
        n_errors: comparisons the grader failed on (treated as "different").
    """

    pseudo_label: str | None
    pass_rate: float
    clusters: list[list[int]]
    agrees: list[bool] = field(default_factory=list)
    answers: list[str | None] = field(default_factory=list)
    n_timeouts: int = 0
    n_errors: int = 0


def check_mode(mode: str) -> None:
    """Raise ValueError unless `mode` is one of `MODES`."""
    if mode not in MODES:
        raise ValueError(f"unknown grading mode {mode!r}; expected one of {MODES}")


def count_statuses(results: Iterable[GradeResult]) -> dict[str, int]:
    """Number of results per status, every key of `STATUSES` present."""
    counts = dict.fromkeys(STATUSES, 0)
    for r in results:
        counts[r.status] += 1
    return counts


def check_batch(results: BatchGrades | Sequence[GradeResult], *, context: str = "") -> dict[str, int]:
    """Refuse to train on zeros: raise when every result of a non-empty batch is an error/timeout.

    Args:
        results: a `BatchGrades` or a sequence of `GradeResult`.
        context: a short name for the message (e.g. "player reward, step 12").

    Returns:
        Per-status counts (every key of `STATUSES`).

    Raises:
        GradingError: the batch is non-empty and has no "ok"/"no_answer" result.
    """
    items = results.results if isinstance(results, BatchGrades) else list(results)
    counts = count_statuses(items)
    if items and counts["timeout"] + counts["error"] == len(items):
        raise GradingError(
            f"refusing to train on zeros{f' ({context})' if context else ''}: all {len(items)} "
            f"grades failed ({counts['timeout']} timeouts, {counts['error']} errors); check the "
            "grader workers (math-verify installed?) and the timeout budget"
        )
    return counts
