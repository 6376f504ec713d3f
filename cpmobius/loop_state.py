"""What the loop carries: the problems one step trains on, and the state a resumed run needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from verl import DataProto

from cpmobius.coach import Problem
from cpmobius.difficulty_filter import GroupOutcome


class QuotaNotMetError(RuntimeError):
    """The filter could not fill its quota and ``filter.on_shortfall`` is "error"."""


@dataclass
class KeptProblems:
    """The problems one step trains on: their groups' rollouts and their Coach rows, aligned.

    ``player_batch`` has K·n rows (group i is rows i·n … i·n+n−1); ``coach_batch`` has K rows, or is None
    for problems no Coach wrote (the baselines' fixed pool, `cpmobius.methods.fixed_pool`).
    """

    problems: list[Problem]
    outcomes: list[GroupOutcome]
    player_batch: Optional[DataProto]
    coach_batch: Optional[DataProto]

    def __len__(self) -> int:
        return len(self.problems)

    def append(
        self, problem: Problem, outcome: GroupOutcome, rows: DataProto, coach_row: Optional[DataProto] = None
    ) -> None:
        """Add one kept problem: its group's n rollouts ``rows`` and its Coach row (None: no Coach wrote it)."""
        # Attempts differ in their generation timings; only the sampling temperature travels on.
        rows.meta_info = {"temperature": rows.meta_info["temperature"]}
        self.problems.append(problem)
        self.outcomes.append(outcome)
        self.player_batch = rows if self.player_batch is None else DataProto.concat([self.player_batch, rows])
        if coach_row is not None:
            coach_row.meta_info = {"temperature": coach_row.meta_info["temperature"]}
            self.coach_batch = (
                coach_row if self.coach_batch is None else DataProto.concat([self.coach_batch, coach_row])
            )


@dataclass
class LoopState:
    """Everything besides the two policies that a resumed run needs (saved in each checkpoint)."""

    step: int = 0
    best_val: Optional[float] = None
    steps_without_improvement: int = 0
    rollbacks: int = 0
    delta_t_history: list[float] = field(default_factory=list)
    # The problem source's `state_dict`: the difficulty filter's counts, R-Zero's Solver set.
    problem_source: dict = field(default_factory=dict)
    generated_tokens: dict[str, int] = field(default_factory=dict)  # per stage, since the start of the run
    delta_tracker: dict = field(default_factory=dict)
    # Rollout engine wake-ups since the start of the run (``loop/engine_switches``; `EngineGuard.switches`).
    engine_switches: int = 0

    @classmethod
    def from_saved(cls, saved: dict) -> "LoopState":
        """The state from a checkpoint's ``loop_state.json`` (its other keys, such as ``policies``, ignored).
        Checkpoints written before the problem source's state had its own name carry it as ``filter_totals``;
        those written before a key of `ADDED_LATER` existed get its value there.

        Raises:
            KeyError: naming a key the saved state lacks (other than those of `ADDED_LATER`).
        """
        saved = dict(saved)
        if "filter_totals" in saved:
            saved["problem_source"] = saved.pop("filter_totals")
        for key, value in ADDED_LATER.items():  # a checkpoint written before the key existed
            saved.setdefault(key, value)
        return cls(**{key: saved[key] for key in cls.__dataclass_fields__})


# Keys of `LoopState` that checkpoints written before them lack, with the value such a checkpoint resumes with.
ADDED_LATER = {"engine_switches": 0}
