"""R-Zero as a method of the loop (``method=rzero``): iterations of Challenger steps, then Solver steps.

`RZeroSchedule.collect` stands where CPMöbius's `cpmobius.filter_stage.DifficultyFilter.collect` does, and the
Challenger's update where CPMöbius's Coach update does (`RZero.update_coach`, after validation). The phase of a
step is a function of the step alone (`rzero_phase`), so a resumed run lands where it stopped.
Source: Chengsong-Huang/R-Zero, ``scripts/main.sh`` and the scripts it calls (docs/baselines.md, "R-Zero").

- **Challenger step** (the Challenger is the Coach): ``method.challenger_prompts`` prompts, each sampled
  ``method.challenger_n`` times (the GRPO group); each well-formed question is answered
  ``method.reward_votes`` times by the Player, frozen while the Challenger trains, and p is its majority
  share (`cpmobius.baselines.rzero_rewards.rzero_majority_share`, every sample in the denominator). Reward
  (`rzero_challenger_rewards`): min(p, 1 − p) (``method.uncertainty=code``, released; ``paper``:
  1 − 2|p − 0.5|) minus the share of the step's batch in the question's BLEU cluster, −1 − that share for
  a malformed output; the Challenger's own answer is never read. Nothing is kept for the Player: the loop
  validates, then the method's Coach update is the Challenger's (GRPO advantages per prompt group, one update).
- **Solver step** (the Solver is the Player): at the first Solver step of an iteration the Coach writes
  ``method.solver_questions`` questions, the Player (the previous iteration's Solver) votes on each with
  ``method.solver_votes`` samples, and the questions with a gradable majority answer whose share (over the
  samples that gave one) is in [``solver_band_low``, ``solver_band_high``] make the phase's training set,
  their majority answers the labels (`rzero_gradable`, `rzero_keep`). Each Solver step draws
  ``method.prompts_per_step`` of them (a function of the seed and the step), rolls each out ``player.n``
  times and returns them as `KeptProblems`; the loop's Player update gives reward 1 to a rollout whose
  answer is equivalent to the label (GRPO per question).

Departures (`# CPMöbius:` below): answers are extracted and compared by this repository's grader (R-Zero:
mathruler's ``extract_boxed_content`` and ``grade_answer``) and a rollout cut at the length limit has no
answer; ``method.challenger_format=plain`` (the default, for Coaches that never saw R-Zero's prompt) reads
the whole response as the question and rejects it as CPMöbius's Coach validation does; a question whose
Player prompt is longer than the Player accepts is malformed; the Solver's reward has no format term
(released: 0.9 · accuracy + 0.1 · a ``<think>`` format match, which non-thinking models never meet); one
optimizer step per step for either policy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Optional

from cpmobius import metrics, run_log
from cpmobius.baselines.rzero_rewards import (
    RZERO_UNCERTAINTY,
    rzero_challenger_rewards,
    rzero_gradable,
    rzero_keep,
    rzero_majority_share,
    rzero_parse_question,
)
from cpmobius.clock import OpLog
from cpmobius.coach import Problem, read_problem
from cpmobius.config.sections import method_default, require, require_choice
from cpmobius.difficulty_filter import AnsweredRollouts, GroupOutcome
from cpmobius.grading import answers_equivalent
from cpmobius.loop_state import KeptProblems
from cpmobius.methods.base import LoopView, Method, register
from cpmobius.policy_api import TrainedPolicy, train_policy
from cpmobius.prompts import Messages, PlayerPrompt, coach_prompt
from cpmobius.rewards import grpo_advantages, player_token_rewards
from cpmobius.settings import Settings

# R-Zero's Challenger prompt (`verl/utils/dataset.py`, ``questioner_format``), for ``challenger_format=tags``.
CHALLENGER_SYSTEM = (
    "You are an expert competition-math problem setter.\n"
    "FIRST, in your private scratch-pad, think step-by-step to design a brand-new, non-trivial problem. "
    "The problem could come from any field of mathematics, including but not limited to algebra, geometry, "
    "number theory, combinatorics, prealgebra, probability, statistics, and calculus. "
    "Aim for a difficulty such that fewer than 30 % of advanced high-school students could solve it. "
    "Avoid re-using textbook clichés or famous contest problems.\n"
    "THEN, without revealing any of your private thoughts, output **exactly** the following two blocks:\n\n"
    "<question>\n{The full problem statement on one or more lines}\n</question>\n\n"
    "\\boxed{final_answer}\n\n"
    "Do NOT output anything else—no explanations, no extra markup."
)
CHALLENGER_USER = (
    "Generate one new, challenging reasoning question now. Remember to format the output exactly as instructed."
)
CHALLENGER, SOLVER = "challenger", "solver"
# How a Challenger output is read: the whole response (checked as CPMöbius's Coach output is) or R-Zero's tags.
CHALLENGER_FORMATS = ("plain", "tags")


def _default(key: str) -> object:
    """R-Zero's default for its key ``key`` (`method_default`)."""
    return method_default("rzero", key)


