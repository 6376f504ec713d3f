"""What a method is to the loop (`Method`), and the registry of methods by name (`register`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Optional, Protocol

from cpmobius import run_log
from cpmobius.clock import OpLog
from cpmobius.config import ConfigError
from cpmobius.config.sections import read_fields
from cpmobius.loop_state import KeptProblems, LoopState
from cpmobius.policy_api import TrainedPolicy
from cpmobius.prompts import PlayerPrompt
from cpmobius.rewards import random_player_rewards
from cpmobius.settings import Settings

_REGISTRY: dict[str, type[Method]] = {}


class ProblemSource(Protocol):
    """Stage 1 of a step: the problems the Player trains on and their rollouts (the difficulty filter, a fixed
    pool, R-Zero's phases). Its state goes into each checkpoint's loop state and comes back on resume."""

    settings: Settings

    def collect(self, step: int) -> tuple[KeptProblems | None, dict[str, float]]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class LoopView(Protocol):
    """What a method may use of the loop (`cpmobius.loop.CoachPlayerLoop`), which builds it and calls it."""

    cfg: Any  # the composed config (``seed``, ``trainer``)
    settings: Settings
    coach: Optional[TrainedPolicy]  # None for a method without a Coach
    player: TrainedPolicy
    player_prompt: PlayerPrompt
    state: LoopState  # the step, Δt history and counters a checkpoint carries
    stages: OpLog  # the stage timer
    output_dir: Path
    val_set: Any  # `cpmobius.validation.ValidationSet`: the fixed-pool baselines train on its questions
    ground_truth: Optional[Callable[[str], Optional[str]]]  # the toy world's true answer of a problem text
    difficulty_of: Optional[Callable[[str], Optional[int]]]  # the toy world's level of a problem text
    norm_adv_by_std: bool  # GRPO divides by the group's standard deviation (``algorithm.norm_adv_by_std_in_grpo``)

    def count_tokens(self, stage: str, count: int) -> None: ...


# What a method without a Coach (the Player alone on a fixed pool of questions) never reads.
NO_COACH_UNREAD = {
    "coach": "it has no Coach: the Player trains on a fixed pool of questions (method.*)",
    "filter": "it has no difficulty filter: the Player trains on a fixed pool of questions (method.*)",
}


class Method:
    """One training method, as the loop sees it. Subclasses set the class attributes and override what differs.

    A method's own keys (``method.votes``, ...) are its settings class (``settings_class``, a dataclass whose fields
    read their defaults from ``configs/method_defaults/<name>.yaml``); an instance holds them as ``self.settings``.

    Attributes:
        name: ``method.name`` (and ``configs/method/<name>.yaml``).
        settings_class: the dataclass of the method's own keys; None for a method with none (CPMöbius, whose knobs
            are the coach, filter and player groups).
        has_coach: a Coach policy is started, trained and checkpointed (False: the Player trains alone).
        coach_reward_has_delta_t: the Coach's reward multiplies the Player's Δt, so the ``coach.delta_t_source``
            ablations apply.
        writes_problem_archive: the run archives every Coach candidate under ``problems/``.
        unread: config keys (and everything below them) this method never reads → why; a command line that sets
            one is refused (`cpmobius.methods.check_method_overrides`).
        table: the step table's columns (`cpmobius.run_log`).
    """

    name: ClassVar[str] = ""
    has_coach: ClassVar[bool] = True
    coach_reward_has_delta_t: ClassVar[bool] = False
    writes_problem_archive: ClassVar[bool] = False
    unread: ClassVar[dict[str, str]] = {}
    table: ClassVar[tuple] = run_log.TABLE_COLUMNS
    settings_class: ClassVar[Optional[type]] = None

    def __init__(self, options: Optional[dict] = None) -> None:
        self.settings = self.read_settings(options or {})

    @classmethod
    def read_settings(cls, options: dict) -> Any:
        """The method's own keys (``method.<key>`` of the composed config, name left out) as its settings class,
        defaults filled in; None for a method without one.

        Raises:
            ConfigError: naming an unknown key (with the nearest of the method's keys), a value of the wrong type,
                or one the settings class refuses.
        """
        if cls.settings_class is None:
            if options:
                raise ConfigError(f"method.{sorted(options)[0]}: method={cls.name} has no keys of its own")
            return None
        return read_fields("method", options, cls.settings_class)

    @classmethod
    def check(cls, settings: Settings) -> None:
        """Checks across config sections this method needs (raise `cpmobius.config.ConfigError`); its own
        keys have passed `read_settings` by then."""

    @classmethod
    def table_columns(cls, greedy_beside: bool = False, levels: bool = False) -> list[tuple]:
        """The step table's columns before the validation extras (`cpmobius.run_log.table_columns`)."""
        return list(cls.table)

    def problem_source(self, loop: LoopView) -> ProblemSource:
        """The object whose ``collect(step)`` gives the step's kept problems (stage 1)."""
        raise NotImplementedError

    def player_scores(self, loop: LoopView, kept: KeptProblems, entropies: Any) -> list[float]:
        """One reward per Player rollout of ``kept`` (groups contiguous), from the policy's token ``entropies``
        (batch, response length) where the method needs them.

        The default: 1 for a rollout whose answer agrees with its group's label, else 0; with
        ``player.reward=random``, 1 with probability ``player.random_reward_p`` whatever it answers
        (`cpmobius.rewards.random_player_rewards`: the null control, not a method).
        """
        agrees = [agree for outcome in kept.outcomes for agree in outcome.agrees]
        player = loop.settings.player
        if player.reward == "random":
            return random_player_rewards(len(agrees), player.random_reward_p, int(loop.cfg.seed), loop.state.step)
        return [float(agree) for agree in agrees]

    def update_coach(self, loop: LoopView, kept: KeptProblems, delta_t: float) -> dict[str, float]:
        """The method's Coach update after validation (Δt is ``delta_t``); its metrics. The default: none."""
        return {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make ``cls`` the method named ``cls.name``.

    Raises:
        ValueError: no name, or another class already holds it.
    """
    if not cls.name:
        raise ValueError(f"{cls.__name__}: a method needs a name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"method {cls.name!r} is registered twice ({_REGISTRY[cls.name].__name__}, {cls.__name__})")
    _REGISTRY[cls.name] = cls
    return cls


def registered() -> dict[str, type[Method]]:
    """Name → class of every method registered so far (`cpmobius.methods.get_method` imports them all first)."""
    return dict(_REGISTRY)
