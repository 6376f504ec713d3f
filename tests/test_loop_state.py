"""The loop state a checkpoint carries, read back: today's keys and the older name of the problem source's state."""

from __future__ import annotations

import dataclasses

import pytest

from cpmobius.loop_state import LoopState


def saved_state(**overrides) -> dict:
    state = dataclasses.asdict(LoopState(step=4, delta_t_history=[0.1, -0.05], problem_source={"kept": 12}))
    return {**state, "policies": {"player": {"global_steps": 4}}, **overrides}


def test_a_saved_state_reads_back_whole():
    state = LoopState.from_saved(saved_state())
    assert state.step == 4 and state.delta_t_history == [0.1, -0.05] and state.problem_source == {"kept": 12}


def test_a_checkpoint_from_before_the_rename_keeps_its_problem_source():
    old = saved_state()
    solver_set = {"iteration": 2, "questions": ["1+1"], "labels": ["2"]}  # R-Zero's Solver set, as it was saved
    old["filter_totals"] = solver_set
    del old["problem_source"]
    assert LoopState.from_saved(old).problem_source == solver_set


def test_a_state_missing_a_key_is_refused_by_name():
    broken = saved_state()
    del broken["delta_tracker"]
    with pytest.raises(KeyError, match="delta_tracker"):
        LoopState.from_saved(broken)