@dataclass(frozen=True)
class RZeroSettings:
    """R-Zero's own keys (``method.<key>``; defaults: configs/method_defaults/rzero.yaml, toy-sized where the
    released run's are too large for the toy world; configs/experiment/rzero_qwen_1p5b.yaml sets the released ones).
    """

    # Solver questions drawn a step from the phase's kept set.
    prompts_per_step: int = _default("prompts_per_step")
    # Challenger then Solver steps per iteration (released: 5 and 15).
    challenger_steps: int = _default("challenger_steps")
    solver_steps: int = _default("solver_steps")
    # Coach prompts a Challenger step, and candidates per prompt (the GRPO group; released: 512 and 4).
    challenger_prompts: int = _default("challenger_prompts")
    challenger_n: int = _default("challenger_n")
    # "plain" (the whole response, checked as coach.validate says) or "tags" (R-Zero's <question> block).
    challenger_format: str = _default("challenger_format")
    # Player samples per candidate for the Challenger's majority share p (released: 10).
    reward_votes: int = _default("reward_votes")
    # The uncertainty term, "code" = min(p, 1 - p) (released) or "paper" = 1 - 2|p - 0.5|.
    uncertainty: str = _default("uncertainty")
    # Questions written for each Solver phase and Player votes on each (released: 8,000 and 9).
    solver_questions: int = _default("solver_questions")
    solver_votes: int = _default("solver_votes")
    # Keep a question iff solver_band_low <= majority share <= solver_band_high (released: 0.3, 0.8).
    solver_band_low: float = _default("solver_band_low")
    solver_band_high: float = _default("solver_band_high")

    def __post_init__(self) -> None:
        for key in (
            "prompts_per_step", "solver_steps", "challenger_prompts", "reward_votes", "solver_questions", "solver_votes"
        ):  # fmt: skip
            require(getattr(self, key) >= 1, f"method.{key}", "must be >= 1")
        require(self.challenger_steps >= 0, "method.challenger_steps", "must be >= 0")
        require(self.challenger_n >= 2, "method.challenger_n", "a GRPO group needs at least 2 candidates")
        require_choice(self.challenger_format, CHALLENGER_FORMATS, "method.challenger_format")
        require_choice(self.uncertainty, RZERO_UNCERTAINTY, "method.uncertainty")
        for key in ("solver_band_low", "solver_band_high"):
            require(0.0 <= getattr(self, key) <= 1.0, f"method.{key}", "must be in [0, 1]")
        require(self.solver_band_low <= self.solver_band_high, "method.solver_band_low", "exceeds solver_band_high")


