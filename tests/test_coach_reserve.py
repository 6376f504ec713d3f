"""`filter.coach_reserve`: later attempts of a step take the Coach's spare candidates first, without
waking the Coach (no Ray, no models: the Coach batch, the Player's rollouts and the vote are stand-ins)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest
import torch
from stand_ins import ScriptedPolicy, not_sampled
from verl import DataProto

from cpmobius import filter_stage
from cpmobius.coach import Problem
from cpmobius.config import compose_config
from cpmobius.difficulty_filter import GroupOutcome
from cpmobius.engine.sharing import EngineGuard
from cpmobius.loop import CoachPlayerLoop
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet

N = 2  # rollouts per problem


def rows(count: int, label: float) -> DataProto:
    return DataProto.from_dict(
        tensors={"response_mask": torch.ones(count, 3), "label": torch.full((count,), label)},
        meta_info={"temperature": 1.0},
    )


@pytest.fixture
def make_loop(tmp_path, monkeypatch):
    """A loop whose Coach writes numbered problems; the Player keeps the problems whose number is in ``keep``."""
    written, seen_by_batch = [], []

    def propose(coach, settings, count, seen=()):
        seen_by_batch.append(list(seen))
        start = len(written)
        problems = [Problem(text=f"problem {start + i}", coach_row=i) for i in range(count)]
        written.extend(p.text for p in problems)
        return problems, rows(count, float(start)), Counter()

    def make(reserve: float, keep: set[int], quota: int = 4, max_attempts: int = 6, adaptive: bool = False):
        def roll_out(player, texts, n, settings, *args, vote="cpmobius"):
            numbers = [int(t.split()[1]) for t in texts]
            outcomes = [
                GroupOutcome("1", 0.5, [True, False], [False, False], k in keep, None if k in keep else "too_easy")
                for k in numbers
            ]
            return rows(len(texts) * n, 0.0), outcomes

        monkeypatch.setattr(filter_stage, "propose_problems", propose)
        monkeypatch.setattr(filter_stage, "roll_out_and_filter", roll_out)
        cfg = compose_config(
            [
                f"trainer.default_local_dir={tmp_path}",
                f"filter.quota={quota}",
                "filter.oversample=1.0",
                f"filter.max_attempts={max_attempts}",
                f"filter.coach_reserve={reserve}",
                f"player.n={N}",
                f"filter.adaptive_oversample={adaptive}",
                "coach.world_problems_only=false",  # the stand-in Coach's problems belong to no world
            ]
        )
        guard = EngineGuard()
        loop = CoachPlayerLoop(
            cfg,
            load_settings(cfg),
            ScriptedPolicy(not_sampled, name="coach", guard=guard),  # the Coach writes through `propose`
            ScriptedPolicy(not_sampled, name="player", guard=guard),  # the Player answers through `roll_out`
            val_set=ValidationSet("none", [], [], []),
        )
        return loop

    make.written, make.seen_by_batch = written, seen_by_batch
    return make


def test_without_a_reserve_every_attempt_wakes_the_coach(make_loop):
    loop = make_loop(reserve=0.0, keep={1, 5, 9, 11})
    kept, metrics = loop.filter.collect(1)
    assert [p.text for p in kept.problems] == ["problem 1", "problem 5", "problem 9", "problem 11"]
    # attempts of 4, 3, 2, 2, 1 candidates (oversample 1): 5 attempts, each a Coach and a Player wake
    assert metrics["filter/attempts"] == 5 and loop.player.guard.switches == 10
    assert metrics["coach/reserve_unused"] == 0


def test_the_reserve_serves_later_attempts_without_waking_the_coach(make_loop, tmp_path):
    loop = make_loop(reserve=2.0, keep={1, 5, 9, 11})
    kept, metrics = loop.filter.collect(1)
    # The same problems are kept in the same order (the Coach's candidates are taken in sampling order) ...
    assert [p.text for p in kept.problems] == ["problem 1", "problem 5", "problem 9", "problem 11"]
    # ... but the Coach wrote 12 at once and was woken once: one Coach and one Player wake in all.
    assert len(make_loop.written) == 12 and loop.player.guard.switches == 2
    assert metrics["filter/attempts"] == 5 and metrics["coach/candidates"] == 12
    assert metrics["coach/reserve_unused"] == 0
    # Each kept problem's Coach row is the row it was sampled as (the REINFORCE update trains on it).
    assert kept.coach_batch.batch["label"].tolist() == [0.0] * 4
    assert len(kept.player_batch) == 4 * N


def test_the_reserve_is_topped_up_when_it_runs_short_and_leftovers_are_archived(make_loop, tmp_path):
    loop = make_loop(reserve=0.5, keep={0, 1, 6})
    kept, metrics = loop.filter.collect(1)
    # attempt 1: Coach writes ceil(4 x 1.5) = 6, takes 4 (keeps 0, 1); attempt 2 takes 2 from the reserve
    # (none kept); attempt 3 needs 2, the reserve is empty: Coach writes 3 more, takes 2 (keeps 6); ...
    assert [p.text for p in kept.problems][:3] == ["problem 0", "problem 1", "problem 6"]
    assert kept.coach_batch.batch["label"].tolist()[:3] == [0.0, 0.0, 6.0]  # from the second Coach batch
    coach_wakes = loop.player.guard.history.count("coach")
    assert coach_wakes < metrics["filter/attempts"]
    archived = [
        json.loads(line) for line in next((tmp_path / "problems").glob("step_*.jsonl")).read_text().splitlines()
    ]
    unused = [row for row in archived if row["attempt"] is None]
    assert len(unused) == metrics["coach/reserve_unused"] == len(make_loop.written) - metrics["coach/candidates"]


def test_each_coach_batch_is_checked_for_duplicates_of_the_steps_earlier_batches(make_loop):
    # Near-duplicates across attempts: a later Coach batch must not bring back a problem an earlier one already wrote.
    loop = make_loop(reserve=0.0, keep={1, 5, 9, 11})
    loop.filter.collect(1)
    seen = make_loop.seen_by_batch
    assert len(seen) == 5 and seen[0] == []
    assert all(seen[k] == make_loop.written[: len(seen[k])] for k in range(5))  # every earlier problem, in order
    assert [len(s) for s in seen] == [0, 4, 7, 9, 11]


def test_adaptive_sizing_learns_from_the_first_steps_earlier_attempts(make_loop):
    """At the run's first step there is no history: attempt 1 asks for ceil(4 x 1.0); it keeps 1 of 4, so
    attempt 2 sizes from that acceptance (1.25 / 0.25 = 5 x the 3 missing), not from the empty history
    (which would ask for 3 and need several more Coach and Player wakes)."""
    loop = make_loop(reserve=0.0, keep={1, 5, 6, 7}, adaptive=True)
    kept, metrics = loop.filter.collect(1)
    assert len(make_loop.written) == 4 + 15
    assert metrics["filter/attempts"] == 2 and [p.text for p in kept.problems] == [f"problem {k}" for k in (1, 5, 6, 7)]
    assert loop.filter.totals["candidates"] == 19 and loop.filter.totals["accepted"] == 4


def test_a_negative_reserve_is_a_config_error():
    from cpmobius.config import ConfigError

    with pytest.raises(ConfigError, match="filter.coach_reserve"):
        load_settings(compose_config(["filter.coach_reserve=-1"]))


def test_settings_given_to_the_loop_later_reach_its_filter(make_loop):
    # A benchmark's phases swap the loop's settings between steps: the filter must run the new ones.
    loop = make_loop(reserve=0.0, keep={1, 5, 9, 11})
    loop.settings = dataclasses.replace(
        loop.settings, filter=dataclasses.replace(loop.settings.filter, coach_reserve=2.0)
    )
    kept, metrics = loop.filter.collect(1)
    assert loop.filter.settings is loop.settings
    # the reserve now serves later attempts: one Coach wake and one Player wake, as with reserve=2.0 from the start
    assert metrics["coach/candidates"] == 12 and loop.player.guard.switches == 2
