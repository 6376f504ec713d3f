"""The HF-transformers generation server of the ``rollout.name=hf`` rollout (a Ray actor).

verl 0.9.1 serves rollouts through vLLM, SGLang or TRT-LLM only; `cpmobius.engine.extensions`
registers an HF rollout in its place: the replica (`cpmobius.engine.hf_replica`) launches one
`HFGenerationServer` per replica, and the in-worker adapter (`cpmobius.engine.hf_adapter`) streams
the trained weights into it.

`HFGenerationServer` takes token ids in and gives token ids and log-probs out (`TokenOutput`).
Concurrent requests are collected for a few milliseconds and run as one batched ``model.generate``
call per distinct set of sampling parameters (`cpmobius.engine.hf_sampling.SamplingKey`);
temperature, top-p, top-k, repetition penalty, max tokens and stop tokens are honoured per
request. Log-probs are those of the raw logits (before temperature and truncation), as vLLM's
default ``raw_logprobs``. On CPU the server runs in float32; on CUDA in ``rollout.dtype`` (bf16 by
default) with SDPA.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import ray
import torch
from verl.workers.rollout.replica import RolloutMode, TokenOutput

from cpmobius.engine.hf_sampling import RawLogProbRecorder, SamplingKey, logits_processors, request_seed, torch_dtype
from cpmobius.engine.stop_tokens import stop_token_ids, token_id_list

logger = logging.getLogger(__name__)

# A batch runs once no request has arrived for this long (a quiet window, restarted by each arrival),
# or once the first request has waited MAX_BATCH_WAIT_S: the requests of one stage, which the agent
# loop's workers submit over tens of milliseconds, then share one full-length generate() instead of
# splitting into several (each as long as its longest row).
DEFAULT_BATCH_WINDOW_S = 0.005
MAX_BATCH_WAIT_S = 0.25


@dataclass
class _Request:
    prompt_ids: list[int]
    key: SamplingKey
    seed: Optional[int]
    future: asyncio.Future = field(repr=False)


class HFGenerationServer:
    """One HF-transformers model serving token-in/token-out requests (a Ray actor).

    Args:
        config: verl `RolloutConfig` of the policy.
        model_config: verl `HFModelConfig` of the policy (``local_path``, tokenizer, generation config).
        rollout_mode: hybrid (colocated with its trainer worker) in everything this project runs.
        replica_rank: rank of the replica this server belongs to.
        cuda_visible_devices: device ids of the replica's trainer worker; "" or None on a CPU.
        batch_window_s: the quiet window: a batch runs when no request arrived for this long
            (at most `MAX_BATCH_WAIT_S` after its first request).
    """

    def __init__(
        self,
        config: Any,
        model_config: Any,
        rollout_mode: RolloutMode,
        replica_rank: int,
        cuda_visible_devices: Optional[str] = None,
        batch_window_s: float = DEFAULT_BATCH_WINDOW_S,
    ) -> None:
        if cuda_visible_devices:  # before the first CUDA call of this process
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.config import HFModelConfig, RolloutConfig

        self.config = omega_conf_to_dataclass(config, dataclass_type=RolloutConfig)
        self.model_config = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        self.rollout_mode = rollout_mode
        self.replica_rank = replica_rank
        self.batch_window_s = batch_window_s
        self.device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
        self.dtype = torch_dtype(config.dtype) if self.device.type == "cuda" else torch.float32
        self.model: Optional[torch.nn.Module] = None
        self.global_steps: Optional[int] = None
        self.awake = True
        self._queue: Optional[asyncio.Queue] = None
        self._loop_task: Optional[asyncio.Task] = None
        self._gate_open: Optional[asyncio.Event] = None  # created on the actor's loop in launch_server
        self._received: set[str] = set()
        self.stats = {"batches": 0, "requests": 0, "generated_tokens": 0, "weight_syncs": 0}

    # ------------------------------------------------------------------ start-up

    async def launch_server(self) -> None:
        """Load the model and start the batching loop."""
        from transformers import AutoModelForCausalLM

        torch.manual_seed(int(self.config.seed) + self.replica_rank)
        self.model = AutoModelForCausalLM.from_pretrained(
            self.model_config.local_path,
            dtype=self.dtype,
            attn_implementation="sdpa",
            trust_remote_code=bool(self.model_config.trust_remote_code),
        ).to(self.device)
        self.model.eval()
        tokenizer = self.model_config.tokenizer
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.default_stop_ids = stop_token_ids(tokenizer, self.model_config.generation_config)
        self._queue = asyncio.Queue()
        self._gate_open = asyncio.Event()
        self._gate_open.set()
        self._loop_task = asyncio.get_running_loop().create_task(self._batching_loop())

    async def shutdown(self) -> None:
        """Stop the batching loop (tests and in-process use; Ray kills the actor otherwise)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass
            self._loop_task = None

    def get_server_address(self) -> tuple[str, int]:
        return ray.util.get_node_ip_address(), 0

    # ------------------------------------------------------------------ generation

    def _sampling_key(self, prompt_len: int, params: dict[str, Any]) -> SamplingKey:
        max_tokens = params.get("max_tokens", params.get("max_new_tokens"))
        if max_tokens is None:
            budget = self.config.prompt_length + self.config.response_length - prompt_len
            max_tokens = min(self.config.response_length, budget)
        max_tokens = max(1, int(max_tokens))
        stop_ids = set(self.default_stop_ids) | set(token_id_list(params.get("stop_token_ids")))
        if params.get("ignore_eos", False):
            stop_ids = set(token_id_list(params.get("stop_token_ids")))
        top_k = int(params.get("top_k", -1) or -1)
        return SamplingKey(
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=top_k if top_k > 0 else -1,
            repetition_penalty=float(params.get("repetition_penalty", 1.0) or 1.0),
            max_new_tokens=max_tokens,
            stop_token_ids=tuple(sorted(stop_ids)),
        )

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        **kwargs: Any,
    ) -> TokenOutput:
        """Generate one response; concurrent calls are batched.

        Args:
            prompt_ids: prompt token ids.
            sampling_params: ``temperature`` (0 = greedy), ``top_p``, ``top_k`` (-1 = off),
                ``repetition_penalty``, ``max_tokens``, ``stop_token_ids``, ``ignore_eos``, ``logprobs``.
            request_id: under ``rollout.full_determinism`` the request's sampling seed derives from
                it (and from the server seed and weight step); otherwise unused.

        Returns:
            `TokenOutput` with the response ids (ending with the stop token when one was hit) and
            their raw-logit log-probs.

        Raises:
            RuntimeError: when the server was put to sleep and generation is attempted.
        """
        if kwargs.get("image_data") or kwargs.get("video_data") or kwargs.get("audio_data"):
            raise NotImplementedError("the HF rollout serves text-only models")
        await self._gate_open.wait()
        if not self.awake:
            raise RuntimeError("HF rollout server is asleep: wake it (update_weights) before generating")
        prompt_ids = [int(t) for t in prompt_ids]
        key = self._sampling_key(len(prompt_ids), dict(sampling_params))
        future = asyncio.get_running_loop().create_future()
        seed = request_seed(self.config.seed, self.global_steps, request_id) if self.config.full_determinism else None
        await self._queue.put(_Request(prompt_ids, key, seed, future))
        token_ids, log_probs, stop_reason = await future
        want_log_probs = sampling_params.get("logprobs", True) not in (False, None)
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs if want_log_probs else None,
            stop_reason=stop_reason,
            num_preempted=0,
            extra_fields={"global_steps": self.global_steps},
        )

    async def _batching_loop(self) -> None:
        max_batch = max(1, int(self.config.max_num_seqs))
        while True:
            first = await self._queue.get()
            batch = [first]
            deadline = time.monotonic() + max(self.batch_window_s, MAX_BATCH_WAIT_S)
            while len(batch) < max_batch:
                timeout = min(self.batch_window_s, deadline - time.monotonic())
                if timeout <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), timeout))
                except asyncio.TimeoutError:
                    break
            while not self._queue.empty() and len(batch) < max_batch:
                batch.append(self._queue.get_nowait())
            groups: dict[tuple[SamplingKey, bool], list[_Request]] = {}
            for request in batch:
                groups.setdefault((request.key, request.seed is not None), []).append(request)
            for (key, seeded), requests in groups.items():
                seeds = [r.seed for r in requests] if seeded else None
                try:
                    results = await asyncio.to_thread(
                        self._generate_batch, [r.prompt_ids for r in requests], key, seeds
                    )
                except Exception as error:  # a failed batch fails its requests, never the server
                    logger.exception("HF rollout batch failed")
                    for request in requests:
                        if not request.future.done():
                            request.future.set_exception(error)
                    continue
                for request, result in zip(requests, results):
                    if not request.future.done():
                        request.future.set_result(result)

    @torch.no_grad()
    def _generate_batch(
        self, prompts: list[list[int]], key: SamplingKey, seeds: Optional[list[int]] = None
    ) -> list[tuple[list[int], list[float], str]]:
        """Left-pad ``prompts`` and run one ``model.generate``; cut each row at its first stop token.

        Args:
            prompts: token ids per row.
            key: the sampling parameters all rows share.
            seeds: one sampling seed per row (`SeededSampler`), or None for the global RNG.
        """
        from transformers import GenerationConfig, LogitsProcessorList

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention_mask[row, width - len(prompt) :] = 1
        greedy = key.temperature <= 0
        recorder = RawLogProbRecorder()
        processors = logits_processors(key, recorder, seeds)
        generation_config = GenerationConfig(
            do_sample=not greedy,
            temperature=1.0,
            top_p=1.0,
            top_k=None,
            max_new_tokens=key.max_new_tokens,
            eos_token_id=list(key.stop_token_ids) or None,
            pad_token_id=self.pad_token_id,
        )
        sequences = self.model.generate(
            input_ids=input_ids.to(self.device),
            attention_mask=attention_mask.to(self.device),
            generation_config=generation_config,
            logits_processor=LogitsProcessorList(processors),
        )
        generated = sequences[:, width:].cpu()
        log_probs = recorder.finish(sequences[:, -1]).cpu() if generated.shape[1] else torch.zeros(len(prompts), 0)
        stop_ids = set(key.stop_token_ids)
        results = []
        for row in range(len(prompts)):
            tokens = generated[row].tolist()
            cut, reason = len(tokens), "length"
            for position, token in enumerate(tokens):
                if token in stop_ids:
                    cut, reason = position + 1, "completed"
                    break
            results.append((tokens[:cut], log_probs[row, :cut].tolist(), reason))
            self.stats["generated_tokens"] += cut
        self.stats["batches"] += 1
        self.stats["requests"] += len(prompts)
        return results

    # ------------------------------------------------------------------ weights and memory

    def load_weights(self, named_tensors: list[tuple[str, torch.Tensor]], last: bool) -> int:
        """Copy one bucket of weights into the model; on the last bucket, check all arrived.

        Args:
            named_tensors: ``(hf_parameter_name, tensor)`` pairs, any dtype and device.
            last: True for the final bucket of a sync.

        Returns:
            The number of distinct parameters received in this sync so far.

        Raises:
            KeyError: for a name the model does not have.
            RuntimeError: on the last bucket, when some parameters never arrived.
        """
        params = dict(self.model.named_parameters())
        tied = bool(getattr(self.model.config, "tie_word_embeddings", False))
        for name, tensor in named_tensors:
            target = params.get(name)
            if target is None:
                if tied and name == "lm_head.weight":
                    continue
                raise KeyError(f"HF rollout: the model has no parameter {name!r}")
            target.data.copy_(tensor.to(device=target.device, dtype=target.dtype))
            self._received.add(name)
        received = len(self._received)
        if last:
            missing = sorted(set(params) - self._received)
            self._received = set()
            if missing:
                raise RuntimeError(f"HF rollout weight sync incomplete: {len(missing)} missing, e.g. {missing[:3]}")
            self.stats["weight_syncs"] += 1
        return received

    def _move(self, device: torch.device) -> None:
        if self.device.type == "cuda":
            self.model.to(device)
            if device.type == "cpu":
                torch.cuda.empty_cache()

    async def wake_up(self, tags: Optional[list[str]] = None) -> None:
        """Bring weights back to the device (tags "weights"/"kv_cache"; the HF model has no separate cache)."""
        if tags is None or "weights" in tags:
            self._move(self.device)
        self.awake = True

    async def sleep(self) -> None:
        """Free device memory: the weights go to host memory (a no-op on a CPU)."""
        if self.config.free_cache_engine:
            self._move(torch.device("cpu"))
            self.awake = False

    async def clear_kv_cache(self) -> None:
        pass

    async def release_kv_cache(self) -> None:
        pass

    async def resume_kv_cache(self) -> None:
        pass

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def wait_for_requests_to_drain(self) -> None:
        while self._queue is not None and not self._queue.empty():
            await asyncio.sleep(self.batch_window_s)

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict[str, Any]:
        """Close the gate: new requests wait until `resume_generation`; queued ones still finish."""
        self._gate_open.clear()
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self) -> None:
        self._gate_open.set()

    async def resume_engine_generation(self) -> None:
        self._gate_open.set()

    async def open_submission_gate(self) -> None:
        self._gate_open.set()

    async def start_profile(self, **kwargs: Any) -> None:
        pass

    async def stop_profile(self) -> None:
        pass

    @torch.no_grad()
    def compute_log_probs(self, prompt_ids: list[int], response_ids: list[int]) -> list[float]:
        """Raw-logit log-probs of ``response_ids`` after ``prompt_ids`` under the served weights.

        A debugging and test aid: compares the served model with the trained one.
        """
        device = next(self.model.parameters()).device  # host memory while asleep
        ids = torch.tensor([list(prompt_ids) + list(response_ids)], device=device)
        logits = self.model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
        targets = torch.tensor(response_ids, device=device)
        return torch.log_softmax(logits, -1).gather(1, targets[:, None]).squeeze(1).cpu().tolist()

    def get_parameter_checksums(self) -> dict[str, float]:
        """Per-parameter sums (float64) of the served weights: which parameters a sync changed."""
        return {name: float(p.detach().double().sum()) for name, p in self.model.named_parameters()}

    def get_parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def get_peak_memory_gib(self) -> float:
        """Peak device memory this server's process allocated, GiB (0 on a CPU)."""
        return torch.cuda.max_memory_allocated() / 2**30 if self.device.type == "cuda" else 0.0

    def get_stats(self) -> dict[str, int]:
        """Counters since start: batches, requests, generated tokens, weight syncs."""
        return dict(self.stats)

    def get_state_digest(self) -> float:
        """Sum of all parameters (float64): a cheap fingerprint to check that weights really synced."""
        return float(sum(p.detach().double().sum().item() for p in self.model.parameters()))
