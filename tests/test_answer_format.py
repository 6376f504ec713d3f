r"""The Player's \boxed{} instruction, right for every chat template (`player.answer_format`).

Qwen2.5-Math's chat template inserts "Please reason step by step, and put your final answer within
\boxed{}." as its default system turn; Qwen2.5-Coder's (= Qwen2.5-Instruct's) and SmolLM2's do not, and
Qwen2.5-Coder-0.5B-Instruct answered "12 + 35 = 47", unboxed. With ``auto`` every Player prompt asks for
\boxed{} exactly once, in training, Δt validation and `python -m cpmobius.eval` alike.
"""

from __future__ import annotations

import pytest
from stand_ins import ScriptedPolicy

from cpmobius.config import ConfigError, compose_config
from cpmobius.eval.data import default_data_dir, encode_prompt, render_prompt
from cpmobius.prompts import (
    BOXED_INSTRUCTION,
    PlayerPrompt,
    player_prompt,
    resolve_answer_instruction,
    template_asks_for_boxed,
)
from cpmobius.settings import PlayerSettings, load_settings
from cpmobius.toy.tiny_models import build_char_tokenizer

QWEN_TOKENIZER = default_data_dir().parent / "tokenizers" / "qwen2.5-instruct"
needs_qwen = pytest.mark.skipif(not QWEN_TOKENIZER.is_dir(), reason="needs ../shared/data/tokenizers/qwen2.5-instruct")
INSTRUCT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
PROBLEM = "What is 12 + 35?"


@pytest.fixture(scope="module")
def qwen_instruct():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(QWEN_TOKENIZER))


