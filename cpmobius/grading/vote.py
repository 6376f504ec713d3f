"""Majority vote: one group of responses → pseudo-label, pass rate, clusters (stage: grading).

Used by the difficulty filter and the Player's reward on Coach problems (paper §3). Answers are
canonicalised; identical canonical strings form one unique answer; uniques, visited by
(descending count, canonical string), join the first cluster whose representative is equivalent,
else open a new one ("Majority vote" in the package docstring).

Departures from the paper / released code (marked `# CPMöbius:`): clusters by equivalence, not raw
strings; "no answer" never votes and never becomes the label.
"""

from __future__ import annotations

import time
from typing import Sequence

from . import released
from .canonical import canonicalize
from .equivalence import judge
from .extraction import extract_answer
from .fast_path import TOO_BIG, fast_verdict
from .placeholders import is_placeholder
from .results import DEFAULT_TIMEOUT_S, VoteResult, check_mode


def majority_vote(
    responses: Sequence[str | None] | None = None,
    *,
    answers: Sequence[str | None] | None = None,
    truncated: Sequence[bool] | None = None,
    mode: str = "cpmobius",
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> VoteResult:
    r"""Majority vote of one group (the pseudo-label of a Coach problem).

    Args:
        responses: (n,) response texts; their final answers are extracted. Give this or `answers`.
        answers: (n,) already extracted answers (None = no answer).
        truncated: optional (n,) flags; truncated responses (stopped by length) never vote and
            count as unanswered (denominator stays n). A CPMöbius rule.
        mode: "cpmobius" (equivalence clusters) or "released" (exact-string vote of the released
            code on verl's `last_boxed_only_string`).
        timeout_s: wall-clock budget in seconds for all slow comparisons of this vote.

    Returns:
        `VoteResult`; invariant (label, pass rate, partition) to any permutation of the responses.

    Raises:
        ValueError: unknown mode, both or neither of responses/answers, or a length mismatch.

    Source: paper §3 (majority vote → pseudo-label y*); released `MajorityVoteRewardManager`.
    """
    check_mode(mode)
    if (responses is None) == (answers is None):
        raise ValueError("give exactly one of responses= or answers=")
    items = list(responses if responses is not None else answers)  # type: ignore[arg-type]
    n = len(items)
    if truncated is not None and len(truncated) != n:
        raise ValueError(f"{n} responses but {len(truncated)} truncated flags")
    if mode == "released":
        return released.vote(items, answers is not None, truncated)
    extracted = list(items) if answers is not None else [extract_answer(r) for r in items]
    # CPMöbius: cluster by equivalence (released: raw strings); "no answer" never votes.
    groups = _group_by_canonical(extracted, truncated)
    reps, members, n_timeouts, n_errors = _cluster(sorted(groups, key=lambda c: (-len(groups[c]), c)), timeout_s)
    clusters = [sorted(i for c in ms for i in groups[c]) for ms in members]
    order = sorted(range(len(clusters)), key=lambda k: (-len(clusters[k]), reps[k]))
    clusters = [clusters[k] for k in order]
    reps = [reps[k] for k in order]
    top = len(clusters[0]) if clusters else 0
    label = None
    agrees = [False] * n
    if clusters and (len(clusters) == 1 or len(clusters[1]) < top):
        label = min(extracted[i] for i in groups[reps[0]])  # type: ignore[type-var]
        for i in clusters[0]:
            agrees[i] = True
    return VoteResult(label, top / n if n else 0.0, clusters, agrees, extracted, n_timeouts, n_errors)


def _group_by_canonical(extracted: list[str | None], truncated: Sequence[bool] | None) -> dict[str, list[int]]:
    """Response indices per canonical answer; sets `extracted[i]` to None where i does not vote."""
    groups: dict[str, list[int]] = {}
    for i, ans in enumerate(extracted):
        if ans is None or (truncated is not None and truncated[i]):
            extracted[i] = None
            continue
        c = canonicalize(ans)
        if is_placeholder(c):
            extracted[i] = None
            continue
        groups.setdefault(c, []).append(i)
    return groups


def _cluster(uniques: list[str], timeout_s: float) -> tuple[list[str], list[list[str]], int, int]:
    """Greedy clustering of unique canonical answers, visited in the given order.

    Each joins the first cluster whose representative is equivalent (symmetric rule), else opens
    a new one. All slow comparisons share one deadline; past it they count as "different".

    Returns:
        (representatives, members per cluster, comparisons timed out, comparisons failed).
    """
    reps: list[str] = []
    members: list[list[str]] = []
    n_timeouts = n_errors = 0
    deadline = time.monotonic() + timeout_s
    for u in uniques:
        fast = [fast_verdict(r, u) for r in reps]
        first_true = next((j for j, v in enumerate(fast) if v is True), len(reps))
        slow = [j for j in range(first_true) if fast[j] is None]
        n_timeouts += sum(1 for v in fast[:first_true] if v is TOO_BIG)
        joined = first_true if first_true < len(reps) else None
        if slow and time.monotonic() >= deadline:
            n_timeouts += len(slow)  # budget spent: remaining comparisons count as "different"
        elif slow:
            verdicts = judge(
                [(reps[j], u) for j in slow], symmetric=True, timeout_s=max(0.0, deadline - time.monotonic())
            )
            n_timeouts += sum(1 for s, _ in verdicts if s == "timeout")
            n_errors += sum(1 for s, _ in verdicts if s == "error")
            hit = next((j for j, (s, eq) in zip(slow, verdicts) if s == "ok" and eq), None)
            if hit is not None:
                joined = hit
        if joined is None:
            reps.append(u)
            members.append([u])
        else:
            members[joined].append(u)
    return reps, members, n_timeouts, n_errors
