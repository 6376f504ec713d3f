"""RENT (``method=rent``; satrams/rent-rl): the Player alone on a fixed pool of questions
(`cpmobius.methods.fixed_pool`), ``player.n`` rollouts a question, all trained, each rewarded with minus its mean
token entropy (`cpmobius.baselines.rent_rewards.rent_rewards`). The reward needs the entropies of the policy that
sampled the rollouts, so it is computed in the Player's update (`RENT.player_scores`); the pool only records
whether each rollout has a final boxed answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from cpmobius import run_log
from cpmobius.baselines.rent_rewards import RENT_WINDOWS, rent_rewards
from cpmobius.config.sections import method_default, require, require_choice
from cpmobius.loop_state import KeptProblems
from cpmobius.methods.base import NO_COACH_UNREAD, LoopView, Method, register
from cpmobius.methods.fixed_pool import FixedPool, GroupReading, validation_pool


@dataclass(frozen=True)
class RENTSettings:
    """RENT's own keys (``method.<key>``; defaults: configs/method_defaults/rent.yaml, the released run's values)."""

    # Questions drawn from the pool a step (released: a random 80 of AMC's 83 each step).
    prompts_per_step: int = method_default("rent", "prompts_per_step")
    # The entropy in nats charged to a response without \boxed{}: its reward is minus this (released: 7.0).
    no_box_entropy: float = method_default("rent", "no_box_entropy")
    # Average the entropy over all response tokens (released) or over the last `last_fraction` of them.
    entropy_window: str = method_default("rent", "entropy_window")
    last_fraction: Optional[float] = method_default("rent", "last_fraction")

    def __post_init__(self) -> None:
        require(self.prompts_per_step >= 1, "method.prompts_per_step", "must be >= 1")
        require_choice(self.entropy_window, RENT_WINDOWS, "method.entropy_window")
        require(
            (self.entropy_window == "last_fraction") == (self.last_fraction is not None),
            "method.last_fraction",
            "set it (in (0, 1]) exactly when method.entropy_window=last_fraction",
        )
        require(
            self.last_fraction is None or 0.0 < self.last_fraction <= 1.0, "method.last_fraction", "must be in (0, 1]"
        )


def read_rent_group(answers: list[Optional[str]], n: int, mode: str) -> GroupReading:
    """RENT's reading of one question's ``n`` rollouts: all train; each flag says whether it has an answer."""
    boxed = [answer is not None for answer in answers]
    return GroupReading(list(range(n)), None, boxed, sum(boxed) / n)


@register
class RENT(Method):
    """Entropy minimisation on the validation set's questions; no Coach."""

    name = "rent"
    has_coach = False
    unread = NO_COACH_UNREAD
    table = run_log.POOL_TABLE_COLUMNS
    settings_class = RENTSettings

    def problem_source(self, loop: LoopView) -> FixedPool:
        per_step = self.settings.prompts_per_step
        return validation_pool(loop, loop.settings.player.n, read_rent_group, "boxed_frac", per_step)

    def player_scores(self, loop: LoopView, kept: KeptProblems, entropies: Any) -> list[float]:
        """Minus each rollout's mean token entropy (``no_box_entropy`` for one without a box); the entropies
        are the sampling policy's (released: the same)."""
        ms = self.settings
        boxed = [agree for outcome in kept.outcomes for agree in outcome.agrees]
        mask = kept.player_batch.batch["response_mask"]
        return rent_rewards(entropies, mask, boxed, ms.no_box_entropy, ms.entropy_window, ms.last_fraction).tolist()
