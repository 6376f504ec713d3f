"""Chat prompts' tokens as verl's agent loop renders them (chat template, generation prompt), and the check that
they fit the rollout's prompt length; `cpmobius.engine.policy.Policy` answers through one `PromptTokens`."""

from __future__ import annotations

from typing import Any, Sequence

from cpmobius.engine.agent_loop import PromptTooLongError
from cpmobius.prompts import Messages

COUNTS_KEPT = 8192  # token counts of distinct prompts remembered (a run's last few steps of Coach candidates)


class PromptTokens:
    """One policy's prompt tokenisation.

    Args:
        name: the policy's name, for errors.
        tokenizer: its tokenizer (with the chat template verl's agent loop applies).
        template_kwargs: extra ``apply_chat_template`` arguments (``data.apply_chat_template_kwargs``).
        limit: ``rollout.prompt_length``, the most tokens a rendered prompt may have.
    """

    def __init__(self, name: str, tokenizer: Any, template_kwargs: dict, limit: int) -> None:
        self.name, self.tokenizer, self.template_kwargs, self.limit = name, tokenizer, template_kwargs, limit
        self.counts: dict[tuple, int] = {}  # a prompt's (role, content) pairs → its tokens

    def ids(self, prompts: Sequence[Messages]) -> list[list[int]]:
        """P chat-message lists → P lists of token ids."""
        render = self.tokenizer.apply_chat_template
        options = dict(add_generation_prompt=True, tokenize=True, return_dict=False, **self.template_kwargs)
        return [list(render(list(prompt), **options)) for prompt in prompts]

    def count(self, prompts: Sequence[Messages]) -> list[int]:
        """P chat-message lists → P token counts. Each distinct prompt is tokenised once: the difficulty filter
        counts a candidate's prompt to reject it when too long, and generation checks the same prompt again."""
        keys = [tuple((m["role"], m["content"]) for m in prompt) for prompt in prompts]
        for key, prompt in zip(keys, prompts):
            if key not in self.counts:
                if len(self.counts) >= COUNTS_KEPT:
                    self.counts.clear()
                self.counts[key] = len(self.ids([prompt])[0])
        return [self.counts[key] for key in keys]

    def check(self, prompts: Sequence[Messages]) -> None:
        """Refuse prompts that do not fit the limit (verl would cut them from the left).

        Raises:
            PromptTooLongError: naming the first offending prompt, its length and the limit.
        """
        over = [(i, n) for i, n in enumerate(self.count(prompts)) if n > self.limit]
        if over:
            index, tokens = over[0]
            raise PromptTooLongError(
                f"{self.name}: {len(over)} of {len(prompts)} prompts exceed rollout.prompt_length={self.limit} "
                f"tokens (data.max_prompt_length); prompt {index} has {tokens}. Nothing is cut silently: raise the "
                "limit or shorten the prompts"
            )
