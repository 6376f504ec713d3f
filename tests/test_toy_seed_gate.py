"""The per-seed gate of the toy world's Coach measurement (`benchmarks/toy_seed_gate.py`): its problem sources, its
shares over voted groups, and its pass rule, on hand-made groups."""

from __future__ import annotations

from collections import Counter

import pytest

from cpmobius.difficulty_filter import GroupOutcome
from cpmobius.toy.world import ToyProblem


def outcome(label, kept):
    return GroupOutcome(label, 0.5 if label else 0.0, [], [], kept, None if kept else "below_band")


def test_the_frontier_source_is_one_level_and_the_natural_source_the_worlds_spread(load_script):
    gate = load_script("benchmarks/toy_seed_gate.py")
    frontier = gate.draw_problems("frontier", 200, 1, seed=3)
    natural = gate.draw_problems("natural", 2000, 1, seed=3)
    assert {p.difficulty for p in frontier} == {1}
    levels = Counter(p.difficulty for p in natural)
    assert levels[0] > levels[1] > levels[2] > 0  # natural_level's decay: most problems shallow, a few deep
    assert gate.draw_problems("natural", 50, 1, seed=3) == natural[:50]  # the same seed, the same problems
    with pytest.raises(ValueError, match="source"):
        gate.draw_problems("oracle", 1, 1, seed=0)


def test_shares_count_kept_groups_and_those_whose_label_is_the_true_answer(load_script):
    gate = load_script("benchmarks/toy_seed_gate.py")
    problems = [ToyProblem("What is (1 + 2)?", "3", 1)] * 4
    # kept and right; kept with a wrong label; dropped although right; no label at all
    outcomes = [outcome("3", True), outcome("4", True), outcome("3", False), outcome(None, False)]
    figures = gate.summarize(outcomes, problems)
    assert figures == {"kept": 0.5, "kept_right": 0.25, "pass_rate": 0.375}


@pytest.mark.parametrize(("frontier", "natural", "verdict"), [(0.5, 0.3, True), (0.5, 0.4, False), (0.2, 0.4, False)])
def test_a_seed_passes_when_the_frontier_beats_the_natural_spread_by_the_margin(
    load_script, frontier, natural, verdict
):
    gate = load_script("benchmarks/toy_seed_gate.py")
    figures = {"frontier": {"kept_right": frontier}, "natural": {"kept_right": natural}}
    assert gate.passes(figures, margin=0.15) is verdict
