"""Which token ids end a response, from the tokenizer, its chat template and the generation config.

Qwen2.5 models end a chat turn with ``<|im_end|>`` and pad (base models: also end text) with
``<|endoftext|>``. A base model such as Qwen2.5-Math-1.5B has ``eos = <|endoftext|>`` in its
tokenizer and generation config, yet under the chat template it ends its answer with
``<|im_end|>``: an engine that stops only at the EOS id runs every response on to the length limit
(and the loop would count each one as truncated). One rule for every engine and for the loop's
truncation check: the generation config's EOS ids, the tokenizer's EOS, and each end-of-turn token
that the chat template writes.
"""

from __future__ import annotations

from typing import Any, Optional

# End-of-turn markers of the chat templates our base models use (Qwen2.5 / ChatML, Llama 3).
END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>")


def token_id_list(value: Any) -> list[int]:
    """An id, a collection of ids or None (as tokenizers and generation configs give them), as a list."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        return [int(v) for v in value]
    return [int(value)]


def stop_token_ids(tokenizer: Any, generation_config: Optional[Any] = None) -> tuple[int, ...]:
    """Sorted token ids at which generation stops.

    Args:
        tokenizer: a Hugging Face tokenizer (``eos_token_id``, ``chat_template``, ``convert_tokens_to_ids``).
        generation_config: the model's `GenerationConfig` (or None); its ``eos_token_id`` may be an
            int or a list.

    Returns:
        The union of the generation config's EOS ids, the tokenizer's EOS id and the id of every
        `END_OF_TURN_TOKENS` entry that is in the vocabulary and written by the chat template.
    """
    ids = set(token_id_list(getattr(generation_config, "eos_token_id", None)))
    ids |= set(token_id_list(tokenizer.eos_token_id))
    template = getattr(tokenizer, "chat_template", None) or ""
    for token in END_OF_TURN_TOKENS:
        if token in template:
            token_id = tokenizer.convert_tokens_to_ids(token)
            if token_id is not None and token_id != getattr(tokenizer, "unk_token_id", None):
                ids.add(int(token_id))
    return tuple(sorted(ids))
