"""Stages 1–2 as one object: Coach batches → Player rollouts → band, resampled until the quota is met.

`DifficultyFilter.collect` is what one loop step asks of Coach generation and the difficulty filter
(paper Algorithm 1, lines "generate problems" and "filter by pass rate"; released
`RayCPTrainer._filter` with its resampling loop). It owns the resampling (attempts, oversampling), the
Coach reserve, the band (`cpmobius.difficulty_filter.assign_pseudo_labels`), the shortfall policy and
the counts that carry across steps (checkpointed through `state_dict`).

Departures (`# CPMöbius:` below): adaptive oversampling learns from earlier steps and attempts; the
Coach reserve serves later attempts without waking the Coach; each Coach batch is checked for
near-duplicates of the step's earlier batches; problems whose Player prompt is too long are rejected.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from verl import DataProto

from cpmobius import metrics
from cpmobius.clock import OpLog
from cpmobius.coach import Problem, propose_problems, reject_off_world, reject_unfit_prompts
from cpmobius.difficulty_filter import GroupOutcome, candidates_per_attempt, roll_out_and_filter
from cpmobius.grading import answers_equivalent
from cpmobius.loop_state import KeptProblems, QuotaNotMetError
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import Settings


@dataclass
class _StepTally:
    """What one `DifficultyFilter.collect` call accumulates over its attempts (outcomes aligned with
    ``label_correct``; ``kept_correct`` aligned with ``kept``)."""

    kept: KeptProblems = field(default_factory=lambda: KeptProblems([], [], None, None))
    rejected: Counter = field(default_factory=Counter)
    extracted: Counter = field(default_factory=Counter)
    outcomes: list[GroupOutcome] = field(default_factory=list)
    label_correct: list[Optional[bool]] = field(default_factory=list)
    kept_correct: list[Optional[bool]] = field(default_factory=list)
    archive: list[dict] = field(default_factory=list)
    levels: list[Optional[int]] = field(default_factory=list)  # of every well-formed problem (difficulty_of)
    candidates: int = 0
    attempts: int = 0
    surplus: int = 0
    reserve: list[tuple[Problem, DataProto]] = field(default_factory=list)  # written, not yet rolled out
    written: list[str] = field(default_factory=list)  # well-formed texts of earlier Coach batches (duplicates)


class DifficultyFilter:
    """Coach generation and the difficulty filter of one step, resampled until ``filter.quota`` is met.

    Args:
        settings: validated stage settings (``filter``, ``coach``, ``player.n``, ``player.vote``).
        coach: the Coach `Policy` (activated before each Coach batch).
        player: the Player `Policy` (activated before each rollout; its prompt-token limit applies).
        prompt: the Player's prompt (`cpmobius.prompts.PlayerPrompt`), for its rollouts and length checks.
        archive_dir: folder of the problem archive, one ``step_{N:06d}.jsonl`` per step.
        stages: the loop's stage timer; Coach batches are timed as "coach", rollouts as "difficulty_filter".
        count_tokens: called with ``(stage, tokens)`` for the generated tokens of each batch.
        ground_truth: optional problem text → true answer or None, for ``pseudo_label/*`` metrics.
        difficulty_of: optional problem text → difficulty level or None, for per-level metrics and
            ``coach.world_problems_only``.
    """

    def __init__(
        self,
        settings: Settings,
        coach: TrainedPolicy,
        player: TrainedPolicy,
        prompt: PlayerPrompt,
        archive_dir: Path,
        stages: OpLog,
        count_tokens: Callable[[str, int], None],
        ground_truth: Optional[Callable[[str], Optional[str]]] = None,
        difficulty_of: Optional[Callable[[str], Optional[int]]] = None,
    ):
        self.settings, self.coach, self.player = settings, coach, player
        self.prompt = prompt
        self.archive_dir = archive_dir
        self.stages, self.count_tokens = stages, count_tokens
        self.ground_truth, self.difficulty_of = ground_truth, difficulty_of
        # Since the run's start: kept, groups, attempts, candidates and accepted (kept + surplus).
        self.totals: dict[str, int] = {}

    def state_dict(self) -> dict[str, int]:
        """The counts carried across steps (saved as ``problem_source`` in each checkpoint's loop state)."""
        return dict(self.totals)

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.totals = dict(state)

    def archive_path(self, step: int) -> Path:
        return self.archive_dir / f"step_{step:06d}.jsonl"

    def collect(self, step: int) -> tuple[Optional[KeptProblems], dict[str, float]]:
        """Coach batches → Player rollouts → filter, until ``filter.quota`` problems are kept.

        Each attempt proposes ceil(missing × oversample) candidates in one Coach batch; kept groups
        accumulate across attempts; surplus problems of the last attempt are dropped (released code).
        # CPMöbius: with ``filter.coach_reserve`` r > 0 a Coach wake writes (1 + r) times the attempt's
        candidates and later attempts take the rest first (same Coach weights, so the same distribution),
        waking the Coach only when the reserve runs short; what is left at the end is archived, unused.
        Every candidate is archived to `archive_path` ``(step)``.

        Args:
            step: the step being collected (1-based: the loop's completed steps + 1).

        Returns:
            ``(kept, metrics)``: ``kept`` holds K ≤ quota problems, their K·n Player rollouts and K Coach
            rows, or is None when the step must be skipped (``skip_step``, or fewer than ``min_kept``).

        Raises:
            QuotaNotMetError: quota not met after ``filter.max_attempts`` with ``on_shortfall: error``.
        """
        fs = self.settings.filter
        tally = _StepTally()
        while len(tally.kept) < fs.quota and tally.attempts < fs.max_attempts:
            tally.attempts += 1
            valid, coach_batch_of = self._take_candidates(tally, step)
            if valid:
                self._roll_out(valid, coach_batch_of, tally, step)
        tally.archive += [p.archive_row(step, None) for p, _ in tally.reserve]  # written but never rolled out
        path = self.archive_path(step)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row) + "\n" for row in tally.archive))
        step_metrics = self._step_metrics(tally)
        kept = tally.kept
        if len(kept) < fs.quota:
            short = (
                f"filter kept {len(kept)} of {fs.quota} problems after {tally.attempts} attempts "
                f"(filter.max_attempts={fs.max_attempts}); see {path}"
            )
            if fs.on_shortfall == "error":
                raise QuotaNotMetError(short)
            skip = fs.on_shortfall == "skip_step" or len(kept) < fs.min_kept
            # CPMöbius: a short step is said, not only logged (filter/quota_met): an arm that trains on fewer
            # problems than another is not the same experiment.
            then = "the step is skipped" if skip else f"the Player trains on {len(kept)}"
            print(f"[cpmobius] step {step}: {short}; filter.on_shortfall={fs.on_shortfall}: {then}", flush=True)
            if skip:
                return None, step_metrics
        return kept, step_metrics

    def _take_candidates(self, tally: _StepTally, step: int) -> tuple[list[Problem], dict[int, DataProto]]:
        """One attempt's candidates, from the reserve first; returns the well-formed ones and each
        candidate's Coach batch by ``id(problem)``. Invalid ones are counted and archived here."""
        fs = self.settings.filter
        # CPMöbius: adaptive sizing also learns from this step's earlier attempts.
        count = candidates_per_attempt(
            fs.quota - len(tally.kept),
            fs,
            {
                "candidates": self.totals.get("candidates", 0) + tally.candidates,
                "accepted": self.totals.get("accepted", 0) + len(tally.kept) + tally.surplus,
            },
        )
        if len(tally.reserve) < count:
            fresh = self._propose(math.ceil(count * (1.0 + fs.coach_reserve)), seen=tally.written)
            tally.written += [problem.text for problem, _ in fresh if problem.valid]
            tally.reserve += fresh
        taken, tally.reserve = tally.reserve[:count], tally.reserve[count:]
        problems = [problem for problem, _ in taken]
        tally.candidates += count
        tally.rejected.update(p.reject_reason for p in problems if not p.valid)
        tally.extracted.update(kind for p in problems for kind in p.extracted)
        valid = [p for p in problems if p.valid]
        tally.levels += [self.difficulty_of(p.text) for p in valid] if self.difficulty_of else []
        tally.archive += [p.archive_row(step, tally.attempts) for p in problems if not p.valid]
        return valid, {id(problem): batch for problem, batch in taken}

    def _propose(self, count: int, seen: list[str]) -> list[tuple[Problem, DataProto]]:
        """One Coach batch of ``count`` candidates, checked against the Player's prompt limit and, for
        near-duplicates, against ``seen``: ``(problem, coach_batch)`` each, in sampling order."""
        with self.stages.timed("coach"):
            self.coach.activate()
            problems, coach_batch, _ = propose_problems(self.coach, self.settings.coach, count, seen)
        if self.settings.coach.world_problems_only:
            reject_off_world(problems, self.difficulty_of)
        reject_unfit_prompts(problems, self.player, self.prompt)
        self.count_tokens("coach", int(coach_batch.batch["response_mask"].sum()))
        return [(problem, coach_batch) for problem in problems]

    def _roll_out(
        self, valid: list[Problem], coach_batch_of: dict[int, DataProto], tally: _StepTally, step: int
    ) -> None:
        """n Player rollouts per problem and the vote; kept groups join ``tally.kept`` up to the quota
        (the rest of this attempt's kept problems are surplus, dropped)."""
        fs, n = self.settings.filter, self.settings.player.n
        with self.stages.timed("difficulty_filter"):
            self.player.activate()
            texts = [p.text for p in valid]
            player_batch, outcomes = roll_out_and_filter(
                self.player, texts, n, fs, self.prompt, vote=self.settings.player.vote
            )
        self.count_tokens("player_rollouts", int(player_batch.batch["response_mask"].sum()))
        for index, (problem, outcome) in enumerate(zip(valid, outcomes)):
            truth = self.ground_truth(problem.text) if self.ground_truth else None
            correct = (
                None
                if truth is None or outcome.pseudo_label is None
                else answers_equivalent(outcome.pseudo_label, truth)
            )
            tally.outcomes.append(outcome)
            tally.label_correct.append(correct)
            tally.archive.append(problem.archive_row(step, tally.attempts, outcome, correct))
            if not outcome.kept:
                continue
            if len(tally.kept) >= fs.quota:
                tally.surplus += 1
                continue
            tally.kept_correct.append(correct)
            coach_row = coach_batch_of[id(problem)].select_idxs([problem.coach_row])
            tally.kept.append(problem, outcome, player_batch.slice(index * n, (index + 1) * n), coach_row)

    def _step_metrics(self, tally: _StepTally) -> dict[str, float]:
        """The step's ``coach/*``, ``filter/*``, ``pseudo_label/*`` metrics; adds the step to `totals`."""
        kept, fs = tally.kept, self.settings.filter
        step_metrics = metrics.filter_metrics(
            tally.attempts,
            tally.candidates,
            tally.rejected,
            tally.outcomes,
            len(kept),
            fs.quota,
            tally.surplus,
            tally.extracted,
        )
        step_metrics["coach/reserve_unused"] = len(tally.reserve)
        step_metrics.update(metrics.pseudo_label_metrics(tally.outcomes, tally.label_correct, tally.kept_correct))
        step_metrics.update(metrics.length_metrics("coach/problem_chars", [len(p.text) for p in kept.problems]))
        if self.difficulty_of is not None:
            kept_levels = [self.difficulty_of(p.text) for p in kept.problems]
            step_metrics.update(metrics.difficulty_metrics(tally.levels, kept_levels, tally.kept_correct))
        totals = self.totals
        for key in ("kept", "groups", "attempts"):
            totals[key] = totals.get(key, 0) + int(step_metrics[f"filter/{key}"])
        totals["candidates"] = totals.get("candidates", 0) + tally.candidates
        totals["accepted"] = totals.get("accepted", 0) + len(kept) + tally.surplus
        return step_metrics
