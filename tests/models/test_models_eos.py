"""One EOS story: a converted real model stops where its chat template ends a turn.

After a GGUF conversion the Qwen2.5-Coder tokenizer said EOS = ``<|endoftext|>`` while its generation
config said ``<|im_end|>`` (SmolLM2's GGUF even says ``<|im_start|>``). `cpmobius.models.convert`
writes one story, the upstream instruct releases' own: tokenizer EOS = ``<|im_end|>``, pad =
``<|endoftext|>``, generation config EOS = [``<|im_end|>``, ``<|endoftext|>``]; and
`cpmobius.engine.stop_tokens` must then pick exactly those ids. Checked on the real Qwen2.5 tokenizer
in ../shared/data (skipped when absent) and on every converted folder in the model cache; the
SmolLM2 tokenizer is checked after its download in test_real_model.py (conftest's `one_eos_story`).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cpmobius.eval.data import default_data_dir
from cpmobius.models.registry import MODELS, is_converted, model_dir

QWEN_TOKENIZER = default_data_dir().parent / "tokenizers" / "qwen2.5-instruct"


@pytest.mark.skipif(not (QWEN_TOKENIZER / "tokenizer.json").exists(), reason="no Qwen2.5 tokenizer in ../shared/data")
def test_the_qwen_story_is_the_upstream_instruct_tokenizers_own():
    from transformers import AutoTokenizer, GenerationConfig

    from cpmobius.engine.stop_tokens import stop_token_ids
    from cpmobius.models.convert import apply_chat_tokens, chat_tokens

    tokenizer = AutoTokenizer.from_pretrained(QWEN_TOKENIZER)
    upstream = (tokenizer.eos_token, tokenizer.pad_token)  # Qwen2.5-*-Instruct as released
    assert chat_tokens(tokenizer) == upstream == ("<|im_end|>", "<|endoftext|>")
    for name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"):
        assert (MODELS[name].eos_token, MODELS[name].pad_token) == upstream
    # What the GGUF conversion gave before: tokenizer EOS <|endoftext|>, generation config <|im_end|>.
    tokenizer.eos_token = "<|endoftext|>"
    model = SimpleNamespace(
        config=SimpleNamespace(eos_token_id=151643, pad_token_id=None, bos_token_id=151643),
        generation_config=GenerationConfig(eos_token_id=151645),
    )
    apply_chat_tokens(tokenizer, model, *chat_tokens(tokenizer))
    assert (tokenizer.eos_token_id, tokenizer.pad_token_id) == (151645, 151643)
    assert (model.config.eos_token_id, model.config.pad_token_id) == (151645, 151643)
    assert (model.generation_config.eos_token_id, model.generation_config.pad_token_id) == ([151645, 151643], 151643)
    assert stop_token_ids(tokenizer, model.generation_config) == (151643, 151645)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_converted_folder_in_the_cache_tells_one_eos_story(name, one_eos_story):
    folder = model_dir(name)
    if not is_converted(folder):
        pytest.skip(f"{name} is not fetched here (python -m cpmobius.models fetch {name})")
    one_eos_story(folder)
