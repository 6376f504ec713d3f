"""``attn_implementation=sdpa_varlen``: packed rows attend within each sequence, everything else is ``sdpa``.

On this CPU the packed path runs each sequence's causal ``sdpa`` on its own (the CUDA path runs PyTorch's
varlen flash kernel instead; ``tests/engine/test_fast_path_gpu.py`` checks it against ``sdpa`` there). A tiny
Qwen2 with grouped KV heads: a packed row must give each sequence's logits and gradients as if it were
alone, and a padded batch must give ``sdpa``'s.
"""

from __future__ import annotations

import pytest
import torch

from cpmobius.engine import varlen_attention


@pytest.mark.parametrize(
    "position_ids, cu_seqlens, longest",
    [
        ([[0, 1, 2, 0, 1, 0, 1, 2, 3]], [0, 3, 5, 9], 4),  # three sequences restarting at 0
        ([[3, 4, 5, 0, 1]], [0, 3, 5], 3),  # a first sequence that does not start at 0
        ([[0, 1, 2], [5, 6, 7]], [0, 3, 6], 3),  # a row boundary starts a sequence whatever its positions
        ([[0, 1, 1, 2]], [0, 2, 4], 2),  # a repeated position is not a continuation
        ([[0]], [0, 1], 1),
    ],
)
def test_sequence_boundaries_are_read_from_the_position_ids(position_ids, cu_seqlens, longest):
    cu, most = varlen_attention.sequence_boundaries(torch.tensor(position_ids))
    assert cu.dtype == torch.int32 and cu.tolist() == cu_seqlens and most == longest


def tiny_models():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    varlen_attention.register()
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    sdpa = Qwen2ForCausalLM._from_config(config, attn_implementation="sdpa")
    varlen = Qwen2ForCausalLM._from_config(config, attn_implementation=varlen_attention.NAME)
    varlen.load_state_dict(sdpa.state_dict())
    assert varlen.config._attn_implementation == varlen_attention.NAME
    return sdpa, varlen


def test_a_packed_row_gives_each_sequence_its_own_logits_and_gradients():
    sdpa, varlen = tiny_models()
    sequences = [torch.randint(0, 64, (n,)) for n in (5, 9, 3)]
    packed = torch.cat(sequences)[None]
    positions = torch.cat([torch.arange(len(s)) for s in sequences])[None]
    alone = torch.cat([sdpa(input_ids=s[None]).logits[0] for s in sequences])
    together = varlen(input_ids=packed, position_ids=positions).logits[0]
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)
    alone.square().sum().backward()
    together.square().sum().backward()
    for (name, a), b in zip(sdpa.named_parameters(), varlen.parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)
    # Without the boundaries the row would be one sequence: the later sequences' logits would change.
    as_one = varlen(input_ids=packed).logits[0]
    assert (as_one[5:] - alone[5:]).abs().max() > 1e-3


def test_a_padded_batch_and_a_cache_go_to_sdpa():
    sdpa, varlen = tiny_models()
    ids = torch.randint(0, 64, (2, 7))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        torch.testing.assert_close(
            varlen(input_ids=ids, attention_mask=mask).logits, sdpa(input_ids=ids, attention_mask=mask).logits
        )
        greedy = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
        assert torch.equal(
            varlen.generate(ids, attention_mask=mask, **greedy), sdpa.generate(ids, attention_mask=mask, **greedy)
        )


def test_attention_dropout_on_a_packed_row_is_refused():
    _, varlen = tiny_models()
    varlen.config.attention_dropout = 0.1
    for layer in varlen.model.layers:
        layer.self_attn.attention_dropout = 0.1
    varlen.train()
    with pytest.raises(ValueError, match="dropout"):
        varlen(input_ids=torch.randint(0, 64, (1, 6)), position_ids=torch.tensor([[0, 1, 2, 0, 1, 2]]))


def test_a_saved_config_names_the_standard_attention(tmp_path):
    import json

    from cpmobius.engine.varlen_attention import write_standard_attention

    config = {"architectures": ["Qwen2ForCausalLM"], "attn_implementation": "sdpa_varlen", "hidden_size": 8}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert write_standard_attention(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text()) == {**config, "attn_implementation": "sdpa"}
    assert not write_standard_attention(tmp_path)  # already standard: left alone
    assert not write_standard_attention(tmp_path / "missing")
