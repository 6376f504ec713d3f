"""RENT (``method=rent``; satrams/rent-rl): the Player alone on a fixed pool of questions
(`cpmobius.methods.fixed_pool`), ``player.n`` rollouts a question, all trained, each rewarded with minus its mean
token entropy (`cpmobius.baselines.rewards.rent_rewards`). The reward needs the entropies of the policy that
sampled the rollouts, so it is computed in the Player's update (`RENT.player_scores`); the pool only records
whether each rollout has a final boxed answer."""

from __future__ import annotations

from typing import Any, Optional

from cpmobius import run_log
from cpmobius.baselines.rewards import rent_rewards
from cpmobius.loop_state import KeptProblems
from cpmobius.methods.base import LoopView, Method, register
from cpmobius.methods.fixed_pool import FixedPool, GroupReading, validation_pool


def read_rent_group(answers: list[Optional[str]], n: int, mode: str) -> GroupReading:
    """RENT's reading of one question's ``n`` rollouts: all train; each flag says whether it has an answer."""
    boxed = [answer is not None for answer in answers]
    return GroupReading(list(range(n)), None, boxed, sum(boxed) / n)


@register
class RENT(Method):
    """Entropy minimisation on the validation set's questions; no Coach."""

    name = "rent"
    has_coach = False
    table = run_log.POOL_TABLE_COLUMNS

    def problem_source(self, loop: LoopView) -> FixedPool:
        return validation_pool(loop, loop.settings.player.n, read_rent_group, "boxed_frac")

    def player_scores(self, loop: LoopView, kept: KeptProblems, entropies: Any) -> list[float]:
        """Minus each rollout's mean token entropy (``no_box_entropy`` for one without a box); the entropies
        are the sampling policy's (released: the same)."""
        ms = loop.settings.method
        boxed = [agree for outcome in kept.outcomes for agree in outcome.agrees]
        mask = kept.player_batch.batch["response_mask"]
        return rent_rewards(entropies, mask, boxed, ms.no_box_entropy, ms.entropy_window, ms.last_fraction).tolist()