def rzero_phase(step: int, challenger_steps: int, solver_steps: int) -> tuple[str, int, int]:
    """Which phase step ``step`` is in: iterations of ``challenger_steps`` Challenger steps, then
    ``solver_steps`` Solver steps (released: 5 and 15, `scripts/main.sh`).

    Args:
        step: the loop step, 1-based.
        challenger_steps: Challenger steps per iteration (>= 0).
        solver_steps: Solver steps per iteration (>= 1).

    Returns:
        ``(phase, iteration, position)``: `CHALLENGER` or `SOLVER`, the iteration (1-based) and the step's
        place in its phase (1-based). With 5 and 15: steps 1–5 are Challenger 1–5 of iteration 1, steps
        6–20 Solver 1–15, step 21 Challenger 1 of iteration 2.

    Raises:
        ValueError: a step below 1, or counts out of range.
    """
    if step < 1 or challenger_steps < 0 or solver_steps < 1:
        raise ValueError(f"rzero_phase: step {step}, challenger_steps {challenger_steps}, solver_steps {solver_steps}")
    iteration, offset = divmod(step - 1, challenger_steps + solver_steps)
    if offset < challenger_steps:
        return CHALLENGER, iteration + 1, offset + 1
    return SOLVER, iteration + 1, offset - challenger_steps + 1


