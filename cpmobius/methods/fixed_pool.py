"""Stage 1 of the baselines that train the Player alone on a fixed pool of questions (TTRL, RENT).

`FixedPool.collect` stands where CPMöbius's `cpmobius.filter_stage.DifficultyFilter.collect` does: it
returns the step's problems and their Player rollouts as `KeptProblems` (no Coach rows), from a pool
instead of a Coach. The pool is the validation set's questions, their answers unused: both baselines'
released runs train on the questions they are measured on (AMC's 83), which is the setting the paper
compares against. What a group's rollouts mean (TTRL's vote, RENT's has-a-box flags) is the method's
(`cpmobius.methods.ttrl`, `cpmobius.methods.rent`), given as ``read_group``.

Departures (`# CPMöbius:` below): answers are extracted and compared by this repository's grader
(`cpmobius.grading`), not TTRL's Qwen parser and ``grade_answer`` or RENT's ``last_boxed_only_string``;
a rollout stopped at the length limit has no answer, as in CPMöbius's vote.
"""

from __future__ import annotations

import random
from typing import Callable, NamedTuple, Optional

from cpmobius.clock import OpLog
from cpmobius.coach import Problem
from cpmobius.difficulty_filter import AnsweredRollouts, GroupOutcome
from cpmobius.loop_state import KeptProblems
from cpmobius.methods.base import LoopView
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import Settings


class GroupReading(NamedTuple):
    """What a method reads from one question's rollouts: which of them train (indices into the group), the label
    (or None), each training rollout's agree flag (its reward in the default update) and the group's share (the
    pool's logged mean: TTRL's label share, RENT's has-a-box share)."""

    train: list[int]
    label: Optional[str]
    agrees: list[bool]
    share: float


# (the group's extracted answers, None where a rollout has none; player.n; the grading mode) → GroupReading
ReadGroup = Callable[[list[Optional[str]], int, str], GroupReading]


class FixedPool:
    """The step's questions from a fixed pool and their Player rollouts (TTRL, RENT).

    Args:
        settings: validated settings (``player.n``, ``player.vote``).
        player: the Player `Policy`.
        prompt: the Player's prompt (`cpmobius.prompts.PlayerPrompt`).
        questions: the pool's question texts (P ≥ 1).
        seed: the run's seed; each step's draw depends on it and the step only, so a resumed run draws
            what the uninterrupted one would have.
        stages: the loop's stage timer; rollouts are timed as "difficulty_filter" (the stage they replace).
        count_tokens: called with ``("player_rollouts", tokens)`` for each batch.
        per_question: rollouts sampled a question (TTRL: ``method.votes``; RENT: ``player.n``).
        read_group: the method's reading of a question's rollouts (`GroupReading`).
        share_name: the logged share's name, ``pool/<share_name>_mean``.
        prompts_per_step: questions drawn a step (the method's ``method.prompts_per_step``).

    Raises:
        ValueError: an empty pool.
    """

    def __init__(
        self,
        settings: Settings,
        player: TrainedPolicy,
        prompt: PlayerPrompt,
        questions: list[str],
        seed: int,
        stages: OpLog,
        count_tokens: Callable[[str, int], None],
        per_question: int,
        read_group: ReadGroup,
        share_name: str,
        prompts_per_step: int,
    ):
        if not questions:
            raise ValueError("the question pool is empty (validation set with no problems)")
        self.settings, self.questions, self.seed = settings, list(questions), seed
        self.per_question, self.read_group, self.share_name = per_question, read_group, share_name
        self.prompts_per_step = prompts_per_step
        self.roll_out = AnsweredRollouts(player, prompt, settings.player.vote, stages, count_tokens)

    def state_dict(self) -> dict[str, int]:
        """Nothing carries across steps (each draw is a function of the seed and the step)."""
        return {}

    def load_state_dict(self, state: dict[str, int]) -> None:
        pass

    def draw(self, step: int) -> list[int]:
        """Pool indices of step ``step``'s questions: ``method.prompts_per_step`` distinct ones (all when the
        pool is smaller), in a random order that depends only on the seed and the step (RENT's released
        loader: a random 80 of 83 each epoch-step)."""
        count = min(self.prompts_per_step, len(self.questions))
        return random.Random(f"fixed-pool:{self.seed}:{step}").sample(range(len(self.questions)), count)

    def collect(self, step: int) -> tuple[KeptProblems, dict[str, float]]:
        """The step's questions, their rollouts and outcomes; never skips a step.

        Returns:
            ``(kept, metrics)``: K questions with K·``player.n`` training rollouts (groups contiguous) and
            K outcomes: TTRL's label, reward-1 flags and label share; RENT's has-a-box flags.
        """
        n, per_question = self.settings.player.n, self.per_question
        indices = self.draw(step)
        texts = [self.questions[i] for i in indices]
        batch, answers, truncated = self.roll_out(texts, per_question)
        kept = KeptProblems([], [], None, None)
        for group, (index, text) in enumerate(zip(indices, texts)):
            start = group * per_question
            reading = self.read_group(answers[start : start + per_question], n, self.settings.player.vote)
            rows = batch.select_idxs([start + i for i in reading.train])
            cut = [truncated[start + i] for i in reading.train]
            outcome = GroupOutcome(reading.label, reading.share, reading.agrees, cut, True, None)
            kept.append(Problem(text=text, coach_row=index), outcome, rows)
        return kept, self._metrics(kept)

    def _metrics(self, kept: KeptProblems) -> dict[str, float]:
        shares = [outcome.pass_rate for outcome in kept.outcomes]
        return {"pool/questions": float(len(kept)), f"pool/{self.share_name}_mean": sum(shares) / len(shares)}


def validation_pool(
    loop: LoopView, per_question: int, read_group: ReadGroup, share_name: str, prompts_per_step: int
) -> FixedPool:
    """The pool of the loop's validation questions (what TTRL's and RENT's released runs train on), read as the
    method reads a group, ``prompts_per_step`` a step (`FixedPool`'s last four arguments)."""
    return FixedPool(
        loop.settings,
        loop.player,
        loop.player_prompt,
        loop.val_set.problems,
        loop.cfg.seed,
        loop.stages,
        loop.count_tokens,
        per_question,
        read_group,
        share_name,
        prompts_per_step,
    )
