r"""Benchmark generation for the evaluation: k sampled (or greedy) responses per prompt (stage: evaluation).

Two backends with one interface, `Generator.generate(prompts, n, stop) -> list[list[Completion]]`:

* `VLLMGenerator`: `vllm.LLM` offline generation (the released evaluation's engine, notes §5.1:
  `tensor_parallel_size=1`, `gpu_memory_utilization=0.9`, `trust_remote_code=True` by default).
* `HFGenerator`: HF transformers `generate` on CPU or GPU, left-padded batches, a tqdm progress bar.

Sampling (`SamplingSettings`) defaults to the released protocol: T=0.7, top-p 0.9, repetition penalty
1.05, at most 4096 new tokens. `greedy=True` decodes greedily (T=0, the same for every copy).

Departures from the released evaluation (`# CPMöbius:` in code): the released harness expands each
problem into k parquet rows and samples n=1 per row; we ask for k samples per prompt (`n=k`), which
draws from the same distribution. Seeds are ours (the released run set none), so reruns reproduce.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Protocol, Sequence

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingSettings:
    """Decoding settings of an evaluation run (the released protocol by default).

    Attributes:
        temperature: softmax temperature (released 0.7); ignored when `greedy`.
        top_p: nucleus mass (released 0.9).
        repetition_penalty: HF/vLLM repetition penalty (released 1.05).
        max_new_tokens: response budget in tokens (released 4096).
        greedy: argmax decoding (T=0) instead of sampling.
        seed: RNG seed of the run (ours; the released run set none).
    """

    temperature: float = 0.7
    top_p: float = 0.9
    repetition_penalty: float = 1.05
    max_new_tokens: int = 4096
    greedy: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.greedy and self.temperature <= 0:
            raise ValueError(f"temperature must be > 0 when sampling (got {self.temperature}); use greedy")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p})")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0 (got {self.repetition_penalty})")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1 (got {self.max_new_tokens})")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Completion:
    """One response: text (stop string excluded), response length in tokens, "stop" or "length"."""

    text: str
    response_tokens: int
    finish_reason: str


class Generator(Protocol):
    """k responses for each prompt text (already chat-templated)."""

    backend: str
    tokenizer: Any

    def generate(self, prompts: Sequence[str], n: int, stop: Sequence[str] = (),
                 desc: str = "") -> list[list[Completion]]:
        ...


def vllm_available() -> bool:
    """Whether `vllm` can be imported here."""
    try:
        import vllm  # noqa: F401
    except Exception:
        return False
    return True


@dataclass
class VLLMGenerator:
    """`vllm.LLM` offline generation (GPU clusters).

    Args:
        model: local folder or hub id; sampling: the run's `SamplingSettings`;
        tensor_parallel_size, gpu_memory_utilization, dtype: passed to `vllm.LLM`;
        max_model_len: optional context cap (prompt + response tokens).
    """

    model: str
    sampling: SamplingSettings
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    dtype: str = "auto"
    max_model_len: Optional[int] = None
    backend: str = "vllm"
    llm: Any = field(default=None, init=False)
    tokenizer: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        from vllm import LLM

        kwargs = dict(model=self.model, tensor_parallel_size=self.tensor_parallel_size, trust_remote_code=True,
                      gpu_memory_utilization=self.gpu_memory_utilization, dtype=self.dtype, seed=self.sampling.seed)
        if self.max_model_len:
            kwargs["max_model_len"] = self.max_model_len
        self.llm = LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, prompts: Sequence[str], n: int, stop: Sequence[str] = (), desc: str = "") -> list[list[Completion]]:
        from vllm import SamplingParams

        s = self.sampling
        # CPMöbius: n=k samples per prompt (released: k copies of each row, n=1 each); greedy copies are identical.
        params = SamplingParams(n=n, temperature=0.0 if s.greedy else s.temperature, top_p=1.0 if s.greedy else s.top_p,
                                repetition_penalty=s.repetition_penalty, max_tokens=s.max_new_tokens,
                                stop=list(stop) or None, seed=s.seed)
        outputs = self.llm.generate(list(prompts), params, use_tqdm=True)
        return [[Completion(o.text, len(o.token_ids), "length" if o.finish_reason == "length" else "stop")
                 for o in out.outputs] for out in outputs]


@dataclass
class HFGenerator:
    """HF transformers generation (CPU or one GPU), batched, with a progress bar.

    Args:
        model: local folder or hub id; sampling: the run's `SamplingSettings`;
        device: "cpu", "cuda" or "auto" (CUDA when available);
        dtype: "auto" (bf16 on CUDA, fp32 on CPU), "bfloat16", "float16" or "float32";
        batch_size: sequences per `generate` call (prompts × samples).
    """

    model: str
    sampling: SamplingSettings
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 16
    backend: str = "hf"
    net: Any = field(default=None, init=False)
    tokenizer: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {self.batch_size})")
        device = ("cuda" if torch.cuda.is_available() else "cpu") if self.device == "auto" else self.device
        dtype = {"auto": torch.bfloat16 if device.startswith("cuda") else torch.float32, "bfloat16": torch.bfloat16,
                 "float16": torch.float16, "float32": torch.float32}.get(self.dtype)
        if dtype is None:
            raise ValueError(f"unknown dtype {self.dtype!r}; expected auto, bfloat16, float16 or float32")
        self.tokenizer = AutoTokenizer.from_pretrained(self.model, trust_remote_code=True)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.net = AutoModelForCausalLM.from_pretrained(self.model, dtype=dtype, trust_remote_code=True).to(device)
        self.net.eval()
        self.device = device

    def _eos_ids(self) -> list[int]:
        ids = self.net.generation_config.eos_token_id
        ids = list(ids) if isinstance(ids, (list, tuple)) else ([ids] if ids is not None else [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        return ids

    def generate(self, prompts: Sequence[str], n: int, stop: Sequence[str] = (), desc: str = "") -> list[list[Completion]]:
        import torch
        from tqdm.auto import tqdm

        s = self.sampling
        jobs = [(i, p) for i, p in enumerate(prompts) for _ in range(n)]
        # Longest prompts first: similar lengths share a batch (less padding); results go back in order.
        order = sorted(range(len(jobs)), key=lambda j: -len(jobs[j][1]))
        results: list[list[Completion]] = [[] for _ in prompts]
        done: dict[int, Completion] = {}
        eos = self._eos_ids()
        torch.manual_seed(s.seed)
        with tqdm(total=len(jobs), desc=desc or "generate", unit="resp") as bar:
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                enc = self.tokenizer([jobs[j][1] for j in idx], return_tensors="pt", padding=True,
                                     add_special_tokens=False).to(self.device)
                kwargs = dict(max_new_tokens=s.max_new_tokens, repetition_penalty=s.repetition_penalty,
                              eos_token_id=eos, pad_token_id=self.tokenizer.pad_token_id)
                if s.greedy:
                    kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
                else:
                    kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=0)
                if stop:
                    kwargs.update(stop_strings=list(stop), tokenizer=self.tokenizer)
                with torch.no_grad():
                    out = self.net.generate(**enc, **kwargs)
                for row, j in enumerate(idx):
                    done[j] = self._completion(out[row, enc["input_ids"].shape[1]:].tolist(), eos, stop)
                bar.update(len(idx))
        for j, (i, _) in enumerate(jobs):
            results[i].append(done[j])
        return results

    def _completion(self, ids: list[int], eos: list[int], stop: Sequence[str]) -> Completion:
        """Cut at the first EOS/pad, decode, cut at the first stop string (vLLM's output convention)."""
        cut = next((t for t, tok in enumerate(ids) if tok in eos or tok == self.tokenizer.pad_token_id), None)
        finish = "stop" if cut is not None else "length"
        ids = ids if cut is None else ids[:cut]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        for marker in stop:
            if marker in text:
                text, finish = text[: text.index(marker)], "stop"
        return Completion(text, len(ids), finish)


def make_generator(model: str, sampling: SamplingSettings, backend: str = "auto", **options: Any) -> Generator:
    """A generator for `model`: vLLM when `backend` is "vllm" or "auto" with vLLM importable, else HF.

    Args:
        options: `tensor_parallel_size`, `gpu_memory_utilization`, `max_model_len` (vLLM);
            `device`, `batch_size` (HF); `dtype` (both).

    Raises:
        ValueError: unknown backend, or "vllm" asked for without vLLM installed.
    """
    if backend not in ("auto", "vllm", "hf"):
        raise ValueError(f"unknown backend {backend!r}; expected auto, vllm or hf")
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        if not vllm_available():
            raise ValueError("backend=vllm but vllm cannot be imported (pip install 'cpmobius[gpu]'), or use backend=hf")
        keys = ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype")
        return VLLMGenerator(model, sampling, **{k: v for k, v in options.items() if k in keys and v is not None})
    keys = ("device", "batch_size", "dtype")
    return HFGenerator(model, sampling, **{k: v for k, v in options.items() if k in keys and v is not None})