class RZeroSchedule:
    """R-Zero's two phases, one loop step at a time (module docstring).

    Args:
        settings: validated settings (``coach``, ``player.n``, ``player.vote``).
        options: R-Zero's own keys (`RZeroSettings`).
        coach: the Coach `Policy` (the Challenger).
        player: the Player `Policy` (the Solver).
        prompt: the Player's prompt (`cpmobius.prompts.PlayerPrompt`).
        seed: the run's seed; a Solver step's draw depends on it and the step only.
        stages: the loop's stage timer: Coach samples are timed as "coach", Player votes and rollouts as
            "difficulty_filter" (the Challenger's update runs in the loop's "coach_update").
        count_tokens: called with ``(stage, tokens)`` for each generated batch.
        norm_adv_by_std: the Challenger's GRPO divides by the group's standard deviation
            (``algorithm.norm_adv_by_std_in_grpo``).
    """

    def __init__(
        self,
        settings: Settings,
        options: RZeroSettings,
        coach: TrainedPolicy,
        player: TrainedPolicy,
        prompt: PlayerPrompt,
        seed: int,
        stages: OpLog,
        count_tokens: Callable[[str, int], None],
        norm_adv_by_std: bool = True,
    ):
        if coach is None:
            raise ValueError("RZeroSchedule needs a Coach (the Challenger)")
        self.settings, self.options, self.coach, self.player, self.prompt = settings, options, coach, player, prompt
        self.seed, self.stages, self.count_tokens = seed, stages, count_tokens
        self.norm_adv_by_std = norm_adv_by_std
        self.roll_out = AnsweredRollouts(player, prompt, settings.player.vote, stages, count_tokens)
        # The current Solver phase's training set: its iteration (0: none yet), questions and labels.
        self.pool: dict = {"iteration": 0, "questions": [], "labels": []}
        # A Challenger step's batch and rewards, from `collect` to `update_challenger` (never across steps).
        self.challenger: Optional[tuple[object, list[float]]] = None

    def state_dict(self) -> dict:
        """The Solver phase's training set (saved as ``problem_source`` in each checkpoint's loop state)."""
        return {key: list(value) if isinstance(value, list) else value for key, value in self.pool.items()}

    def load_state_dict(self, state: dict) -> None:
        self.pool = {"iteration": 0, "questions": [], "labels": [], **state}

    def collect(self, step: int) -> tuple[KeptProblems, dict[str, float]]:
        """Run step ``step``'s phase. A Challenger step scores the Coach's questions (its update is
        `update_challenger`) and returns no problems; a Solver step returns the drawn questions and their Player
        rollouts (K·``player.n`` rows, groups contiguous)."""
        ms = self.options
        phase, iteration, _ = rzero_phase(step, ms.challenger_steps, ms.solver_steps)
        common = {"rzero/phase": float(phase == SOLVER), "rzero/iteration": float(iteration)}
        if phase == CHALLENGER:
            return KeptProblems([], [], None, None), {**common, **self.score_challenger()}
        built = {}
        if self.pool["iteration"] != iteration:  # the phase's first step (or a checkpoint from before it)
            built = self.build_solver_set(iteration)
        kept, solver_metrics = self.roll_out_solver(step)
        return kept, {**common, **built, **solver_metrics}

    # ------------------------------------------------------------------ Challenger

    def score_challenger(self) -> dict[str, float]:
        """A Challenger step's first half: candidates → Player votes → R-Zero's reward, held for the update."""
        ms = self.options
        batch, questions = self.write_questions(ms.challenger_prompts, ms.challenger_n)
        votes = self.vote(questions, ms.reward_votes, "all_samples")
        shares = [None if vote is None else vote[1] for vote in votes]
        rewards = rzero_challenger_rewards(questions, shares, ms.uncertainty)
        self.challenger = (batch, rewards)
        step_metrics = {
            "coach/reward_mean": sum(rewards) / len(rewards),
            "rzero/reward_mean": sum(rewards) / len(rewards),
            "coach/valid_frac": sum(q is not None for q in questions) / len(questions),
        }
        valid_shares = [share for share in shares if share is not None]
        if valid_shares:
            step_metrics["rzero/majority_share_mean"] = sum(valid_shares) / len(valid_shares)
        return step_metrics

    def update_challenger(self) -> dict[str, float]:
        """A Challenger step's second half: GRPO per prompt group on the held rewards, one Coach update (none
        with ``coach.update=false``). Nothing after a Solver step."""
        if self.challenger is None:
            return {}
        (batch, rewards), self.challenger = self.challenger, None
        if not self.settings.coach.update:
            return {"coach/updated": 0.0}
        mask = batch.batch["response_mask"]
        token_rewards = player_token_rewards(rewards, mask)  # each reward on its last response token
        uid, norm = batch.non_tensor_batch["uid"], self.norm_adv_by_std
        update_metrics = train_policy(
            self.coach, batch, lambda _entropies: grpo_advantages(token_rewards, mask, uid, norm)
        )
        return {**metrics.prefixed(update_metrics, "coach"), "coach/updated": 1.0}

    def coach_prompt(self) -> Messages:
        """The Coach's prompt: R-Zero's system and user turns (``tags``), or ``coach.instruction`` (``plain``)."""
        if self.options.challenger_format == "tags":
            return [{"role": "system", "content": CHALLENGER_SYSTEM}, {"role": "user", "content": CHALLENGER_USER}]
        return coach_prompt(self.settings.coach.instruction)

    def write_questions(self, prompts: int, n: int) -> tuple[object, list[Optional[str]]]:
        """``prompts`` Coach prompts × ``n`` samples → the Coach batch (groups contiguous, one uid per prompt)
        and (prompts·n,) questions, None for a malformed output (`parse_question`)."""
        with self.stages.timed("coach"):
            self.coach.activate()
            batch = self.coach.generate([self.coach_prompt()] * prompts, n=n)
        self.count_tokens("coach", int(batch.batch["response_mask"].sum()))
        texts, truncated = self.coach.decode_responses(batch)
        questions = [self.parse_question(text, cut) for text, cut in zip(texts, truncated)]
        written = [q for q in questions if q is not None]
        # CPMöbius: a question whose Player prompt does not fit would be cut from the left: malformed.
        fits = dict(zip(written, self.prompt.fits(self.player, written)))
        return batch, [q if q is not None and fits[q] else None for q in questions]

    def parse_question(self, text: str, truncated: bool) -> Optional[str]:
        """One Coach response → its question, or None when malformed.

        ``tags``: `cpmobius.baselines.rzero_rewards.rzero_parse_question` (the last ``<question>`` block, released).
        ``plain``: `cpmobius.coach.read_problem` with ``coach.validate``. # CPMöbius: for a Coach that never saw
        R-Zero's prompt (the toy Coach), the whole response is the question, rejected as CPMöbius rejects one.
        """
        if self.options.challenger_format == "tags":
            return rzero_parse_question(text)
        problem = read_problem(text, truncated, self.settings.coach)
        return problem.text if problem.valid else None

    def vote(self, questions: list[Optional[str]], votes: int, denominator: str) -> list[Optional[tuple[str, float]]]:
        """``votes`` Player samples per well-formed question → (majority answer, share) each, None for a
        malformed one (`rzero_majority_share` with ``denominator``)."""
        valid = [q for q in questions if q is not None]
        if not valid:
            return [None] * len(questions)
        _, answers, _ = self.roll_out(valid, votes)
        shares = iter(
            rzero_majority_share(answers[i * votes : (i + 1) * votes], self.equivalent, denominator)
            for i in range(len(valid))
        )
        return [None if q is None else next(shares) for q in questions]

    def equivalent(self, a: str, b: str) -> bool:
        return answers_equivalent(a, b, mode=self.settings.player.vote)

    # ------------------------------------------------------------------ Solver

    def build_solver_set(self, iteration: int) -> dict[str, float]:
        """The Solver phase's training set: questions written by the Coach, voted by the Player, kept in the band."""
        ms = self.options
        _, questions = self.write_questions(ms.solver_questions, 1)
        votes = self.vote(questions, ms.solver_votes, "nonempty")
        band = (ms.solver_band_low, ms.solver_band_high)
        kept = []
        for question, vote in zip(questions, votes):
            if vote is not None and rzero_gradable(question, vote[0]) and rzero_keep(vote[1], vote[0], band):
                kept.append((question, vote[0]))
        self.pool = {"iteration": iteration, "questions": [q for q, _ in kept], "labels": [a for _, a in kept]}
        return {
            "rzero/solver_written": float(len(questions)),
            "rzero/solver_valid_frac": sum(q is not None for q in questions) / len(questions),
            "rzero/solver_kept": float(len(kept)),
        }

    def draw(self, step: int) -> list[int]:
        """Indices into the phase's set of step ``step``'s questions: ``method.prompts_per_step`` distinct
        ones (all when fewer), in an order that depends only on the seed and the step."""
        size = len(self.pool["questions"])
        count = min(self.options.prompts_per_step, size)
        return random.Random(f"rzero:{self.seed}:{step}").sample(range(size), count)

    def roll_out_solver(self, step: int) -> tuple[KeptProblems, dict[str, float]]:
        """The step's drawn questions, ``player.n`` rollouts each, and whether each agrees with its label."""
        n, kept = self.settings.player.n, KeptProblems([], [], None, None)
        indices = self.draw(step)
        if not indices:  # nothing was kept for this phase: no Player update, validation still runs
            return kept, {"pool/questions": 0.0}
        texts = [self.pool["questions"][i] for i in indices]
        batch, answers, truncated = self.roll_out(texts, n)
        for group, (index, text) in enumerate(zip(indices, texts)):
            label, rows = self.pool["labels"][index], slice(group * n, (group + 1) * n)
            agrees = [answer is not None and self.equivalent(answer, label) for answer in answers[rows]]
            outcome = GroupOutcome(label, sum(agrees) / n, agrees, truncated[rows], True, None)
            kept.append(Problem(text=text, coach_row=index), outcome, batch.slice(group * n, (group + 1) * n))
        rewards = [float(a) for outcome in kept.outcomes for a in outcome.agrees]
        return kept, {"pool/questions": float(len(kept)), "rzero/reward_mean": sum(rewards) / len(rewards)}


@register
class RZero(Method):
    """R-Zero's Challenger (the Coach) and Solver (the Player) phases; the Coach is never given Δt."""

    name = "rzero"
    table = run_log.RZERO_TABLE_COLUMNS
    settings_class = RZeroSettings
    unread = {
        "filter": "R-Zero's Challenger and its own filter (method.*) choose the Solver's questions",
        "coach.reward": "the Challenger's reward is R-Zero's uncertainty reward (method.*), never Δt",
    }

    def problem_source(self, loop: LoopView) -> RZeroSchedule:
        self.schedule = RZeroSchedule(
            loop.settings,
            self.settings,
            loop.coach,
            loop.player,
            loop.player_prompt,
            loop.cfg.seed,
            loop.stages,
            loop.count_tokens,
            loop.norm_adv_by_std,
        )
        return self.schedule

    def update_coach(self, loop: LoopView, kept: KeptProblems, delta_t: float) -> dict[str, float]:
        """The Challenger's update on a Challenger step (`RZeroSchedule.update_challenger`); none on a Solver step."""
        return self.schedule.update_challenger()
