"""Worlds (`cpmobius.worlds`): ``validation.dataset`` names the toy world or its out-of-distribution set, whose every
problem's truth is known; a benchmark is not a world, and the config check asks without importing the world."""

from __future__ import annotations

import subprocess
import sys

from cpmobius.toy.world import problem_difficulty, solve
from cpmobius.worlds import WORLDS, is_world, world_of


def test_the_toy_world_answers_and_levels_its_problems_and_a_benchmark_is_no_world():
    toy = world_of("toy")
    ids, problems, answers, targets = toy.validation_set(None, seed=3)
    assert len(problems) == toy.default_size == len(set(ids)) and ids[0] == "toy-0"
    assert [toy.solve(p) for p in problems] == answers == [solve(p) for p in problems]
    assert [toy.difficulty(p) for p in problems] == [problem_difficulty(p) for p in problems]
    assert all(f"\\boxed{{{a}}}" in t for a, t in zip(answers, targets))  # each target boxes its answer
    assert toy.solve("What is the capital of France?") is None and toy.difficulty("Hello") is None
    ood = world_of("toy_ood")
    assert len(ood.validation_set(12, seed=0)[1]) == 12 and ood.solve("What is 2 + 2?") is None
    for dataset in ("amc", "math500", "/data/my_set.jsonl"):
        assert world_of(dataset) is None and not is_world(dataset)


def test_asking_whether_a_dataset_is_a_world_imports_no_world():
    probe = "import sys; from cpmobius.worlds import is_world; is_world('toy'); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False" and set(WORLDS) == {"toy", "toy_ood"}
