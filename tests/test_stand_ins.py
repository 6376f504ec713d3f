"""The tests' policy stand-in held against the policy protocol: every member `TrainedPolicy` declares exists on
`stand_ins.ScriptedPolicy`, and each method takes the protocol's parameters (names, kinds, defaults), so a change to
the seam that the stand-in misses fails here rather than in a test that happens to call the changed member."""

from __future__ import annotations

import inspect

from stand_ins import ScriptedPolicy

from cpmobius.policy_api import TrainedPolicy

MEMBERS = sorted(
    {name for name in vars(TrainedPolicy) if not name.startswith("_")} | set(TrainedPolicy.__annotations__)
)


def parameters(function) -> list[tuple[str, object, object]]:
    """(name, kind, default) of each parameter but ``self``."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values() if p.name != "self"]


def drift(cls: type) -> list[str]:
    """What ``cls`` (built like `ScriptedPolicy`) lacks of `TrainedPolicy`, or takes differently."""
    instance, problems = cls(lambda prompt, i: []), []
    for name in MEMBERS:
        declared = vars(TrainedPolicy).get(name)
        if not hasattr(instance, name):
            problems.append(f"{name}: missing")
        elif inspect.isfunction(declared) and parameters(getattr(cls, name)) != parameters(declared):
            problems.append(f"{name}: other parameters")
    return problems


def test_the_protocol_is_read_whole():
    assert {"generate", "decode_responses", "update", "save", "load", "guard", "tokenizer"} <= set(MEMBERS)


def test_the_stand_in_has_every_member_of_the_protocol_with_its_parameters():
    assert drift(ScriptedPolicy) == []


def test_a_stand_in_missing_a_member_or_a_parameter_is_caught():
    """The check itself fails on a stand-in that drifted from the protocol."""

    class Drifted(ScriptedPolicy):
        def generate(self, prompts, n=1):  # no ``validate``, no ``greedy``
            return super().generate(prompts, n)

        @property
        def decode_responses(self):  # as if it were not there
            raise AttributeError("decode_responses")

    assert drift(Drifted) == ["decode_responses: missing", "generate: other parameters"]
