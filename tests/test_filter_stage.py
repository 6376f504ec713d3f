"""`DifficultyFilter`: attempts, the band, the Coach reserve, the shortfall policies and the state carried
across steps, on a scripted Coach and a stub Player whose groups agree as often as each problem says
(no Ray, no models; the vote and the band are the real ones)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from stand_ins import ScriptedPolicy
from verl import DataProto

from cpmobius import filter_stage
from cpmobius.clock import OpLog
from cpmobius.coach import Problem
from cpmobius.config import compose_config
from cpmobius.filter_stage import DifficultyFilter
from cpmobius.loop_state import QuotaNotMetError
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import load_settings

N = 5  # rollouts per problem; with band [0.5, 0.8] a group is kept iff 3 or 4 of its 5 agree (ceil 2.5, floor 4)


def coach_rows(count: int, first: int) -> DataProto:
    """A Coach batch of ``count`` rows, 2 response tokens each, row r labelled ``first + r``."""
    return DataProto.from_dict(
        tensors={"response_mask": torch.ones(count, 2), "label": torch.arange(first, first + count).float()},
        meta_info={"temperature": 1.0},
    )


def StubPlayer() -> ScriptedPolicy:
    """Answers problem "q<i> agree=<k>": k of its N rollouts say 7, the others 100, 101, ... (one each)."""

    def answers(problem: str, index: int) -> list[str]:
        agree = int(problem.split("agree=")[1])
        return [r"\boxed{7}" if i < agree else rf"\boxed{{{100 + i}}}" for i in range(N)]

    return ScriptedPolicy(answers)


class ScriptedCoach:
    """Each Coach batch writes the next entries of ``script``: an agree count k, or a reject reason."""

    def __init__(self, script: list) -> None:
        self.script, self.next, self.batches = list(script), 0, []

    def activate(self) -> None:
        pass

    def propose(self, coach, settings, count, seen=()):
        problems = []
        for row in range(count):
            entry = self.script[self.next + row]
            text = f"q{self.next + row} agree={entry}"
            problems.append(Problem(text, row, None if isinstance(entry, int) else entry))
        self.batches.append(count)
        batch = coach_rows(count, self.next)
        self.next += count
        return problems, batch, Counter()


def make_filter(monkeypatch, tmp_path, script, overrides=(), tokens=None):
    coach = ScriptedCoach(script)
    monkeypatch.setattr(filter_stage, "propose_problems", coach.propose)
    cfg = compose_config(
        [
            "filter.quota=2",
            "filter.band_low=0.5",
            "filter.band_high=0.8",
            f"player.n={N}",
            "filter.adaptive_oversample=false",
            "filter.coach_reserve=0.0",
            "coach.world_problems_only=false",  # the scripted Coach's problems belong to no world
            *overrides,
        ]
    )
    counted = tokens if tokens is not None else Counter()
    difficulty_filter = DifficultyFilter(
        load_settings(cfg),
        coach,
        StubPlayer(),
        PlayerPrompt(),
        tmp_path / "problems",
        OpLog(),
        lambda stage, count: counted.update({stage: count}),
    )
    return difficulty_filter, coach


def archived(tmp_path, step: int) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "problems" / f"step_{step:06d}.jsonl").read_text().splitlines()]


def test_attempts_band_surplus_and_totals(monkeypatch, tmp_path):
    tokens = Counter()
    # Attempt 1 asks ceil(2 missing x 2.0) = 4: k=5 (above the band), an empty one (never rolled out), k=2
    # (below), k=3 (kept). Attempt 2 asks ceil(1 x 2.0) = 2: k=4 (kept, the quota is met), k=3 (surplus).
    f, coach = make_filter(monkeypatch, tmp_path, [5, "empty", 2, 3, 4, 3], ["filter.oversample=2.0"], tokens)
    kept, m = f.collect(1)
    assert coach.batches == [4, 2]
    assert [p.text for p in kept.problems] == ["q3 agree=3", "q4 agree=4"]
    assert [o.pass_rate for o in kept.outcomes] == [3 / 5, 4 / 5]
    assert len(kept.player_batch) == 2 * N and list(kept.player_batch.non_tensor_batch["question"][::N]) == [
        "q3 agree=3",
        "q4 agree=4",
    ]
    assert kept.coach_batch.batch["label"].tolist() == [3.0, 4.0]  # each problem's own Coach row
    assert (m["filter/attempts"], m["coach/candidates"], m["filter/groups"], m["filter/kept"]) == (2, 6, 5, 2)
    assert m["filter/surplus_dropped"] == 1 and m["filter/quota_met"] == 1.0
    assert m["filter/dropped/above_band"] == 1 and m["filter/dropped/below_band"] == 1
    assert m["coach/rejected/empty"] == 1 and m["coach/valid_frac"] == 5 / 6
    assert m["filter/kept_frac"] == 2 / 5 and m["coach/reserve_unused"] == 0
    # accepted counts the surplus: 2 kept + 1 surplus
    assert f.totals == {"kept": 2, "groups": 5, "attempts": 2, "candidates": 6, "accepted": 3}
    # Coach: 6 rows x 2 tokens; Player: 5 groups x 5 rollouts x 2 tokens (the stand-in's response length)
    assert tokens == {"coach": 12, "player_rollouts": 50}
    rows = archived(tmp_path, 1)
    assert [(r["text"], r["attempt"], r.get("kept")) for r in rows] == [
        ("q1 agree=empty", 1, None),
        ("q0 agree=5", 1, False),
        ("q2 agree=2", 1, False),
        ("q3 agree=3", 1, True),
        ("q4 agree=4", 2, True),
        ("q5 agree=3", 2, True),
    ]


def test_adaptive_sizing_carries_across_steps_through_the_state_dict(monkeypatch, tmp_path):
    adaptive = ["filter.adaptive_oversample=true", "filter.oversample=1.0", "filter.oversample_max=8.0"]
    adaptive.append("filter.adaptive_margin=1.5")
    # Step 1, attempt 1: no history, ratio 1.0 -> 2 candidates (k=5, k=3): 1 kept of 2, acceptance 0.5.
    # Attempt 2: ratio 1.5 / 0.5 = 3 -> ceil(1 x 3) = 3 (k=2 below, k=4 kept, k=3 surplus): 2 kept + 1 surplus.
    # Totals: 5 candidates, 3 accepted -> step 2 sizes with 1.5 / 0.6 = 2.5: ceil(2 x 2.5) = 5.
    script = [5, 3, 2, 4, 3] + [3] * 5
    f, coach = make_filter(monkeypatch, tmp_path, script, adaptive)
    f.collect(1)
    assert coach.batches == [2, 3] and f.totals["candidates"] == 5 and f.totals["accepted"] == 3
    state = json.loads(json.dumps(f.state_dict()))  # what the checkpoint's loop_state.json holds
    resumed, resumed_coach = make_filter(monkeypatch, tmp_path, script[5:], adaptive)
    resumed.load_state_dict(state)
    resumed.collect(2)
    assert resumed_coach.batches == [5]
    fresh, fresh_coach = make_filter(monkeypatch, tmp_path, script[5:], adaptive)
    fresh.collect(2)
    assert fresh_coach.batches == [2]  # without the state: no history, ratio 1.0
    assert resumed.state_dict() == {"kept": 4, "groups": 10, "attempts": 3, "candidates": 10, "accepted": 8}


def test_the_reserve_serves_later_attempts_and_ends_with_the_step(monkeypatch, tmp_path):
    # Reserve 1.0, oversample 1: attempt 1 needs 2, the Coach writes ceil(2 x 2) = 4 and 2 are taken (k=5, k=3:
    # 1 kept); attempt 2 takes 1 from the reserve (k=5, dropped); attempt 3 takes the last (k=4, kept).
    f, coach = make_filter(
        monkeypatch, tmp_path, [5, 3, 5, 4, 3, 3, 3, 3, 9, 9], ["filter.coach_reserve=1.0", "filter.oversample=1.0"]
    )
    kept, m = f.collect(1)
    assert coach.batches == [4] and f.player.activations == 3
    assert m["filter/attempts"] == 3 and m["coach/candidates"] == 4 and m["coach/reserve_unused"] == 0
    assert kept.coach_batch.batch["label"].tolist() == [1.0, 3.0]
    # Step 2: 2 needed, the Coach writes 4 (k=3 x 4), both taken are kept; the other 2 are archived unused and
    # not carried into step 3, which wakes the Coach again.
    kept, m = f.collect(2)
    assert coach.batches == [4, 4] and m["coach/reserve_unused"] == 2
    assert [(r["text"], r["attempt"]) for r in archived(tmp_path, 2) if r["attempt"] is None] == [
        ("q6 agree=3", None),
        ("q7 agree=3", None),
    ]
    assert f.state_dict()["candidates"] == 4 + 2  # candidates handed to the Player, not written
    with pytest.raises(IndexError):  # the script is exhausted: step 3 asked the Coach, not the old reserve
        f.collect(3)


@pytest.mark.parametrize(
    ("policy", "min_kept", "kept_count"),
    [("train_on_fewer", 1, 1), ("train_on_fewer", 2, None), ("skip_step", 1, None), ("error", 1, "raises")],
)
def test_shortfall_policies(monkeypatch, tmp_path, policy, min_kept, kept_count):
    # One attempt of ceil(2 x 1.0) = 2 candidates: k=4 kept, k=5 above the band -> 1 of the quota of 2.
    overrides = [
        "filter.oversample=1.0",
        "filter.max_attempts=1",
        f"filter.on_shortfall={policy}",
        f"filter.min_kept={min_kept}",
    ]
    f, _ = make_filter(monkeypatch, tmp_path, [4, 5], overrides)
    if kept_count == "raises":
        with pytest.raises(QuotaNotMetError, match=r"kept 1 of 2 problems after 1 attempts.*step_000001\.jsonl"):
            f.collect(1)
    else:
        kept, m = f.collect(1)
        assert (None if kept is None else len(kept)) == kept_count
        assert m["filter/kept"] == 1 and m["filter/quota_met"] == 0.0
    assert len(archived(tmp_path, 1)) == 2  # archived before the shortfall policy applies
    assert f.totals.get("kept") == 1  # a short step still counts


def test_the_default_resamples_until_a_quota_that_four_attempts_left_short_is_full(monkeypatch, tmp_path, capsys):
    # oversample 1: attempts ask 2, 2, 1, 1, 1, 1 candidates; only q3 (k=4) and q7 (k=3) land in the band, so four
    # attempts (the bound before) keep 1 of the quota of 2, and the sixth attempt fills it.
    script = [5, 5, 5, 4, 5, 5, 5, 3]
    short, _ = make_filter(monkeypatch, tmp_path / "short", script, ["filter.oversample=1.0", "filter.max_attempts=4"])
    kept, m = short.collect(1)
    assert len(kept) == 1 and (m["filter/attempts"], m["filter/quota_met"]) == (4, 0.0)
    said = capsys.readouterr().out
    assert "[cpmobius] step 1: filter kept 1 of 2 problems after 4 attempts (filter.max_attempts=4)" in said
    assert "filter.on_shortfall=train_on_fewer: the Player trains on 1" in said
    full, coach = make_filter(monkeypatch, tmp_path / "full", script, ["filter.oversample=1.0"])
    assert full.settings.filter.max_attempts >= 50  # the default: far above what a step needs
    kept, m = full.collect(1)
    assert [p.text for p in kept.problems] == ["q3 agree=4", "q7 agree=3"] and coach.batches == [2, 2, 1, 1, 1, 1]
    assert (m["filter/kept"], m["filter/attempts"], m["filter/quota_met"]) == (2, 6, 1.0)
    assert "filter kept" not in capsys.readouterr().out  # a full quota says nothing
