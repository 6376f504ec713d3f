"""Worlds: tasks that define their problems, so that the truth of anything a Coach writes is known (the toy world).

A world is named by ``validation.dataset``; a real data set (a benchmark, a JSONL file) is not a world. What the loop
and the checks use of one is `World`; `world_of` finds it. The registry holds where each world lives rather than the
world itself, so that the config checks (`cpmobius.settings`) ask `is_world` without importing it (the toy world
imports torch).
"""

from __future__ import annotations

from importlib import import_module
from typing import Optional, Protocol

# validation.dataset → "module:attribute" of the world
WORLDS = {"toy": "cpmobius.toy.world:WORLD", "toy_ood": "cpmobius.toy.ood:WORLD"}


class World(Protocol):
    """A task whose every problem text has a known answer and level."""

    name: str

    def validation_set(self, size: Optional[int], seed: int) -> tuple[list[str], list[str], list[str], list[str]]:
        """The world's validation problems: ids, texts, answers, and each one's correct response token for token."""
        ...

    def solve(self, text: str) -> Optional[str]:
        """The true answer of a problem text, or None when the text is not one of the world's problems."""
        ...

    def difficulty(self, text: str) -> Optional[int]:
        """The level of a problem text, or None when it has none."""
        ...


def is_world(dataset: str) -> bool:
    """Whether ``validation.dataset`` names a world (without importing it)."""
    return dataset in WORLDS


def world_of(dataset: str) -> Optional[World]:
    """The world ``validation.dataset`` names, or None for a real data set."""
    if dataset not in WORLDS:
        return None
    module, attribute = WORLDS[dataset].split(":")
    return getattr(import_module(module), attribute)
