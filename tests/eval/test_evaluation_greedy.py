"""`python -m cpmobius.eval --greedy` decodes greedily (it once still applied repetition penalty
1.05), the report states the decoding values used, and the evaluation prompt carries the \\boxed{}
instruction exactly as training does (`--answer-format`)."""

from __future__ import annotations

import json

import pytest

from cpmobius.eval import generation
from cpmobius.eval.cli import build_parser, main
from cpmobius.eval.generation import Completion, SamplingSettings, vllm_sampling_kwargs
from cpmobius.eval.report import generation_note
from cpmobius.prompts import BOXED_INSTRUCTION
from cpmobius.toy.tiny_models import build_char_tokenizer


def _sampling(argv):
    args = build_parser().parse_args(["--model", "m", *argv])
    return SamplingSettings(
        args.temperature, args.top_p, args.repetition_penalty, args.max_new_tokens, args.greedy, args.seed
    )


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["--greedy"], (0.0, 1.0, 1.0)),  # greedy means greedy
        (["--greedy", "--repetition-penalty", "1.05"], (0.0, 1.0, 1.05)),  # unless a penalty is asked for
        ([], (0.7, 0.9, 1.05)),  # the released sampling protocol
        (["--repetition-penalty", "1.0"], (0.7, 0.9, 1.0)),
        (["--greedy", "--temperature", "0.6", "--top-p", "0.5"], (0.0, 1.0, 1.0)),  # values greedy does not use
    ],
)
def test_the_sampling_settings_are_the_values_decoding_uses(argv, expected):
    s = _sampling(argv)
    assert (s.temperature, s.top_p, s.repetition_penalty) == expected
    kwargs, _ = vllm_sampling_kwargs(s, 1)
    assert (kwargs["temperature"], kwargs["top_p"], kwargs["repetition_penalty"]) == expected


class RecordingGenerator:
    """A generator that answers every prompt "\\boxed{0}" and keeps what it was given."""

    backend = "fake"
    context_tokens = None

    def __init__(self, sampling):
        self.sampling = sampling
        self.tokenizer = build_char_tokenizer()
        self.prompts = []

    def generate(self, prompts, n, stop=(), desc=""):
        self.prompts += [list(p) for p in prompts]
        return [[Completion("\\boxed{0}", 3, "stop") for _ in range(n)] for _ in prompts]


@pytest.fixture
def recorded(monkeypatch):
    made = []

    def make_generator(model, sampling, backend, **kwargs):
        made.append(RecordingGenerator(sampling))
        return made[-1]

    monkeypatch.setattr(generation, "make_generator", make_generator)
    return made


def test_greedy_run_records_and_reports_the_values_used(tmp_path, recorded, capsys):
    out = tmp_path / "eval"
    argv = [
        "--model",
        "toy/tiny-player",
        "--benchmarks",
        "demo",
        "--greedy",
        "--max-new-tokens",
        "16",
        "--bootstrap",
        "10",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert recorded[0].sampling.repetition_penalty == 1.0 and recorded[0].sampling.temperature == 0.0
    run = json.loads((out / "tiny-player" / "run.json").read_text())
    assert run["sampling"] == {
        "temperature": 0.0,
        "top_p": 1.0,
        "repetition_penalty": 1.0,
        "max_new_tokens": 16,
        "greedy": True,
        "seed": 0,
    }
    # the toy template asks for no \boxed{}: auto appends the instruction, as player.answer_format=auto does
    assert run["answer_format"] == "auto" and run["answer_instruction"] == BOXED_INSTRUCTION
    text = recorded[0].tokenizer.decode(recorded[0].prompts[0])
    assert text.endswith(f"\n{BOXED_INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n")
    line = (
        "Generation: greedy (temperature 0, top-p 1.0), repetition penalty 1.0, at most 16 new tokens; "
        f'answer format auto (appended: "{BOXED_INSTRUCTION}").'
    )
    assert line in (out / "tiny-player" / "results.md").read_text()
    assert f"tiny-player: {line}" in (out / "results.md").read_text()
    printed = capsys.readouterr().out
    assert printed.count(line) == 1 and f"tiny-player: {line}" in printed  # one model: its table is printed once
    # scoring the same completions again states the same values
    assert main(["--completions", str(out / "tiny-player" / "completions.jsonl"), "--bootstrap", "10"]) == 0
    assert line in capsys.readouterr().out


def test_answer_format_template_sends_the_bare_problem(tmp_path, recorded):
    argv = [
        "--model",
        "toy/tiny-player",
        "--benchmarks",
        "demo",
        "--greedy",
        "--max-new-tokens",
        "4",
        "--bootstrap",
        "10",
        "--answer-format",
        "template",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    assert "\\boxed" not in recorded[0].tokenizer.decode(recorded[0].prompts[0])
    assert json.loads((tmp_path / "tiny-player" / "run.json").read_text())["answer_instruction"] is None
    # another answer format in the same folder is another run: refused, not mixed
    argv[argv.index("template")] = "auto"
    assert main(argv) == 2


def test_generation_note_for_a_sampled_run():
    run = {
        "sampling": {
            "temperature": 0.7,
            "top_p": 0.9,
            "repetition_penalty": 1.05,
            "max_new_tokens": 4096,
            "greedy": False,
            "seed": 0,
        }
    }
    assert generation_note(run) == (
        "Generation: sampled (temperature 0.7, top-p 0.9, seed 0), repetition penalty 1.05, at most 4096 new tokens."
    )
    assert generation_note({}) is None
