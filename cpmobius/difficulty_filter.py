"""Stage 2, difficulty filter: Player rollouts per problem → pseudo-label → keep the problems whose
pass rate is in the band.

Paper §3 / released `RayCPTrainer._filter`: n Player rollouts per Coach problem; the majority
answer is the pseudo-label y*; the pass rate is the share of the group equal to y*; a problem is kept
iff band_low ≤ pass rate ≤ band_high (both inclusive), decided per problem (whole groups kept or
dropped). A tie at the top or a "no answer" majority gives no label and drops the problem.

Departures (`# CPMöbius:`): votes cluster equivalent answers (`cpmobius.grading`; the released code
compares raw strings); truncated rollouts never vote (the pass-rate denominator stays n);
the band is applied to integer counts so 0.2·n and 0.8·n have no float drift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from cpmobius.clock import OpLog
from cpmobius.grading import extract_answer, majority_vote
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import FilterSettings

DROP_REASONS = ("no_answer", "tie", "below_band", "above_band")


@dataclass
class GroupOutcome:
    """The vote and the filter decision for one problem's group of n rollouts.

    Attributes:
        pseudo_label: the group's majority answer, or None.
        pass_rate: share of the n rollouts agreeing with it (0 without a label).
        agrees: (n,) whether each rollout's answer equals the pseudo-label.
        truncated: (n,) whether each rollout stopped at the length limit.
        kept: the problem trains the Player (and, with a reward, the Coach).
        drop_reason: None when kept, else one of `DROP_REASONS`.
    """

    pseudo_label: Optional[str]
    pass_rate: float
    agrees: list[bool]
    truncated: list[bool]
    kept: bool
    drop_reason: Optional[str]
    extra: dict = field(default_factory=dict)


def decide(vote_label: Optional[str], agreeing: int, n: int, settings: FilterSettings, tie: bool) -> Optional[str]:
    """The drop reason of a group, or None to keep it.

    Args:
        vote_label: the pseudo-label (None for a tie or a "no answer" majority).
        agreeing: rollouts agreeing with it.
        n: group size.
        settings: band and switches.
        tie: whether the top clusters tied.
    """
    if vote_label is None:
        return "tie" if tie else "no_answer"
    if not settings.enabled:
        return None  # the paper's "no filter" ablation keeps every labelled problem
    low, high = settings.count_band(n)
    if agreeing < low:
        return "below_band"
    if agreeing > high:
        return "above_band"
    return None


def assign_pseudo_labels(
    texts: Sequence[str], truncated: Sequence[bool], n: int, settings: FilterSettings, mode: str = "cpmobius"
) -> list[GroupOutcome]:
    """Vote and filter each contiguous group of n responses.

    Args:
        texts: (G·n,) decoded Player responses, groups contiguous.
        truncated: (G·n,) length-stopped flags.
        n: rollouts per problem.
        settings: filter settings.
        mode: grading mode ("cpmobius" or "released").

    Returns:
        G `GroupOutcome`s in group order.

    Raises:
        ValueError: when the response count is not a multiple of n.
    """
    if len(texts) % n or len(texts) != len(truncated):
        raise ValueError(f"{len(texts)} responses / {len(truncated)} flags do not form groups of {n}")
    outcomes = []
    for start in range(0, len(texts), n):
        group_texts, group_truncated = list(texts[start : start + n]), list(truncated[start : start + n])
        # CPMöbius: truncated rollouts never vote; equivalent answers form one cluster.
        vote = majority_vote(responses=group_texts, truncated=group_truncated, mode=mode)
        agreeing = sum(vote.agrees)
        sizes = sorted((len(c) for c in vote.clusters), reverse=True)
        tie = len(sizes) > 1 and sizes[0] == sizes[1]
        unanswered = sum(1 for a, t in zip(vote.answers, group_truncated) if a is None or t)
        label = vote.pseudo_label
        if label is not None and unanswered >= agreeing and settings.label_from == "all":
            # "No answer" is the group's most common outcome (or ties with the top answer): released
            # code and paper drop such a problem; the grader never makes "no answer" a label itself.
            # CPMöbius: with filter.label_from=answered the answered rollouts' plurality labels it anyway
            # (the unanswered still count against the pass rate), so a Player that often leaves its answer
            # unboxed still has problems below the band seen. Off by default and for real models: there
            # "no answer" is mostly a response cut at the length limit, and a group that mostly fails to
            # finish would be trained towards its few finished answers.
            label, tie = None, False
        reason = decide(label, agreeing, n, settings, tie)
        outcomes.append(
            GroupOutcome(
                pseudo_label=label,
                pass_rate=agreeing / n if label is not None else 0.0,
                agrees=list(vote.agrees) if label is not None else [False] * n,
                truncated=group_truncated,
                kept=reason is None,
                drop_reason=reason,
                extra={"grade_failures": vote.n_timeouts + vote.n_errors},
            )
        )
    return outcomes


def roll_out_and_filter(
    player: TrainedPolicy,
    problems: Sequence[str],
    n: int,
    settings: FilterSettings,
    prompt: PlayerPrompt = PlayerPrompt(),
    vote: str = "cpmobius",
) -> tuple[Any, list[GroupOutcome]]:
    """n Player rollouts for each problem, then `assign_pseudo_labels` with the vote ``vote``.

    Prompts are rendered by ``prompt`` (`cpmobius.prompts.PlayerPrompt`); ``vote`` is ``player.vote``
    ("cpmobius" or "released").

    Returns:
        ``(player_batch, outcomes)``: the rollouts (P·n rows, groups contiguous, one uid per group)
        and one outcome per problem. These rollouts are the GRPO training rollouts: nothing is
        generated twice.
    """
    batch = player.generate(prompt.render(problems), n=n)
    texts, truncated = player.decode_responses(batch)
    return batch, assign_pseudo_labels(texts, truncated, n, settings, mode=vote)


@dataclass
class AnsweredRollouts:
    """n Player rollouts per question and the answer each gives, for the methods that vote or grade the answers
    themselves (the fixed-pool baselines, R-Zero): generation is timed as the "difficulty_filter" stage (the
    stage it stands for) and its tokens counted as "player_rollouts".

    # CPMöbius: a rollout cut at the length limit has no answer (the released baselines and R-Zero read one).

    Args:
        player: the Player `Policy`.
        prompt: the Player's prompt (`cpmobius.prompts.PlayerPrompt`).
        vote: ``player.vote``, the answer extraction's mode.
        stages: the loop's stage timer.
        count_tokens: called with ``("player_rollouts", tokens)`` for each batch.
    """

    player: TrainedPolicy
    prompt: PlayerPrompt
    vote: str
    stages: OpLog
    count_tokens: Callable[[str, int], None]

    def __call__(self, questions: Sequence[str], n: int) -> tuple[Any, list[Optional[str]], list[bool]]:
        """``(batch, answers, truncated)``: the rollouts (Q·n rows, groups contiguous), each row's extracted
        answer (None when it has none or was cut) and whether it stopped at the length limit."""
        with self.stages.timed("difficulty_filter"):
            self.player.activate()
            batch = self.player.generate(self.prompt.render(list(questions)), n=n)
        self.count_tokens("player_rollouts", int(batch.batch["response_mask"].sum()))
        texts, truncated = self.player.decode_responses(batch)
        answers = [None if cut else extract_answer(text, mode=self.vote) for text, cut in zip(texts, truncated)]
        return batch, answers, truncated


def candidates_per_attempt(missing: int, settings: FilterSettings, totals: dict[str, int]) -> int:
    """How many Coach candidates one attempt asks for when ``missing`` problems are still wanted.

    Released: ceil(missing × oversample), oversample 2.0, up to 16 attempts a step. With
    ``filter.adaptive_oversample`` the ratio is ``adaptive_margin / acceptance``, the acceptance being
    the share of all candidates so far (earlier steps and attempts) that the filter kept, surplus
    included, clamped to [oversample, oversample_max]; before any candidate it is ``oversample``.
    At the toy's acceptance of ~0.27 the fixed 2.0 needs ~2 attempts (each a Coach batch and a Player
    rollout, four engine switches) where the adaptive ratio (4.6) needs one in most steps.

    Args:
        missing: problems still wanted this step (>= 1).
        settings: the filter settings.
        totals: running counts ``candidates`` and ``accepted`` over earlier steps and this step's earlier
            attempts (`DifficultyFilter.totals` plus the step's own), so the first step adapts too.

    Returns:
        The number of candidates (>= missing).
    """
    ratio = settings.oversample
    # CPMöbius: the released code always asks for ceil(missing × 2).
    if settings.adaptive_oversample and totals.get("candidates", 0) > 0:
        acceptance = totals.get("accepted", 0) / totals["candidates"]
        wanted = settings.adaptive_margin / acceptance if acceptance > 0 else settings.oversample_max
        ratio = min(max(wanted, settings.oversample), settings.oversample_max)
    return max(missing, math.ceil(missing * ratio))
