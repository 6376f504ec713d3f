"""Attention over packed rows at the cost of each sequence's own attention, without the flash-attn package.

verl's remove-padding path packs a micro-batch's sequences into one row and tells them apart by their
position ids. With transformers' ``sdpa`` attention that row gets a block-diagonal mask and the kernel
computes the whole (row x row) score matrix: at 8,192 tokens a micro-batch a third of the Player update's
device time went to attention scores that the mask then throws away (profile on one H200,
`benchmarks/bench_update_gpu.py --profile`). The flash-attn package, whose varlen kernel verl expects,
has no binary wheel.

``attn_implementation=sdpa_varlen`` (the GPU presets) runs PyTorch's own variable-length flash attention
(`torch.nn.attention.varlen.varlen_attn`, CUDA) on the packed tokens, with the sequence boundaries read
from the position ids (a sequence starts wherever the position does not follow the previous one); on a CPU
each sequence gets its own causal ``sdpa`` call. Every other call — a padding mask, a KV cache, no position
ids — goes to transformers' ``sdpa`` unchanged, with the mask ``sdpa`` would get. `register` must run in
each process that builds a model with it (`cpmobius.engine.worker` does, before verl builds the models).
Every other process (verl's model merger, vLLM, a user's ``from_pretrained``) knows only transformers' own
names, so an HF config we save names ``sdpa`` instead (`write_standard_attention`): the same attention.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from pathlib import Path
from typing import Any, Optional

import torch

NAME = "sdpa_varlen"

# The position ids of the last packed row seen and their boundaries: every layer of one forward pass
# (and its recomputation under gradient checkpointing) gets the same tensor, so the boundaries and the
# one device-to-host copy of the longest length are computed once a pass.
_boundaries_cache: list[Any] = [None, None, 0]


def sequence_boundaries(position_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Cumulative sequence starts of a packed row and its longest sequence.

    Args:
        position_ids: (batch, tokens) int; rows are read one after the other as one stream.

    Returns:
        ``cu_seqlens``, (sequences + 1,) int32 on the same device, from 0 to batch x tokens, and the
        longest sequence's length. A sequence starts at the first token and wherever a position is not
        the previous one plus one (a new sequence restarting at 0, or a row boundary).
    """
    flat = position_ids.reshape(-1)
    starts = torch.ones_like(flat, dtype=torch.bool)
    starts[1:] = flat[1:] != flat[:-1] + 1
    if position_ids.dim() == 2:  # every row starts a sequence, whatever its first position
        starts[:: position_ids.shape[-1]] = True
    total = torch.tensor([flat.numel()], device=flat.device)
    cu_seqlens = torch.cat([starts.nonzero().flatten(), total]).to(torch.int32)
    return cu_seqlens, int((cu_seqlens[1:] - cu_seqlens[:-1]).max())


def _cached_boundaries(position_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    if _boundaries_cache[0] is not position_ids:
        _boundaries_cache[:] = [position_ids, *sequence_boundaries(position_ids)]
    return _boundaries_cache[1], _boundaries_cache[2]


@functools.lru_cache(maxsize=1)
def _varlen_kwargs() -> dict[str, Any]:
    """Causal attention and shared KV heads, in the keywords this PyTorch's `varlen_attn` takes (read once)."""
    from torch.nn.attention.varlen import varlen_attn

    params = inspect.signature(varlen_attn).parameters
    kwargs: dict[str, Any] = {"window_size": (-1, 0)} if "window_size" in params else {"is_causal": True}
    if "enable_gqa" in params:
        kwargs["enable_gqa"] = True
    return kwargs


def per_sequence_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, scale: Optional[float]
) -> torch.Tensor:
    """Causal attention of each packed sequence on its own, one ``sdpa`` call each (the CPU path).

    Args:
        q: (tokens, heads, dim); k, v: (tokens, kv heads, dim); cu_seqlens: (sequences + 1,).

    Returns:
        (tokens, heads, dim).
    """
    groups = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        qs, ks, vs = (t[start:end].transpose(0, 1) for t in (q, k, v))
        ks, vs = ks.repeat_interleave(groups, dim=0), vs.repeat_interleave(groups, dim=0)
        attended = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale)
        out[start:end] = attended.transpose(0, 1)
    return out