@pytest.fixture(scope="module")
def qwen_math(qwen_instruct):
    """The Qwen2.5 tokenizer with Qwen2.5-Math's default system turn in its template (MANIFEST §6: the
    Math template differs from the Instruct one in that default; its exact file is not in shared/data)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(QWEN_TOKENIZER))
    assert tokenizer.chat_template.count(INSTRUCT_SYSTEM) == 2  # the plain and the tool-use branch
    # in the template's Jinja string literals the backslash is escaped, as in Qwen2.5-Math's template source
    tokenizer.chat_template = tokenizer.chat_template.replace(INSTRUCT_SYSTEM, BOXED_INSTRUCTION.replace("\\", "\\\\"))
    return tokenizer


def _render(tokenizer, problem=PROBLEM, system_prompt=None, answer_instruction=None):
    return render_prompt(tokenizer, problem, system_prompt, answer_instruction)


@needs_qwen
def test_auto_appends_the_instruction_to_a_template_without_it(qwen_instruct):
    # Qwen2.5-Coder / Qwen2.5-Instruct: the default system turn says nothing about \boxed
    assert not template_asks_for_boxed(qwen_instruct)
    instruction = resolve_answer_instruction("auto", qwen_instruct)
    assert instruction == BOXED_INSTRUCTION
    text = _render(qwen_instruct, answer_instruction=instruction)
    assert text == (
        f"<|im_start|>system\n{INSTRUCT_SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{PROBLEM}\n{BOXED_INSTRUCTION}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert text.count("\\boxed") == 1


@needs_qwen
def test_auto_adds_nothing_to_qwen_math_whose_template_boxes(qwen_math):
    # the released behaviour: the bare problem, the template's own system turn asks for \boxed{}
    assert template_asks_for_boxed(qwen_math)
    assert resolve_answer_instruction("auto", qwen_math) is None
    text = _render(qwen_math, answer_instruction=None)
    assert text == _render(qwen_math) and text.count("\\boxed") == 1
    assert f"<|im_start|>user\n{PROBLEM}<|im_end|>" in text


@needs_qwen
def test_a_boxed_system_prompt_counts_as_the_instruction(qwen_instruct):
    assert resolve_answer_instruction("auto", qwen_instruct, system_prompt=BOXED_INSTRUCTION) is None
    assert (
        resolve_answer_instruction("auto", qwen_instruct, system_prompt="You are a helpful math tutor.")
        == BOXED_INSTRUCTION
    )


@needs_qwen
def test_the_evaluation_prompt_is_the_training_prompt(qwen_instruct):
    # One prompt everywhere: `python -m cpmobius.eval` renders the messages the loop sends (`player_prompt`)
    instruction = resolve_answer_instruction("auto", qwen_instruct)
    encoded = encode_prompt(qwen_instruct, PROBLEM, None, instruction)
    assert encoded.text == qwen_instruct.apply_chat_template(
        player_prompt(PROBLEM, None, instruction), tokenize=False, add_generation_prompt=True
    )
    assert qwen_instruct.decode(encoded.token_ids) == encoded.text


def test_the_toy_template_lacks_the_instruction_and_the_toy_preset_keeps_its_prompt():
    # The toy Player is pretrained on the bare "What is ...?" turn: model=tiny says `template`, so the
    # default run's prompts are exactly as before; `auto` on the toy template would append.
    tokenizer = build_char_tokenizer()
    assert resolve_answer_instruction("auto", tokenizer) == BOXED_INSTRUCTION
    settings = load_settings(compose_config([]))
    assert settings.player.answer_format == "template"
    instruction = resolve_answer_instruction(settings.player.answer_format, tokenizer, settings.player.system_prompt)
    assert instruction is None
    assert player_prompt(PROBLEM, None, instruction) == [{"role": "user", "content": PROBLEM}]
    assert _render(tokenizer, answer_instruction=instruction) == (
        f"<|im_start|>user\n{PROBLEM}<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.parametrize(
    "overrides,expected",
    [
        (["model=qwen2p5_math_1p5b"], "auto"),
        (["experiment=released_qwen_1p5b"], "auto"),
        (["model=tiny"], "template"),
    ],
)
def test_presets_answer_format(overrides, expected):
    assert load_settings(compose_config(overrides)).player.answer_format == expected


def test_the_released_zero_template_boxes_so_auto_adds_nothing():
    from cpmobius.engine.config import policy_config

    cfg = compose_config(["experiment=released_octothinker_3b"])
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = policy_config(cfg, "player").actor_rollout_ref.model.custom_chat_template
    assert resolve_answer_instruction("auto", tokenizer) is None


def test_template_and_append_are_explicit():
    tokenizer = build_char_tokenizer()
    assert resolve_answer_instruction("template", tokenizer) is None
    assert resolve_answer_instruction("append", tokenizer) == BOXED_INSTRUCTION
    assert resolve_answer_instruction("template", None) is None  # no tokenizer read


def test_the_instruction_is_never_said_twice():
    # a problem that already asks for \boxed{} (the validator lets the empty format instruction through)
    problem = "What is 2 + 3? Put your answer in \\boxed{}."
    assert player_prompt(problem, None, BOXED_INSTRUCTION) == [{"role": "user", "content": problem}]
    assert player_prompt(PROBLEM, "sys", BOXED_INSTRUCTION) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": f"{PROBLEM}\n{BOXED_INSTRUCTION}"},
    ]


@pytest.mark.parametrize(
    "problem",
    [
        "What is 2 + 3? Put your answer in \\boxed{}.",
        "What is 2 + 3? Present the answer in LaTeX format: \\boxed{Your answer}",
        "What is 2 + 3? Write the final answer within \\boxed.",
    ],
)
def test_a_problem_that_asks_for_the_box_gets_no_second_instruction(problem):
    assert player_prompt(problem, None, BOXED_INSTRUCTION) == [{"role": "user", "content": problem}]


@pytest.mark.parametrize(
    "problem",
    [
        # Minerva's sub-problems quote the earlier sub-problem's solution, its answer boxed: they ask for nothing.
        "Preamble: A star has radius 2. Subproblem 0: find its area. Solution: the area is \\boxed{4\\pi}. "
        "Final answer: The final answer is 4\\pi. Subproblem 1: find its circumference.",
        "The previous answer was $\\boxed{12}$. Now double it.",
        "Explain what the \\boxed command does, then compute 2 + 3.",
    ],
)
def test_a_box_quoted_in_the_problem_does_not_replace_the_instruction(problem):
    assert player_prompt(problem, None, BOXED_INSTRUCTION) == [
        {"role": "user", "content": f"{problem}\n{BOXED_INSTRUCTION}"}
    ]


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="answer format must be one of"):
        resolve_answer_instruction("boxed", build_char_tokenizer())
    with pytest.raises(ConfigError, match="player.answer_format"):
        PlayerSettings(answer_format="boxed")
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        resolve_answer_instruction("auto", tokenizer)


def test_training_and_validation_carry_the_same_instruction():
    # With the instruction: the filter's rollouts and the Δt validation pass send identical prompts

    from cpmobius.difficulty_filter import roll_out_and_filter
    from cpmobius.settings import FilterSettings, ValidationSettings
    from cpmobius.validation import ValidationSet, measure_accuracy

    player = ScriptedPolicy(lambda question, i: ["\\boxed{47}"] * 4)
    prompt = PlayerPrompt(None, BOXED_INSTRUCTION)
    roll_out_and_filter(player, [PROBLEM], 4, FilterSettings(enabled=False), prompt)
    measure_accuracy(player, ValidationSet("v", ["0"], [PROBLEM], ["47"]), ValidationSettings(), prompt)
    assert player.prompts[0] == player.prompts[1] == [[{"role": "user", "content": f"{PROBLEM}\n{BOXED_INSTRUCTION}"}]]
