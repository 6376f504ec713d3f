r"""The chat prompts of both policies, in one place, so training, validation and evaluation prompt alike.

The Player sees a problem the same way in training rollouts, in the Δt validation pass and in the
benchmark evaluation: one user turn holding the problem, preceded by ``player.system_prompt`` when
one is configured. With ``system_prompt: null`` the tokenizer's chat template decides the system
turn (Qwen2.5-Math's inserts "Please reason step by step, and put your final answer within
\\boxed{}.", which the released code relies on); with a string it is explicit in the config.

The answer format (``player.answer_format``, `resolve_answer_instruction`): every Player prompt asks
for the final answer in ``\boxed{}`` exactly once. Qwen2.5-Math's template already does; the templates
of Qwen2.5-Coder, SmolLM2 and most instruct models do not (on a real run Qwen2.5-Coder-0.5B-Instruct
answered "12 + 35 = 47", unboxed, and no boxed answer means no vote). With ``auto`` the instruction
`BOXED_INSTRUCTION` is appended to the user turn exactly when the rendered template lacks ``\boxed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

Messages = list[dict[str, str]]

# Qwen2.5-Math evaluation's chain-of-thought instruction (its "qwen25-math-cot" prompt puts it in the
# system turn, its "qwen-boxed" prompt after the problem in the user turn; the latter is used here,
# so that a template's own system turn is kept). The same words as Qwen2.5-Math's default system turn.
BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
# player.answer_format: auto = append BOXED_INSTRUCTION iff the rendered chat template lacks "\boxed";
# template = never (the chat template and system_prompt alone; the released code); append = always.
ANSWER_FORMATS = ("auto", "template", "append")
_BOXED = "\\boxed"
# A problem that itself asks for the box: an empty or placeholder box (`\boxed{}`, `\boxed{Your answer}`)
# or "in/within \boxed". A filled box in the text (Minerva's earlier sub-problems quote their solutions,
# `\boxed{5}`) asks for nothing.
_ASKS_FOR_BOX = re.compile(
    r"\\boxed\s*\{\s*(?:(?:your|the)\s+(?:final\s+)?answer(?:\s+here)?)?\s*\}"
    r"|\b(?:in|within|inside|into|using|with)\s+(?:a\s+)?\\boxed(?![A-Za-z])",
    re.IGNORECASE,
)


def coach_prompt(instruction: str) -> Messages:
    """The Coach's prompt: one user turn with the fixed instruction (released: "Generate a valid math problem.")."""
    return [{"role": "user", "content": instruction}]


def player_prompt(
    problem: str, system_prompt: Optional[str] = None, answer_instruction: Optional[str] = None
) -> Messages:
    """The Player's prompt for one problem (training, validation and evaluation alike).

    Args:
        problem: the problem text.
        system_prompt: an explicit system turn, or None for the chat template's own.
        answer_instruction: appended to the user turn after a newline (`resolve_answer_instruction`),
            unless None or the problem itself already asks for the box (an empty ``\\boxed{}`` or
            "within ``\\boxed``": it would be said twice); a filled ``\\boxed{5}`` quoted in the problem
            (Minerva's sub-problems quote earlier solutions) asks for nothing.

    Returns:
        ``[{"role": "system", ...}]`` when ``system_prompt`` is given, then ``{"role": "user", ...}``.
    """
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    user = problem
    if answer_instruction and not _ASKS_FOR_BOX.search(problem):
        # CPMöbius: the released code relies on Qwen2.5-Math's template for the answer format.
        user = f"{problem}\n{answer_instruction}"
    return messages + [{"role": "user", "content": user}]


@dataclass(frozen=True)
class PlayerPrompt:
    """The Player's prompt for a run: every filter rollout, prompt-length check and validation pass renders
    its problems through one of these, so they cannot drift apart (the loop makes it once, from
    ``player.system_prompt`` and the resolved ``player.answer_format``).

    Attributes:
        system_prompt: an explicit system turn, or None for the chat template's own.
        answer_instruction: appended to each user turn (`resolve_answer_instruction`), or None.
    """

    system_prompt: Optional[str] = None
    answer_instruction: Optional[str] = None

    def render(self, problems: Sequence[str]) -> list[Messages]:
        """(P,) problem texts → P chat prompts (`player_prompt`)."""
        return [player_prompt(problem, self.system_prompt, self.answer_instruction) for problem in problems]

    def fits(self, player: Any, problems: Sequence[str]) -> list[bool]:
        """Whether each problem's rendered prompt fits the Player's ``max_prompt_tokens`` (its chat template,
        generation prompt included; ``player.count_prompt_tokens``). (P,) texts → (P,) flags."""
        counts = player.count_prompt_tokens(self.render(problems)) if problems else []
        return [tokens <= player.max_prompt_tokens for tokens in counts]


def template_asks_for_boxed(tokenizer: Any, system_prompt: Optional[str] = None, **template_kwargs: Any) -> bool:
    """Whether the tokenizer's chat template, rendered for a Player prompt (``system_prompt`` and a
    placeholder user turn, generation prompt added), already contains ``\\boxed``.

    True for Qwen2.5-Math's template (its default system turn) and for a ``\\boxed`` system prompt;
    False for Qwen2.5-Coder's, SmolLM2's and the toy's.

    Raises:
        ValueError: the tokenizer has no chat template.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the Player's tokenizer has no chat template: player.answer_format=auto cannot read it")
    rendered = tokenizer.apply_chat_template(
        player_prompt("{problem}", system_prompt), tokenize=False, add_generation_prompt=True, **template_kwargs
    )
    return _BOXED in rendered


def resolve_answer_instruction(
    answer_format: str, tokenizer: Any, system_prompt: Optional[str] = None, **template_kwargs: Any
) -> Optional[str]:
    """The answer-format instruction every Player prompt gets (`player_prompt`'s ``answer_instruction``).

    Args:
        answer_format: one of `ANSWER_FORMATS` (``player.answer_format``, the evaluation's ``--answer-format``).
        tokenizer: the Player's tokenizer with the chat template it is prompted through (read by ``auto`` only).
        system_prompt: the Player's explicit system turn (``player.system_prompt``), or None.
        template_kwargs: extra ``apply_chat_template`` arguments (verl's ``data.apply_chat_template_kwargs``).

    Returns:
        `BOXED_INSTRUCTION` or None (nothing appended): ``template`` → None (released behaviour);
        ``append`` → the instruction; ``auto`` → None when `template_asks_for_boxed`, else the instruction.

    Raises:
        ValueError: an unknown ``answer_format``, or ``auto`` with a tokenizer without a chat template.
    """
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer format must be one of {ANSWER_FORMATS}, got {answer_format!r}")
    if answer_format == "template":
        return None
    if answer_format == "append":
        return BOXED_INSTRUCTION
    return None if template_asks_for_boxed(tokenizer, system_prompt, **template_kwargs) else BOXED_INSTRUCTION
