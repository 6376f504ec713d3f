"""Every metric key the loop logs, built in one place (docs/metrics.md defines them).

verl's own keys are kept as they are (``actor/*`` renamed per policy to ``player/actor/*`` and
``coach/actor/*``); ours are namespaced by stage: ``coach/*``, ``filter/*``, ``pseudo_label/*``,
``player/*``, ``val/*``, ``timing_s/<stage>``, ``loop/*``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional, Sequence

import numpy as np

from cpmobius.coach import EXTRACTED_KINDS, REJECT_REASONS
from cpmobius.difficulty_filter import DROP_REASONS


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def filter_metrics(
    attempts: int,
    candidates: int,
    rejected: Counter,
    outcomes: Sequence[Any],
    kept: int,
    quota: int,
    surplus: int,
    extracted: Optional[Counter] = None,
) -> dict[str, float]:
    """``coach/*`` candidate counts and ``filter/*`` decisions of one step (all attempts).

    Args:
        rejected: candidates per reject reason (`cpmobius.coach.REJECT_REASONS`).
        extracted: candidates whose preamble / heading / closing remark was cut off, per kind
            (`cpmobius.coach.EXTRACTED_KINDS`), valid or not.
    """
    metrics = {
        "coach/candidates": candidates,
        "coach/valid_frac": (candidates - sum(rejected.values())) / candidates if candidates else 0.0,
        "filter/attempts": attempts,
        "filter/groups": len(outcomes),
        "filter/kept": kept,
        "filter/quota": quota,
        "filter/quota_met": float(kept >= quota),
        "filter/surplus_dropped": surplus,
        "filter/kept_frac": kept / len(outcomes) if outcomes else 0.0,
        "filter/pass_rate_mean": _mean([o.pass_rate for o in outcomes]),
        "filter/kept_pass_rate_mean": _mean([o.pass_rate for o in outcomes if o.kept]),
        "filter/truncated_frac": _mean([np.mean(o.truncated) for o in outcomes]) if outcomes else 0.0,
        # answer comparisons that timed out or failed in the vote (counted as "different", never hidden)
        "pseudo_label/grade_failures": sum(o.extra.get("grade_failures", 0) for o in outcomes),
    }
    for reason in REJECT_REASONS:
        metrics[f"coach/rejected/{reason}"] = rejected.get(reason, 0)
    for kind in EXTRACTED_KINDS:
        metrics[f"coach/extracted/{kind}"] = (extracted or Counter()).get(kind, 0)
    drops = Counter(o.drop_reason for o in outcomes if not o.kept)
    for reason in DROP_REASONS:
        metrics[f"filter/dropped/{reason}"] = drops.get(reason, 0)
    return metrics


def pseudo_label_metrics(
    outcomes: Sequence[Any], label_correct: Sequence[Optional[bool]], kept_correct: Sequence[Optional[bool]] = ()
) -> dict[str, float]:
    """``pseudo_label/*``: how often the majority answer is the true answer, when it is known.

    Args:
        outcomes: every labelled-or-not group of the step, aligned with ``label_correct``.
        label_correct: per group, whether its pseudo-label is the true answer (None: unknown or no label).
        kept_correct: the same for the problems the step trains on (kept by the band, quota not yet
            full; surplus problems of the last attempt are not among them).

    Returns:
        ``pseudo_label/accuracy`` over every labelled group with a known truth, and
        ``pseudo_label/kept_accuracy`` over the trained-on ones, each only when it has a denominator.
    """
    known = [float(c) for o, c in zip(outcomes, label_correct) if c is not None and o.pseudo_label is not None]
    kept_known = [float(c) for c in kept_correct if c is not None]
    result = {}
    if known:
        result["pseudo_label/accuracy"] = _mean(known)
    if kept_known:
        result["pseudo_label/kept_accuracy"] = _mean(kept_known)
    return result


def prefixed(metrics: dict[str, float], prefix: str) -> dict[str, float]:
    """verl's metric dict under a role prefix: ``actor/pg_loss`` → ``player/actor/pg_loss``."""
    return {f"{prefix}/{key}": value for key, value in metrics.items()}


def length_metrics(prefix: str, lengths: Sequence[float]) -> dict[str, float]:
    return {f"{prefix}/mean": _mean(lengths), f"{prefix}/max": float(max(lengths)) if len(lengths) else 0.0}


def difficulty_metrics(
    candidate_levels: Sequence[Optional[int]],
    kept_levels: Sequence[Optional[int]],
    kept_correct: Sequence[Optional[bool]],
) -> dict[str, float]:
    """Per-difficulty view of one step, where a problem's difficulty is known (the toy world).

    Args:
        candidate_levels: the difficulty of every well-formed Coach problem of the step (None: outside the
            known levels).
        kept_levels: the same for the problems the step trains on.
        kept_correct: per kept problem, whether its pseudo-label is the true answer (None: unknown).

    Returns:
        ``coach/difficulty/d<k>`` and ``coach/difficulty/other`` (shares of the well-formed problems),
        ``coach/difficulty_mean`` (over known levels), ``filter/kept_difficulty/d<k>`` (shares of the kept
        problems), ``filter/kept_difficulty_mean``, and ``pseudo_label/kept_wrong/d<k>``: the share of kept
        problems of level k whose pseudo-label is wrong (only for levels with a kept problem).
    """
    levels = sorted({level for level in [*candidate_levels, *kept_levels] if level is not None})
    result: dict[str, float] = {}
    if candidate_levels:
        for level in levels:
            result[f"coach/difficulty/d{level}"] = sum(lv == level for lv in candidate_levels) / len(candidate_levels)
        result["coach/difficulty/other"] = sum(lv is None for lv in candidate_levels) / len(candidate_levels)
        known = [lv for lv in candidate_levels if lv is not None]
        if known:
            result["coach/difficulty_mean"] = _mean(known)
    if kept_levels:
        for level in levels:
            result[f"filter/kept_difficulty/d{level}"] = sum(lv == level for lv in kept_levels) / len(kept_levels)
        known = [lv for lv in kept_levels if lv is not None]
        if known:
            result["filter/kept_difficulty_mean"] = _mean(known)
    for level in levels:
        verdicts = [c for lv, c in zip(kept_levels, kept_correct) if lv == level and c is not None]
        if verdicts:
            result[f"pseudo_label/kept_wrong/d{level}"] = 1.0 - _mean([float(c) for c in verdicts])
    return result


def accuracy_by_level(levels: Sequence[Optional[int]], scores: Sequence[float]) -> dict[str, float]:
    """``val/accuracy/d<k>``: the validation accuracy over the problems of each known difficulty."""
    result = {}
    for level in sorted({lv for lv in levels if lv is not None}):
        result[f"val/accuracy/d{level}"] = _mean([s for lv, s in zip(levels, scores) if lv == level])
    return result


def delta_t_noise_metrics(delta_t: float, accuracy_se: Optional[float], delta_se: Optional[float]) -> dict[str, float]:
    """``val/accuracy_se``, ``val/delta_t_se`` and ``val/delta_t_snr`` = |Δt| / SE(Δt), where a sampled validation
    pass gives them (`cpmobius.validation.sampling_standard_error`, `DeltaTracker.delta_se`). Under pure noise
    (no true change) |Δt| / SE averages sqrt(2/π) ≈ 0.80: one step's ratio says little, its mean over a run more."""
    result = {} if accuracy_se is None else {"val/accuracy_se": accuracy_se}
    if delta_se is not None and delta_se > 0.0:
        result.update({"val/delta_t_se": delta_se, "val/delta_t_snr": abs(delta_t) / delta_se})
    return result
