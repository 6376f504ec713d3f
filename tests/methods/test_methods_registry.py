"""The methods seam (`cpmobius.methods`): every method is one registered module with one YAML, the loop's step is the
same for all of them, no code outside the package branches on a method's name, and a new method plugs in as
docs/architecture.md shows it (a module, a YAML, a test) without touching the loop."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from stand_ins import ScriptedPolicy

from cpmobius.config import ConfigError, compose_config
from cpmobius.loop import CoachPlayerLoop
from cpmobius.methods import Method, get_method, method_names, register
from cpmobius.methods.base import _REGISTRY
from cpmobius.methods.fixed_pool import GroupReading, validation_pool
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cpmobius"


def test_every_registered_method_has_one_yaml_and_every_yaml_one_method():
    yamls = {path.stem for path in (ROOT / "configs" / "method").glob("*.yaml")}
    assert set(method_names()) == yamls == {"cpmobius", "rent", "rzero", "ttrl"}
    for name in method_names():
        assert get_method(name).name == name


def test_an_unknown_method_is_a_config_error_that_lists_the_methods():
    with pytest.raises(ConfigError, match=r"method\.name: must be one of \('cpmobius', 'rent', 'rzero', 'ttrl'\)"):
        load_settings(compose_config(["method.name=grpo"]))
    with pytest.raises(KeyError, match="the methods are"):
        get_method("grpo")


def method_name_comparisons(path: Path) -> list[str]:
    """``x == "rent"``-like comparisons (==, !=, in, not in) of anything with a registered method's name, and
    string matches on an expression that names a method (``method.name``, ``method``)."""
    names = set(method_names())
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        constants = {o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)}
        for o in operands:
            if isinstance(o, (ast.Tuple, ast.List, ast.Set)):
                constants |= {e.value for e in o.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        subject = " ".join(ast.unparse(o) for o in operands if not isinstance(o, ast.Constant))
        if constants & names and "method" in subject:
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_outside_the_methods_package_compares_a_methods_name():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "methods" not in path.relative_to(PACKAGE).parts:
            found += method_name_comparisons(path)
    assert not found, "branch on the method's class (cpmobius.methods), not its name:\n" + "\n".join(found)


def test_the_name_check_finds_a_comparison_it_is_meant_to_find(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        'def f(settings, method):\n    a = settings.method.name == "rent"\n    return method in ("ttrl", "x")\n'
        'def g(mode):\n    return mode == "cpmobius"  # a grading mode of the same spelling, not a method\n',
        encoding="utf-8",
    )
    assert [line.split(":")[1] for line in method_name_comparisons(sample)] == ["2", "3"]


class Echo(Method):
    """A method made for this test: the Player alone on the validation questions, each rollout rewarded 1 when it
    has an answer; the loop is not changed for it."""

    name = "echo_for_test"
    has_coach = False

    def problem_source(self, loop):
        def read(answers, n, mode):  # every rollout trains; it agrees when it has an answer
            return GroupReading(list(range(n)), None, [a is not None for a in answers], 1.0)

        return validation_pool(loop, loop.settings.player.n, read, "answered", prompts_per_step=2)


def test_a_new_method_is_a_registered_class_and_the_loop_runs_its_step_unchanged(tmp_path, monkeypatch):
    monkeypatch.setitem(_REGISTRY, Echo.name, Echo)
    register(Echo)  # registering the same class again is allowed; another class under its name is not
    with pytest.raises(ValueError, match="registered twice"):
        register(type("Other", (Method,), {"name": Echo.name}))
    player = ScriptedPolicy(lambda question, i: ["\\boxed{5}", "no answer"])
    overrides = [f"trainer.default_local_dir={tmp_path}", "method=rent", "player.n=2", "validation.metric=greedy"]
    cfg = compose_config(overrides)
    settings = load_settings(cfg)
    # A YAML of its own would set these: the registry accepts the name, and Echo has no keys of its own (RENT's
    # `method.prompts_per_step`, ..., composed above, would be refused as unknown to it).
    settings.method.name, settings.method.options = Echo.name, {}
    val_set = ValidationSet("v", ["0", "1"], ["What is 2 + 3?", "What is 1 + 4?"], ["5", "5"])
    loop = CoachPlayerLoop(cfg, settings, None, player, val_set=val_set)
    assert isinstance(loop.method, Echo)
    loop.delta.start(0.0, None)  # `fit` validates once before the first step
    metrics = loop.step()
    assert metrics["pool/answered_mean"] == 1.0 and metrics["player/reward_mean"] == 0.5
    assert "val/accuracy" in metrics and "coach/updated" not in metrics  # no Coach: the default update is none
    assert loop.stage_sequence() == ["difficulty_filter", "player_update", "validation", "coach_update", "rollback"]