def sdpa_varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Optional[torch.Tensor],
    scaling: Optional[float] = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: q (batch, heads, tokens, dim), k/v (batch, kv heads, ...).

    Returns (batch, tokens, heads, dim) and no attention weights, as ``sdpa`` does.

    Raises:
        ValueError: attention dropout or a sliding window on packed rows (neither is supported here; such
            models need ``attn_implementation=sdpa``).
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    position_ids = kwargs.get("position_ids")
    packed = (
        attention_mask is None and position_ids is not None and query.shape[2] == key.shape[2] == position_ids.shape[-1]
    )
    if not packed:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
        )
    if dropout or kwargs.get("sliding_window") is not None:
        raise ValueError(f"{NAME}: attention dropout and sliding windows are not supported; use sdpa")
    batch, heads, tokens, dim = query.shape
    cu_seqlens, longest = _cached_boundaries(position_ids)
    q, k, v = (t.transpose(1, 2).reshape(batch * tokens, t.shape[1], dim) for t in (query, key, value))
    if not query.is_cuda:
        out = per_sequence_attention(q, k, v, cu_seqlens, scaling)
        return out.reshape(batch, tokens, heads, dim), None
    from torch.nn.attention.varlen import varlen_attn

    extra = _varlen_kwargs()
    if "enable_gqa" not in extra and k.shape[1] != heads:
        k = k.repeat_interleave(heads // k.shape[1], dim=1)
        v = v.repeat_interleave(heads // v.shape[1], dim=1)
    out = varlen_attn(q, k, v, cu_seqlens, cu_seqlens, longest, longest, scale=scaling, **extra)
    return out.reshape(batch, tokens, heads, dim), None


def sdpa_varlen_mask(
    batch_size: int,
    q_length: int,
    kv_length: int,
    q_offset: int = 0,
    kv_offset: int = 0,
    attention_mask: Optional[torch.Tensor] = None,
    **kwargs: Any,
) -> Optional[torch.Tensor]:
    """No mask for rows without padding or cache (the attention reads the boundaries), else ``sdpa``'s."""
    from transformers.masking_utils import sdpa_mask

    if attention_mask is None and q_offset == 0 and kv_offset == 0 and q_length == kv_length:
        return None
    return sdpa_mask(
        batch_size, q_length, kv_length, q_offset=q_offset, kv_offset=kv_offset, attention_mask=attention_mask, **kwargs
    )


def register() -> None:
    """Make ``attn_implementation="sdpa_varlen"`` known to transformers in this process (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(NAME, sdpa_varlen_attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_varlen_mask)


def write_standard_attention(folder: str | os.PathLike) -> bool:
    """Name transformers' ``sdpa`` in place of ``sdpa_varlen`` in ``folder/config.json``, if it names it.

    verl saves the training model's config beside a checkpoint (``<policy>/huggingface``) and the Coach
    warm-up's HF model, both with the ``attn_implementation`` the model was built with. Only a process
    that ran `register` knows ``sdpa_varlen``: verl's model merger failed on such a checkpoint with
    "Specified `attn_implementation="sdpa_varlen"` is not supported" (a 1.5B run on one H100), and so
    would any ``from_pretrained`` of the folder. ``sdpa`` computes the same attention. The file is
    replaced atomically; a folder without ``config.json`` is left alone.

    Returns:
        whether the file was rewritten.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        return False
    config = json.loads(path.read_text())
    keys = [key for key in ("attn_implementation", "_attn_implementation") if config.get(key) == NAME]
    if not keys:
        return False
    for key in keys:
        config[key] = "sdpa"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return True
