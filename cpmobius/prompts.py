"""The chat prompts of both policies, in one place (public case BR-30).

The Player sees a problem the same way in training rollouts, in the Δt validation pass and in the
benchmark evaluation: one user turn holding the problem, preceded by ``player.system_prompt`` when
one is configured. With ``system_prompt: null`` the tokenizer's chat template decides the system
turn (Qwen2.5-Math's inserts "Please reason step by step, and put your final answer within
\\boxed{}.", which the released code relies on); with a string it is explicit in the config.
"""

from __future__ import annotations

from typing import Optional

Messages = list[dict[str, str]]


def coach_prompt(instruction: str) -> Messages:
    """The Coach's prompt: one user turn with the fixed instruction (released: "Generate a valid math problem.")."""
    return [{"role": "user", "content": instruction}]


def player_prompt(problem: str, system_prompt: Optional[str] = None) -> Messages:
    """The Player's prompt for one problem (training, validation and evaluation alike)."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": problem}]
