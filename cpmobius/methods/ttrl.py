"""TTRL (``method=ttrl``; PRIME-RL/TTRL ``examples/ttrl/amc.sh``): the Player alone on a fixed pool of questions
(`cpmobius.methods.fixed_pool`). ``method.votes`` rollouts a question; the exact-string majority of their extracted
answers is the label; the first ``player.n`` rollouts train, with reward 1 for an answer equivalent to the label
(`cpmobius.baselines.ttrl_rewards`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from cpmobius import run_log
from cpmobius.baselines.ttrl_rewards import ttrl_rewards, ttrl_vote_then_train
from cpmobius.config import ConfigError
from cpmobius.config.sections import method_default, require
from cpmobius.grading import answers_equivalent
from cpmobius.methods.base import NO_COACH_UNREAD, LoopView, Method, register
from cpmobius.methods.fixed_pool import FixedPool, GroupReading, validation_pool
from cpmobius.settings import Settings


@dataclass(frozen=True)
class TTRLSettings:
    """TTRL's own keys (``method.<key>``; defaults: configs/method_defaults/ttrl.yaml, the released run's values)."""

    # Questions drawn from the pool (the validation set's questions) a step (released: 8).
    prompts_per_step: int = method_default("ttrl", "prompts_per_step")
    # Rollouts sampled and voted per question; the first player.n of them train (released: 64 and 32).
    votes: int = method_default("ttrl", "votes")

    def __post_init__(self) -> None:
        require(self.prompts_per_step >= 1, "method.prompts_per_step", "must be >= 1")
        require(self.votes >= 1, "method.votes", "must be >= 1")


def read_ttrl_group(answers: list[Optional[str]], n: int, mode: str) -> GroupReading:
    """TTRL's reading of one question's ``method.votes`` rollouts: the majority label, the first ``n`` train."""
    extracted = [answer or "" for answer in answers]
    label, train = ttrl_vote_then_train(extracted, n)
    flags = ttrl_rewards([extracted[i] for i in train], label, lambda a, b: answers_equivalent(a, b, mode=mode))
    return GroupReading(train, label or None, [flag == 1.0 for flag in flags], extracted.count(label) / len(answers))


@register
class TTRL(Method):
    """Test-time RL on the validation set's questions; no Coach."""

    name = "ttrl"
    has_coach = False
    unread = NO_COACH_UNREAD
    table = run_log.POOL_TABLE_COLUMNS
    settings_class = TTRLSettings

    @classmethod
    def check(cls, settings: Settings) -> None:
        votes = cls.read_settings(settings.method.options).votes
        if settings.player.n > votes:
            raise ConfigError(
                f"player.n: ttrl trains the first player.n of each question's method.votes={votes} "
                f"rollouts: got player.n={settings.player.n}"
            )

    def problem_source(self, loop: LoopView) -> FixedPool:
        own = self.settings
        return validation_pool(loop, own.votes, read_ttrl_group, "label_share", own.prompts_per_step)
