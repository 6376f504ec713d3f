r"""Benchmark generation for the evaluation: k sampled (or greedy) responses per prompt (stage: evaluation).

Two backends with one interface, `Generator.generate(prompt_ids, n, stop) -> list[list[Completion]]`,
prompts given as token ids (`cpmobius.eval.data.encode_prompt`: the chat template's own tokens, so a template
that writes `bos_token` gets exactly one BOS; text would be tokenized again with a second BOS):

* `VLLMGenerator`: `vllm.LLM` offline generation (the released evaluation's engine, notes §5.1:
  `tensor_parallel_size=1`, `gpu_memory_utilization=0.9`).
* `HFGenerator`: HF transformers `generate` on CPU or GPU, left-padded batches, a tqdm progress bar.

Sampling (`SamplingSettings`) defaults to the released protocol: T=0.7, top-p 0.9, repetition penalty
1.05, at most 4096 new tokens. `greedy=True` decodes greedily (T=0, top-p 1, and repetition penalty
1.0 unless one is given): one response is generated per prompt and copied k times (`plan_request`),
since greedy decoding is deterministic; no engine is asked for n>1 at temperature 0.

The request logic is pure and CPU-testable: `plan_request` (samples asked × copies),
`vllm_sampling_kwargs`, `vllm_inputs`, `replicate`, `left_pad`.

Departures from the released evaluation (`# CPMöbius:` in code): greedy decoding has no repetition
penalty unless asked for (the released greedy 7B-Instruct validation inherited 1.05 from its
sampling settings; our `--greedy` once silently applied 1.05 too); the released harness expands each
problem into k parquet rows and samples n=1 per row; we ask for k samples per prompt (`n=k`), which
draws from the same distribution (greedy: n=1, copied). Seeds are ours (the released run set none),
so reruns reproduce. A checkpoint's own Python code is never run unless asked for (`trust_remote_code`,
the CLI's `--trust-remote-code`; released: always on): Qwen2.5 and Llama need none.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional, Protocol, Sequence

_LOG = logging.getLogger(__name__)
# The released evaluation's repetition penalty when sampling.
SAMPLED_REPETITION_PENALTY = 1.05


@dataclass(frozen=True)
class SamplingSettings:
    """Decoding settings of an evaluation run (the released protocol by default).

    Attributes:
        temperature: softmax temperature (released 0.7); 0.0 when `greedy` (the value used).
        top_p: nucleus mass (released 0.9); 1.0 when `greedy`.
        repetition_penalty: HF/vLLM repetition penalty, 1.0 = none; None (the default) gives
            `SAMPLED_REPETITION_PENALTY` (released 1.05) when sampling and 1.0 when `greedy`.
        max_new_tokens: response budget in tokens (released 4096).
        greedy: argmax decoding (T=0) instead of sampling.
        seed: RNG seed of the run (ours; the released run set none).
    """

    temperature: float = 0.7
    top_p: float = 0.9
    repetition_penalty: Optional[float] = None
    max_new_tokens: int = 4096
    greedy: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.repetition_penalty is None:
            # CPMöbius: greedy means greedy; the released sampling protocol's 1.05 only when sampling.
            object.__setattr__(self, "repetition_penalty", 1.0 if self.greedy else SAMPLED_REPETITION_PENALTY)
        if self.greedy:  # the values decoding uses, so that run.json and the report state them
            object.__setattr__(self, "temperature", 0.0)
            object.__setattr__(self, "top_p", 1.0)
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
    """n responses for each prompt, given as token ids (already chat-templated)."""

    backend: str
    tokenizer: Any
    context_tokens: Optional[int]  # prompt + response tokens the model takes (None: unknown)

    def generate(
        self, prompts: Sequence[Sequence[int]], n: int, stop: Sequence[str] = (), desc: str = ""
    ) -> list[list[Completion]]: ...


@dataclass(frozen=True)
class RequestPlan:
    """How n responses per prompt are obtained from an engine.

    Attributes:
        samples_per_prompt: responses asked of the engine per prompt (vLLM's `n`).
        copies: each returned response is repeated this many times (samples_per_prompt × copies = n).
    """

    samples_per_prompt: int
    copies: int


def plan_request(n: int, greedy: bool) -> RequestPlan:
    """n sampled responses per prompt, or (greedy) one response copied n times.

    Raises:
        ValueError: n < 1.
    """
    if n < 1:
        raise ValueError(f"responses per prompt must be >= 1 (got {n})")
    # CPMöbius: greedy decoding is deterministic: decode once, copy (no engine is asked for n>1 at T=0).
    return RequestPlan(1, n) if greedy else RequestPlan(n, 1)


def replicate(outputs: Sequence[Sequence[Completion]], copies: int) -> list[list[Completion]]:
    """Each prompt's responses, each repeated `copies` times (independent `Completion` objects)."""
    return [[replace(c) for c in group for _ in range(copies)] for group in outputs]


def vllm_sampling_kwargs(sampling: SamplingSettings, n: int, stop: Sequence[str] = ()) -> tuple[dict[str, Any], int]:
    """`vllm.SamplingParams` keyword arguments for n responses per prompt, and the copies to make.

    Returns:
        (kwargs, copies): greedy → n=1, temperature 0, top-p 1, copies n; sampling → n=n, copies 1.
    """
    plan = plan_request(n, sampling.greedy)
    kwargs = dict(
        n=plan.samples_per_prompt,
        temperature=0.0 if sampling.greedy else sampling.temperature,
        top_p=1.0 if sampling.greedy else sampling.top_p,
        repetition_penalty=sampling.repetition_penalty,
        max_tokens=sampling.max_new_tokens,
        stop=list(stop) or None,
        seed=sampling.seed,
    )
    return kwargs, plan.copies


def vllm_inputs(prompts: Sequence[Sequence[int]]) -> list[dict[str, list[int]]]:
    """vLLM prompt inputs (`TokensPrompt` dicts) from token ids: vLLM adds no special tokens to these."""
    return [{"prompt_token_ids": [int(t) for t in ids]} for ids in prompts]


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[list[list[int]], list[list[int]]]:
    """Left-padded input ids and attention masks, (batch, longest prompt) each."""
    width = max(len(ids) for ids in prompts)
    ids = [[pad_id] * (width - len(p)) + list(p) for p in prompts]
    mask = [[0] * (width - len(p)) + [1] * len(p) for p in prompts]
    return ids, mask


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
        max_model_len: optional context cap (prompt + response tokens);
        trust_remote_code: run the Python code shipped with the checkpoint (off: only built-in architectures);
        engine_args: more `vllm.LLM` keyword arguments (``--engine-args``), for the engine's speed (batch
            width, speculative decoding, KV-cache size).

    Raises:
        ValueError: ``engine_args`` names an argument this class sets itself (its own option names it).
    """

    model: str
    sampling: SamplingSettings
    engine_args: dict = field(default_factory=dict)
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    dtype: str = "auto"
    max_model_len: Optional[int] = None
    trust_remote_code: bool = False
    backend: str = "vllm"
    llm: Any = field(default=None, init=False)
    tokenizer: Any = field(default=None, init=False)
    context_tokens: Optional[int] = field(default=None, init=False)

    def __post_init__(self) -> None:
        from vllm import LLM

        kwargs = dict(
            model=self.model,
            tensor_parallel_size=self.tensor_parallel_size,
            # CPMöbius: off unless asked for (released: on, so a downloaded checkpoint ran its own code).
            trust_remote_code=self.trust_remote_code,
            gpu_memory_utilization=self.gpu_memory_utilization,
            dtype=self.dtype,
            seed=self.sampling.seed,
        )
        if self.max_model_len:
            kwargs["max_model_len"] = self.max_model_len
        clash = sorted(set(self.engine_args) & (set(kwargs) | {"max_model_len"}))
        if clash:
            raise ValueError(
                f"--engine-args: {clash} are set by their own options "
                f"({', '.join('--' + key.replace('_', '-') for key in clash)}), not here"
            )
        try:
            # A copy: vLLM fills the dicts it is given in place (a speculative config gains the target model's
            # config object), and these arguments are written to run.json afterwards.
            self.llm = LLM(**kwargs, **copy.deepcopy(self.engine_args))
        except TypeError as error:  # an argument vllm.LLM does not take: one line, not a traceback
            if not self.engine_args:
                raise
            raise ValueError(f"--engine-args {sorted(self.engine_args)}: vllm.LLM refused them ({error})") from error
        self.tokenizer = self.llm.get_tokenizer()
        model_config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        self.context_tokens = int(getattr(model_config, "max_model_len", 0) or self.max_model_len or 0) or None

    def generate(
        self, prompts: Sequence[Sequence[int]], n: int, stop: Sequence[str] = (), desc: str = ""
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        # CPMöbius: n=k samples per prompt (released: k copies of each row, n=1 each); greedy: n=1, copied k times.
        kwargs, copies = vllm_sampling_kwargs(self.sampling, n, stop)
        outputs = self.llm.generate(vllm_inputs(prompts), SamplingParams(**kwargs), use_tqdm=True)
        return replicate(
            [
                [
                    Completion(o.text, len(o.token_ids), "length" if o.finish_reason == "length" else "stop")
                    for o in out.outputs
                ]
                for out in outputs
            ],
            copies,
        )


@dataclass
class HFGenerator:
    """HF transformers generation (CPU or one GPU), batched, with a progress bar.

    Args:
        model: local folder or hub id; sampling: the run's `SamplingSettings`;
        device: "cpu", "cuda" or "auto" (CUDA when available);
        dtype: "auto" (bf16 on CUDA, fp32 on CPU), "bfloat16", "float16" or "float32";
        batch_size: sequences per `generate` call (prompts × samples);
        trust_remote_code: run the Python code shipped with the checkpoint (off: only built-in architectures).
    """

    model: str
    sampling: SamplingSettings
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 16
    trust_remote_code: bool = False
    backend: str = "hf"
    net: Any = field(default=None, init=False)
    tokenizer: Any = field(default=None, init=False)
    context_tokens: Optional[int] = field(default=None, init=False)

    def __post_init__(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 (got {self.batch_size})")
        device = ("cuda" if torch.cuda.is_available() else "cpu") if self.device == "auto" else self.device
        dtype = {
            "auto": torch.bfloat16 if device.startswith("cuda") else torch.float32,
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
            "float32": torch.float32,
        }.get(self.dtype)
        if dtype is None:
            raise ValueError(f"unknown dtype {self.dtype!r}; expected auto, bfloat16, float16 or float32")
        self.tokenizer = AutoTokenizer.from_pretrained(self.model, trust_remote_code=self.trust_remote_code)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.net = AutoModelForCausalLM.from_pretrained(
            self.model, dtype=dtype, trust_remote_code=self.trust_remote_code
        ).to(device)
        self.net.eval()
        self.context_tokens = int(getattr(self.net.config, "max_position_embeddings", 0) or 0) or None
        self.device = device

    def _eos_ids(self) -> list[int]:
        ids = self.net.generation_config.eos_token_id
        ids = list(ids) if isinstance(ids, (list, tuple)) else ([ids] if ids is not None else [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        return ids

    def generate(
        self, prompts: Sequence[Sequence[int]], n: int, stop: Sequence[str] = (), desc: str = ""
    ) -> list[list[Completion]]:
        import torch
        from tqdm.auto import tqdm

        s = self.sampling
        plan = plan_request(n, s.greedy)  # greedy: one response per prompt, copied n times
        jobs = [(i, p) for i, p in enumerate(prompts) for _ in range(plan.samples_per_prompt)]
        # Longest prompts first: similar lengths share a batch (less padding); results go back in order.
        order = sorted(range(len(jobs)), key=lambda j: -len(jobs[j][1]))
        results: list[list[Completion]] = [[] for _ in prompts]
        done: dict[int, Completion] = {}
        eos = self._eos_ids()
        torch.manual_seed(s.seed)
        with tqdm(total=len(jobs), desc=desc or "generate", unit="resp") as bar:
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                ids, mask = left_pad([jobs[j][1] for j in idx], self.tokenizer.pad_token_id)
                enc = {
                    "input_ids": torch.tensor(ids, device=self.device),
                    "attention_mask": torch.tensor(mask, device=self.device),
                }
                kwargs = dict(
                    max_new_tokens=s.max_new_tokens,
                    repetition_penalty=s.repetition_penalty,
                    eos_token_id=eos,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
                if s.greedy:
                    kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
                else:
                    kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=0)
                if stop:
                    kwargs.update(stop_strings=list(stop), tokenizer=self.tokenizer)
                with torch.no_grad():
                    out = self.net.generate(**enc, **kwargs)
                for row, j in enumerate(idx):
                    done[j] = self._completion(out[row, enc["input_ids"].shape[1] :].tolist(), eos, stop)
                bar.update(len(idx))
        for j, (i, _) in enumerate(jobs):
            results[i].append(done[j])
        return replicate(results, plan.copies)

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
        options: `tensor_parallel_size`, `gpu_memory_utilization`, `max_model_len`, `engine_args` (vLLM);
            `device`, `batch_size` (HF); `dtype`, `trust_remote_code` (both; default off).

    Raises:
        ValueError: unknown backend, "vllm" asked for without vLLM installed, or `engine_args` for the HF backend.
    """
    if backend not in ("auto", "vllm", "hf"):
        raise ValueError(f"unknown backend {backend!r}; expected auto, vllm or hf")
    if backend == "vllm" or (backend == "auto" and vllm_available()):
        if not vllm_available():
            raise ValueError(
                "--backend vllm, but vllm cannot be imported: install it (bash scripts/install.sh gpu), "
                "or use --backend hf"
            )
        keys = (
            "tensor_parallel_size",
            "gpu_memory_utilization",
            "max_model_len",
            "dtype",
            "trust_remote_code",
            "engine_args",
        )
        return VLLMGenerator(model, sampling, **{k: v for k, v in options.items() if k in keys and v is not None})
    if options.get("engine_args"):
        raise ValueError("--engine-args are vLLM's: the HF backend takes none (drop them, or use --backend vllm)")
    keys = ("device", "batch_size", "dtype", "trust_remote_code")
    return HFGenerator(model, sampling, **{k: v for k, v in options.items() if k in keys and v is not None})
