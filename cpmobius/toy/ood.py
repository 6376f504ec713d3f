"""The toy world's out-of-distribution set: the validation set's arithmetic written in forms it never holds.

Scored beside validation every step (``validation.ood_dataset=toy_ood``, ``val/ood_accuracy``), never feeding Δt,
so a run shows whether what the Player gains on the validation set's forms carries over to forms no step trains on.
Each problem is a one-digit a (+|-|*) b, as in `cpmobius.toy.world`, in one of three forms, each at four depths:

| form | example | depths | pretrained Player, seed 0: expected accuracy by depth |
|---|---|---|---|
| ``brackets`` | "What is [[7 - 3]]?" | 1-4 | 0.60, 0.20, 0.19, 0.15 |
| ``unspaced`` | "What is ((7-3))?" | 0-3 | 0.44, 0.46, 0.15, 0.04 |
| ``compute`` | "Compute ((7 - 3))." | 0-3 | 0.49, 0.21, 0.07, 0.02 |

(40 problems of each cell, the probability of ``\\boxed{answer}`` at T = 0.6, the default's models (portable CPU
kernels); the whole set of 60: 0.253 at step 0. On the validation set's own form: 0.95, 0.50, 0.11, 0.02, 0.005 at
depths 0-4.) None of them is a problem of the world (`cpmobius.toy.world.problem_difficulty`
reads none), so the validation set never holds one, and with ``coach.world_problems_only`` (the toy default) the
Coach's text in these forms is rejected as ``off_world``: no step trains on them. The Player, pretrained on the world's
form only, answers them at all because a byte-level model reads them as near variants.

Kept apart from `cpmobius.toy.world`, whose code is part of the pretrained models' cache key: adding this set
leaves every cached model valid.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from cpmobius.toy.world import OPERATORS, integer_arithmetic, player_target

# (form, depths): the cells of the set, taking turns so that each has the same weight in the accuracy.
OOD_CELLS = tuple(
    (form, depth)
    for form, depths in (("brackets", range(1, 5)), ("unspaced", range(0, 4)), ("compute", range(0, 4)))
    for depth in depths
)
OOD_SIZE = 60  # five problems in each of the 12 cells


@dataclass(frozen=True)
class OodProblem:
    """One out-of-distribution problem: its text, its exact integer answer, its form and depth (`OOD_CELLS`)."""

    text: str
    answer: str
    form: str
    depth: int


def write_in_form(a: int, op: str, b: int, form: str, depth: int) -> str:
    """``a op b`` in one of the set's forms at ``depth`` (see the module's table).

    Raises:
        ValueError: an unknown form.
    """
    if form == "brackets":
        return f"What is {'[' * depth}{a} {op} {b}{']' * depth}?"
    if form == "unspaced":
        return f"What is {'(' * depth}{a}{op}{b}{')' * depth}?"
    if form == "compute":
        return f"Compute {'(' * depth}{a} {op} {b}{')' * depth}."
    raise ValueError(f"unknown out-of-distribution form {form!r}")


def ood_problems(size: int, seed: int) -> list[OodProblem]:
    """A fixed out-of-distribution set, same seed → same set; the cells of `OOD_CELLS` take turns.

    Its facts are drawn from their own stream (``random.Random(f"toy-ood:{seed}")``), not the validation set's,
    so that the two sets share no draw order.
    """
    rng = random.Random(f"toy-ood:{seed}")
    problems = []
    for i in range(size):
        form, depth = OOD_CELLS[i % len(OOD_CELLS)]
        a, op, b = rng.randint(0, 9), rng.choice(OPERATORS), rng.randint(0, 9)
        answer = str(integer_arithmetic(f"{a} {op} {b}"))
        problems.append(OodProblem(write_in_form(a, op, b, form, depth), answer, form, depth))
    return problems


class ToyOodWorld:
    """The out-of-distribution set as a world (`cpmobius.worlds.World`), named ``toy_ood``: its problems and their
    correct responses are known token for token, as the toy validation set's are."""

    name = "toy_ood"

    def validation_set(self, size: int | None, seed: int) -> tuple[list[str], list[str], list[str], list[str]]:
        """``size`` problems (`OOD_SIZE` when None) from ``seed``: ids (form, depth, index), texts, answers and
        correct responses (`cpmobius.toy.world.player_target`)."""
        rows = ood_problems(size or OOD_SIZE, seed)
        ids = [f"toy-ood-{r.form}{r.depth}-{i}" for i, r in enumerate(rows)]
        return ids, [r.text for r in rows], [r.answer for r in rows], [player_target(r) for r in rows]

    def solve(self, text: str) -> str | None:
        """Not known for arbitrary text in these forms (only the set's own problems have answers)."""
        return None

    def difficulty(self, text: str) -> int | None:
        return None


WORLD = ToyOodWorld()
