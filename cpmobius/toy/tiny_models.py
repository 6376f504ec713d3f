"""Tiny Qwen2 models and a character tokenizer with a Qwen chat template, built locally.

The embedded default run, the tests and CI use these instead of downloaded checkpoints: a
random-initialised `Qwen2ForCausalLM` built from a config and a byte-level Qwen2 tokenizer whose
special tokens and chat template follow Qwen2.5 (``<|im_start|>``, ``<|im_end|>`` ends a turn,
``<|endoftext|>`` pads). Written to a folder in the HF layout verl loads with ``model.path``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

IM_START, IM_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)

# Qwen2.5's template without the default system turn: each turn is
# "<|im_start|>{role}\n{content}<|im_end|>\n", then "<|im_start|>assistant\n" for generation.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# About 0.5B parameters, shaped like Qwen2.5-0.5B (for GPU smoke runs); vocab padded like Qwen's.
QWEN2_0P5B_SPEC = {
    "hidden_size": 896,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "intermediate_size": 4864,
    "vocab_size": 151936,
}
TINY_SPEC = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
}


def build_char_tokenizer() -> Any:
    """A Qwen2 byte-level BPE tokenizer with no merges: one token per byte, plus Qwen's specials.

    It is a real `Qwen2Tokenizer` (the class transformers picks for a ``qwen2`` model), so verl's
    Qwen-specific chat-token handling applies unchanged. Ids 0–255 are the bytes (``"7"`` is 55),
    then ``<|endoftext|>`` (pad), ``<|im_start|>``, ``<|im_end|>`` (eos); ``decode(encode(s)) == s``.
    """
    from transformers.convert_slow_tokenizer import bytes_to_unicode
    from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

    byte_to_unicode = bytes_to_unicode()
    vocab = {byte_to_unicode[b]: b for b in range(256)}
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token=None, bos_token=None, eos_token=None, pad_token=None)
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS)})
    tokenizer.eos_token = IM_END
    tokenizer.pad_token = END_OF_TEXT
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.model_max_length = 4096
    return tokenizer


def tiny_qwen2_config(tokenizer: Any, spec: dict[str, int] | None = None) -> Any:
    """The `Qwen2Config` `build_tiny_qwen2` builds its model from (sizes from ``spec``, default `TINY_SPEC`)."""
    from transformers import Qwen2Config

    sizes = dict(TINY_SPEC if spec is None else spec)
    sizes.setdefault("vocab_size", len(tokenizer))
    return Qwen2Config(
        **sizes,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )


def build_tiny_qwen2(tokenizer: Any, spec: dict[str, int] | None = None, seed: int = 0) -> Any:
    """A random-initialised `Qwen2ForCausalLM` for ``tokenizer``.

    Args:
        tokenizer: gives the vocabulary size (unless ``spec`` sets ``vocab_size``) and special ids.
        spec: `Qwen2Config` sizes; defaults to `TINY_SPEC` (about 91K parameters with the byte tokenizer).
        seed: torch seed for the initialisation, so the same spec and seed give the same weights.
    """
    from transformers import Qwen2ForCausalLM

    config = tiny_qwen2_config(tokenizer, spec)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = Qwen2ForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def materialize_tiny_model(path: str | os.PathLike, spec: dict[str, int] | None = None, seed: int = 0) -> Path:
    """Write a tiny Qwen2 and the character tokenizer to ``path`` (HF layout), unless already there.

    The folder is reused when its ``cpmobius_spec.json`` records the same spec and seed; it is
    written to a temporary sibling and renamed, so a crash never leaves a half-written model.

    Returns:
        ``path`` as a `Path`.
    """
    path = Path(path).expanduser()
    record = {"spec": dict(TINY_SPEC if spec is None else spec), "seed": seed}
    marker = path / "cpmobius_spec.json"
    if marker.exists() and json.loads(marker.read_text()) == record:
        return path
    tokenizer = build_char_tokenizer()
    model = build_tiny_qwen2(tokenizer, spec, seed)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "cpmobius_spec.json").write_text(json.dumps(record))
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)
    return path
