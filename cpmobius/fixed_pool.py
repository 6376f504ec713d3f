"""Stage 1 of the baselines that train the Player alone on a fixed pool of questions: TTRL and RENT.

`FixedPool.collect` stands where CPMöbius's `cpmobius.filter_stage.DifficultyFilter.collect` does: it
returns the step's problems and their Player rollouts as `KeptProblems` (no Coach rows), from a pool
instead of a Coach. The pool is the validation set's questions, their answers unused: both baselines'
released runs train on the questions they are measured on (AMC's 83), which is the setting the paper
compares against.

- **TTRL** (`method=ttrl`; PRIME-RL/TTRL ``examples/ttrl/amc.sh``): ``method.votes`` rollouts a question;
  the exact-string majority of their extracted answers is the label; the first ``player.n`` rollouts
  train, with reward 1 for an answer equivalent to the label (`cpmobius.baselines.rewards.ttrl_*`).
- **RENT** (`method=rent`; satrams/rent-rl): ``player.n`` rollouts a question, all trained; the reward
  (minus the mean token entropy, `cpmobius.baselines.rewards.rent_rewards`) needs the policy's entropies,
  so the loop computes it in its update (`CoachPlayerLoop.update_player`). Here each rollout's outcome
  only records whether it has a final boxed answer (``agrees``).

Departures (`# CPMöbius:` below): answers are extracted and compared by this repository's grader
(`cpmobius.grading`), not TTRL's Qwen parser and ``grade_answer`` or RENT's ``last_boxed_only_string``;
a rollout stopped at the length limit has no answer, as in CPMöbius's vote.
"""

from __future__ import annotations

import random
from typing import Callable

from cpmobius.baselines.rewards import ttrl_rewards, ttrl_vote_then_train
from cpmobius.coach import Problem
from cpmobius.difficulty_filter import AnsweredRollouts, GroupOutcome
from cpmobius.engine.timing import OpLog
from cpmobius.grading import answers_equivalent
from cpmobius.loop_state import KeptProblems
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import Settings


class FixedPool:
    """The step's questions from a fixed pool and their Player rollouts (TTRL, RENT).

    Args:
        settings: validated settings (``method``, ``player.n``, ``player.vote``).
        player: the Player `Policy`.
        prompt: the Player's prompt (`cpmobius.prompts.PlayerPrompt`).
        questions: the pool's question texts (P ≥ 1).
        seed: the run's seed; each step's draw depends on it and the step only, so a resumed run draws
            what the uninterrupted one would have.
        stages: the loop's stage timer; rollouts are timed as "difficulty_filter" (the stage they replace).
        count_tokens: called with ``("player_rollouts", tokens)`` for each batch.

    Raises:
        ValueError: an empty pool, or a method that trains no pool.
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
    ):
        if not questions:
            raise ValueError("the question pool is empty (validation set with no problems)")
        if not settings.method.uses_pool:
            raise ValueError(f"method={settings.method.name} trains no fixed pool")
        self.settings, self.questions, self.seed = settings, list(questions), seed
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
        count = min(self.settings.method.prompts_per_step, len(self.questions))
        return random.Random(f"fixed-pool:{self.seed}:{step}").sample(range(len(self.questions)), count)

    def collect(self, step: int) -> tuple[KeptProblems, dict[str, float]]:
        """The step's questions, their rollouts and outcomes; never skips a step.

        Returns:
            ``(kept, metrics)``: K questions with K·``player.n`` training rollouts (groups contiguous) and
            K outcomes: TTRL's label, reward-1 flags and label share; RENT's has-a-box flags.
        """
        method, n = self.settings.method, self.settings.player.n
        per_question = method.votes if method.name == "ttrl" else n
        indices = self.draw(step)
        texts = [self.questions[i] for i in indices]
        batch, answers, truncated = self.roll_out(texts, per_question)
        mode = self.settings.player.vote
        kept = KeptProblems([], [], None, None)
        for group, (index, text) in enumerate(zip(indices, texts)):
            start = group * per_question
            group_answers = answers[start : start + per_question]
            if method.name == "ttrl":
                extracted = [answer or "" for answer in group_answers]
                label, train = ttrl_vote_then_train(extracted, n)
                flags = ttrl_rewards(
                    [extracted[i] for i in train], label, lambda a, b: answers_equivalent(a, b, mode=mode)
                )
                outcome_label, agrees = label or None, [flag == 1.0 for flag in flags]
                share = extracted.count(label) / per_question
            else:
                train, outcome_label = list(range(n)), None
                agrees = [answer is not None for answer in group_answers]
                share = sum(agrees) / n
            rows = batch.select_idxs([start + i for i in train])
            cut = [truncated[start + i] for i in train]
            outcome = GroupOutcome(outcome_label, share, agrees, cut, True, None)
            kept.append(Problem(text=text, coach_row=index), outcome, rows)
        return kept, self._metrics(kept)

    def _metrics(self, kept: KeptProblems) -> dict[str, float]:
        shares = [outcome.pass_rate for outcome in kept.outcomes]
        name = "label_share" if self.settings.method.name == "ttrl" else "boxed_frac"
        return {"pool/questions": float(len(kept)), f"pool/{name}_mean": sum(shares) / len(shares)}
