"""The per-request pieces of the HF rollout's batched generation (`cpmobius.engine.hf_server`).

- `SamplingKey`: the sampling parameters the rows of one ``model.generate`` call share; the server
  groups concurrent requests by it.
- `request_seed` and `SeededSampler`: under ``rollout.full_determinism`` each request samples with
  its own seed, so a row's tokens do not depend on which requests share its batch.
- `RawLogProbRecorder`: the log-probs of the raw logits (before temperature and truncation), as
  vLLM's default ``raw_logprobs``.
- `torch_dtype`: ``rollout.dtype`` as a torch dtype (the server's weights and the weight transfer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch


def torch_dtype(name: str) -> torch.dtype:
    """``"bf16"`` / ``"bfloat16"`` / ``"fp16"`` / ``"float16"`` as a torch dtype; float32 for anything else."""
    return {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}.get(
        str(name), torch.float32
    )


@dataclass(frozen=True)
class SamplingKey:
    """The sampling parameters that must be shared by the rows of one ``generate`` call."""

    temperature: float
    top_p: float
    top_k: int
    repetition_penalty: float
    max_new_tokens: int
    stop_token_ids: tuple[int, ...]


def request_seed(base_seed: int, global_steps: Optional[int], request_id: str) -> int:
    """A 63-bit sampling seed for one request, from the server seed, the weights' step and the id."""
    import hashlib

    digest = hashlib.sha256(f"{base_seed}:{global_steps}:{request_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    """An unsigned 64-bit constant as the int64 torch holds (two's complement)."""
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN, _MIX1, _MIX2 = _signed(0x9E3779B97F4A7C15), _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finaliser, elementwise on int64 (wrapping arithmetic): a counter → 64 random bits."""
    x = x + _GOLDEN
    x = (x ^ _shift_right(x, 30)) * _MIX1
    x = (x ^ _shift_right(x, 27)) * _MIX2
    return x ^ _shift_right(x, 31)


def counter_uniform(seeds: torch.Tensor, step: int) -> torch.Tensor:
    """(rows,) float64 uniforms in (0, 1), a pure function of (row seed, step): 53-bit, one per row.

    A row's number depends on its seed alone, never on the other rows, so a batch needs no per-row
    generator: one vectorised computation on the seeds' device.
    """
    bits = splitmix64(seeds.to(torch.int64) ^ splitmix64(torch.tensor(step, dtype=torch.int64, device=seeds.device)))
    return (_shift_right(bits, 11).double() + 0.5) * 2.0**-53


def inverse_cdf_draw(scores: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """(rows, 1) int64 token ids: row r's token is the first whose cumulative softmax(scores[r])
    exceeds ``uniforms[r]`` — an exact sample of softmax(scores[r]) for a uniform in (0, 1).

    scores: (rows, vocab) logits after the warpers (``-inf`` where a token was removed); uniforms:
    (rows,) float64. In float64, so a token's interval is its probability to ~1e-16; a removed token
    has an empty interval and is never drawn (the rounding edge u·total == total falls back to the
    row's last possible token).
    """
    cdf = torch.softmax(scores.double(), dim=-1).cumsum(dim=-1)
    total = cdf[:, -1:]
    chosen = torch.searchsorted(cdf, uniforms[:, None].to(cdf.dtype) * total, right=True)
    last_possible = (cdf < total).sum(dim=-1, keepdim=True)  # the first index where the cdf reaches its total
    return torch.minimum(chosen, last_possible)


class SeededSampler:
    """The last logits processor under ``rollout.full_determinism``: draws each row's token from that
    row's own seed and leaves only that token possible, so generate()'s own draw is forced.

    A row's samples then depend on its request seed alone, not on which other requests share its
    batch or on the order they arrived in (as vLLM's per-request seeds do).

    On a CPU each row draws with its own ``torch.Generator`` (``torch.multinomial``). On an
    accelerator that would copy the (rows, vocab) probabilities to the host at every token (78 MB a
    step for 128 rows of Qwen2.5's 152k vocabulary) and sample row by row in Python: the HF rollout
    was host-bound (GPU 4-8% busy). There the draw is inverse-CDF sampling with one counter-based
    uniform per row (`counter_uniform`, `inverse_cdf_draw`), for all rows at once on the device: one
    softmax and one cumulative sum over the vocabulary. (The Gumbel-max draw it replaces needed a
    hashed noise value per row and token — (rows, vocab) 64-bit integer arithmetic at every token —
    and left the seeded rollout at 0.55x the speed of plain ``generate`` at 256 rows on an H200; on a
    CPU it costs 7x this draw.) Both are exact samplers of the same distribution; their
    streams differ, so a run replays exactly on the same kind of device.
    """

    def __init__(self, seeds: list[int], vectorised: Optional[bool] = None) -> None:
        self.seeds = list(seeds)
        self.vectorised = vectorised  # None: by the logits' device (vectorised off the CPU)
        self.generators: Optional[list[torch.Generator]] = None  # the CPU path's, made on its first draw
        self.step = 0
        self._seed_tensor: Optional[torch.Tensor] = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        vectorised = scores.device.type != "cpu" if self.vectorised is None else self.vectorised
        if vectorised:
            if self._seed_tensor is None or self._seed_tensor.device != scores.device:
                self._seed_tensor = torch.tensor(self.seeds, dtype=torch.int64, device=scores.device)
            chosen = inverse_cdf_draw(scores, counter_uniform(self._seed_tensor, self.step))
        else:
            if self.generators is None:
                self.generators = [torch.Generator().manual_seed(seed) for seed in self.seeds]
            probs = torch.softmax(scores.float(), dim=-1).cpu()
            chosen = torch.stack([torch.multinomial(probs[r], 1, generator=g) for r, g in enumerate(self.generators)])
        self.step += 1
        forced = torch.full_like(scores, float("-inf"))
        return forced.scatter_(1, chosen.to(scores.device), 0.0)


class RawLogProbRecorder:
    """A logits processor placed first, so it sees raw logits; records the chosen tokens' log-probs.

    At step t it receives the ids chosen up to step t-1 and the logits of step t, so it gathers the
    log-prob of the token chosen at t-1 from the log-softmax it kept from the previous call.
    Memory: one (batch, vocab) float32 tensor, whatever the response length.
    """

    def __init__(self) -> None:
        self._previous: Optional[torch.Tensor] = None
        self.log_probs: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._previous is not None:
            self.log_probs.append(self._previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self._previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens: torch.LongTensor) -> torch.Tensor:
        """(batch, generated_tokens) float32 log-probs, the last column for ``last_tokens``."""
        if self._previous is not None:
            self.log_probs.append(self._previous.gather(1, last_tokens[:, None]).squeeze(1))
        self._previous = None
        return torch.stack(self.log_probs, dim=1) if self.log_probs else torch.zeros(0)


def logits_processors(key: SamplingKey, recorder: RawLogProbRecorder, seeds: Optional[list[int]] = None) -> list[Any]:
    """The logits processors of one ``generate`` call, in order: the recorder, then what generate()
    would add for ``key`` (repetition penalty; temperature, top-k, top-p when sampling), then
    `SeededSampler` when ``seeds`` are given (sampling only).

    The recorder comes first so it sees raw logits; the processors generate() would add are passed
    explicitly after it, and the generation config asks for none of its own.
    """
    from transformers import (
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    processors: list[Any] = [recorder]
    if key.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(key.repetition_penalty))
    if key.temperature > 0:  # greedy (temperature 0) adds no warpers
        if key.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(key.temperature))
        if key.top_k > 0:
            processors.append(TopKLogitsWarper(key.top_k))
        if key.top_p < 1.0:
            processors.append(TopPLogitsWarper(key.top_p))
        if seeds is not None:
            processors.append(SeededSampler(seeds))
    return processors
