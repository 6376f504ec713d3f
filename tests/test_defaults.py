"""Every method default exists once: in configs/cpmobius.yaml, which the settings dataclasses read.

A dataclass field whose default is written in settings.py as well (a literal where `default(...)` should
be) would let a test or notebook that builds the dataclass run other values than the command line.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from cpmobius import settings
from cpmobius.config import compose_config

SECTIONS = {
    "CoachSettings": "coach",
    "RollbackSettings": "player.rollback",
    "PlayerSettings": "player",
    "FilterSettings": "filter",
    "ValidationSettings": "validation",
    "WarmupSettings": "warmup",
}
NESTED = {("PlayerSettings", "rollback")}  # a sub-section, built from its own dataclass


def field_defaults() -> dict[tuple[str, str], ast.expr]:
    """(class, field) → the default's expression, as written in cpmobius/settings.py."""
    tree = ast.parse(Path(settings.__file__).read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in SECTIONS:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    found[(node.name, item.target.id)] = item.value
    return found


def test_every_default_is_read_from_the_main_config_and_nowhere_written_twice():
    fields = field_defaults()
    assert len(fields) >= 40
    for (cls, name), value in fields.items():
        if (cls, name) in NESTED:
            continue
        expected = f"default('{SECTIONS[cls]}.{name}')"  # as ast.unparse writes it
        assert value is not None and ast.unparse(value) == expected, f"{cls}.{name}: default {ast.unparse(value)}"


@pytest.mark.parametrize("cls", sorted(SECTIONS))
def test_a_dataclass_built_bare_equals_the_command_lines_defaults(cls):
    built = getattr(settings, cls)()
    composed = settings.load_settings(compose_config(["model=qwen2p5_math_1p5b"]))
    section = composed
    for part in SECTIONS[cls].split("."):
        section = getattr(section, part)
    assert dataclasses.asdict(built) == dataclasses.asdict(section)


def test_a_key_without_a_default_in_the_main_config_is_named():
    with pytest.raises(KeyError, match="filter.no_such_key: no default in configs/cpmobius.yaml"):
        settings.default("filter.no_such_key")
