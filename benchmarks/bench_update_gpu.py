"""The Player's log-prob, reference and update passes at the 1.5B shape on one GPU, for several settings
of verl's fast path: seconds, achieved TFLOP/s and MFU, tokens/s and peak memory per pass.

A random-initialised Qwen2 at Qwen2.5-Math-1.5B's shape (hidden 1536, intermediate 8960, 28 layers, 12
query / 2 KV heads, vocabulary 151,936, untied; timing does not depend on the weights) is written to a
temporary folder with an in-memory tokenizer. One `Policy` (the Player of the paper preset on
``backend=cuda_hf``: verl's FSDP engine on CUDA, no rollout engine started) takes verl's
``compute_log_prob``, ``compute_ref_log_prob`` and ``update_actor`` on a paper-sized batch of random
rollouts: 256 rows, prompts of 60-400 tokens, responses of 100 + Exp(mean 800) tokens capped at 2,048.

Settings (``--settings``, comma-separated; default all, in this order):

- ``today``: micro-batches of one sequence, padded, no packing (the preset before the fast path);
- ``dyn_rmpad``: dynamic batch size (micro-batches cut at ``--budget`` tokens, 28,000 as the released
  1.5B script) with remove padding (each micro-batch's sequences packed into one row; with sdpa,
  transformers keeps attention inside each sequence with a block-diagonal mask built from the position
  ids);
- ``dyn_padded``: dynamic batch size alone (each micro-batch padded to its longest sequence);
- ``dyn_rmpad_ckpt``: ``dyn_rmpad`` with gradient checkpointing (the released script's full fast path);
- ``dyn2x_rmpad_ckpt``: the same with twice the token budget;
- ``flex``: ``dyn_rmpad_ckpt`` with transformers' flex attention instead of sdpa (a block-sparse kernel
  compiled by Triton: packed sequences cost their own attention only);
- ``fused_triton``, ``fused_triton_2x``, ``fused_torch``: ``dyn_rmpad_ckpt`` (and twice its budget) with
  verl's fused output layer (``model.use_fused_kernels``, Triton or plain-torch backend): log-probs and
  entropy computed from the hidden states in chunks, never the whole logits tensor;
- ``varlen_fused`` (``_nockpt``: without gradient checkpointing): ``fused_torch`` with PyTorch's varlen flash
  attention over the packed rows (``attn_implementation=sdpa_varlen``, `cpmobius.engine.varlen_attention`).

Settings that need another model build (gradient checkpointing, the attention kernel) run in their own
process; the others share one policy and differ only in the knobs verl reads per call. Each process warms
up with one pass of the three operations on 8 short rows first.

FLOPs: 2 × parameters × tokens for a forward pass, 6 × for forward and backward (the update), with every
parameter counted (1.78 B, the input embedding included) and attention scores left out; tokens are the
batch's prompt + response tokens. MFU is against ``--peak-tflops`` (989: the H100/H200 SXM datasheet's
dense bf16); the table also gives the share of the 790 TFLOP/s a large bf16 matrix product reaches on
the lent H200. Peak memory is PyTorch's in the worker process during each pass (allocated and reserved).

Usage (one GPU; verl, Ray and Hydra installed; no vLLM needed)::

    python benchmarks/bench_update_gpu.py --out /tmp/bench_update [--settings today,dyn_rmpad]
        [--compare results/<bench_step_gpu run>/bench_step_gpu.json] [hydra overrides ...]

Figures on record (one H200, the paper preset's offload, 2026-12-03; results/h200_update_fastpath_2026-12-03/
and h200_update_fused_2026-12-03/): micro-batches of one padded sequence: log-probs 47 s, reference 38 s, update 130 s
(2.1-2.6 % MFU); dynamic batch size 8,192 + remove padding + gradient checkpointing (sdpa): 25, 22 and 82 s; the same
with verl's fused output layer (torch backend, the GPU presets): 7.6, 7.7 and 26 s (11-13 % MFU), Triton backend 35 s
for the update; at 32,768 tokens a micro-batch 38 s (masked sdpa attends over the whole packed row); offload off
changed nothing; flex attention with the fused layer: reference 4.8 s (21 %), update 23 s. With varlen attention
(``sdpa_varlen``, the GPU presets; results/h200_update_varlen_2026-12-03/) and 32,768 tokens a micro-batch: 3.6, 3.8
and 12.2 s (24-27 % MFU).

``--profile`` runs the first timed call of each pass under the PyTorch profiler and writes where its time went
to ``--out``/profiles/ (`cpmobius.engine.pass_profile`); the profiled call's seconds are inflated.

``--smoke`` runs a tiny shape on this machine's CPU (``backend=cpu``, 8 rows): a check of the benchmark
itself, whose figures mean nothing. Writes ``bench_update_gpu.md`` and ``bench_update_gpu.json`` to
``--out`` after every process, so a stopped run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# Qwen2.5-Math-1.5B's shape (its config.json), untied embeddings as in Qwen2.5-Math-1.5B.
SHAPE_1P5B = {
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}
SHAPE_SMOKE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}
MEASURED_MATMUL_TFLOPS = 790.0  # an 8192³ bf16 matrix product on the lent H200 (769-798 measured there)
OPERATIONS = ("log_prob", "ref_log_prob", "update")
FLOPS_PER_PARAM_TOKEN = {"log_prob": 2, "ref_log_prob": 2, "update": 6}

GPU_BASE = [
    "experiment=paper_qwen_1p5b",
    "model=qwen2p5_coder_1p5b",
    "backend=cuda_hf",
    "trainer.n_gpus_per_node=1",
    "warmup.enabled=false",
    "trainer.logger=[file]",
]
SMOKE_BASE = [
    "backend=cpu",
    "trainer.logger=[file]",
    "warmup.enabled=false",
    "data.max_prompt_length=24",
    "data.max_response_length=48",
]
# Model builds: what a setting fixes when the model is built (remove padding is on in each, so verl's
# monkey patch for it is applied as in a fast-path run; per-call knobs then choose the path). The GPU presets
# run varlen attention: the builds without it name sdpa.
BUILDS = {
    "sdpa": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    ],
    "sdpa_ckpt": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    ],
    "flex_ckpt": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.override_config.attn_implementation=flex_attention",
    ],
    # verl's fused output layer: log-probs and entropy from the last hidden states in chunks, so the
    # (tokens x vocabulary) logits never exist and no per-token loop runs (verl's `logprobs_from_logits`
    # without flash-attn's cross-entropy walks the packed row one token at a time).
    "fused_triton_ckpt": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.use_fused_kernels=true",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=triton",
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    ],
    "fused_torch_ckpt": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.use_fused_kernels=true",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch",
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    ],
    "fused_torch": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "actor_rollout_ref.model.use_fused_kernels=true",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch",
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    ],
    # PyTorch's own varlen flash attention on the packed rows (cpmobius.engine.varlen_attention): each
    # sequence's attention only, where sdpa's block-diagonal mask computes the whole row's scores.
    "varlen_fused_ckpt": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa_varlen",
        "actor_rollout_ref.model.use_fused_kernels=true",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch",
    ],
    "varlen_fused": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa_varlen",
        "actor_rollout_ref.model.use_fused_kernels=true",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch",
    ],
    "flex_fused_ckpt": [
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.override_config.attn_implementation=flex_attention",
        "actor_rollout_ref.model.use_fused_kernels=true",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=torch",
    ],
}


@dataclass(frozen=True)
class Setting:
    """One row group of the table: a model build and the knobs verl reads per call."""

    label: str
    build: str
    knobs: dict = field(default_factory=dict)
    log_prob_knobs: dict = field(default_factory=dict)  # over ``knobs`` for the two log-prob passes alone


def settings(budget: int) -> dict[str, Setting]:
    """The benchmark's settings, in table order, with the dynamic batch size's token budget ``budget``."""
    dynamic = {"use_dynamic_bsz": True, "max_token_len_per_gpu": budget}
    return {
        "today": Setting(
            "micro-batch 1, padded (preset before)",
            "sdpa",
            {"use_remove_padding": False, "use_dynamic_bsz": False, "micro_batch_size_per_gpu": 1},
        ),
        "dyn_rmpad": Setting(f"dynamic bsz {budget} + remove padding", "sdpa", {"use_remove_padding": True, **dynamic}),
        "dyn_padded": Setting(f"dynamic bsz {budget}, padded", "sdpa", {"use_remove_padding": False, **dynamic}),
        "dyn_rmpad_ckpt": Setting(
            f"dynamic bsz {budget} + remove padding + grad ckpt", "sdpa_ckpt", {"use_remove_padding": True, **dynamic}
        ),
        "dyn2x_rmpad_ckpt": Setting(
            f"dynamic bsz {2 * budget} + remove padding + grad ckpt",
            "sdpa_ckpt",
            {"use_remove_padding": True, "use_dynamic_bsz": True, "max_token_len_per_gpu": 2 * budget},
        ),
        "flex": Setting(
            f"dynamic bsz {budget} + remove padding + grad ckpt, flex attention",
            "flex_ckpt",
            {"use_remove_padding": True, **dynamic},
        ),
        "fused_triton": Setting(
            f"dynamic bsz {budget} + remove padding + grad ckpt, fused output (triton)",
            "fused_triton_ckpt",
            {"use_remove_padding": True, **dynamic},
        ),
        "fused_triton_2x": Setting(
            f"dynamic bsz {2 * budget} + remove padding + grad ckpt, fused output (triton)",
            "fused_triton_ckpt",
            {"use_remove_padding": True, "use_dynamic_bsz": True, "max_token_len_per_gpu": 2 * budget},
        ),
        "fused_torch": Setting(
            f"dynamic bsz {budget} + remove padding + grad ckpt, fused output (torch)",
            "fused_torch_ckpt",
            {"use_remove_padding": True, **dynamic},
        ),
        "fused_torch_nockpt": Setting(
            f"dynamic bsz {budget} + remove padding, fused output (torch)",
            "fused_torch",
            {"use_remove_padding": True, **dynamic},
        ),
        "varlen_fused": Setting(
            f"dynamic bsz {budget} + remove padding + grad ckpt, varlen attention, fused output (torch)",
            "varlen_fused_ckpt",
            {"use_remove_padding": True, **dynamic},
        ),
        "varlen_fused_nockpt": Setting(
            f"dynamic bsz {budget} + remove padding, varlen attention, fused output (torch)",
            "varlen_fused",
            {"use_remove_padding": True, **dynamic},
        ),
        # The forward-only passes keep no activations: a larger budget means fewer micro-batches, and for the
        # reference (kept on the host by verl, streamed to the GPU for every micro-batch) fewer weight copies.
        **{
            f"varlen_fused_lp{k}x": Setting(
                f"varlen_fused, log-prob passes at {k * budget} tokens a micro-batch",
                "varlen_fused_ckpt",
                {"use_remove_padding": True, **dynamic},
                {"max_token_len_per_gpu": k * budget},
            )
            for k in (2, 4)
        },
        "flex_fused": Setting(
            f"dynamic bsz {budget} + remove padding + grad ckpt, flex attention, fused output (torch)",
            "flex_fused_ckpt",
            {"use_remove_padding": True, **dynamic},
        ),
    }


def rollout_lengths(rows: int, smoke: bool, seed: int) -> tuple[list[int], list[int]]:
    """Prompt and response lengths of ``rows`` rollouts, tokens.

    Paper-sized: prompts uniform in [60, 400], responses 100 + Exp(mean 800) capped at 2,048 (a paper step's
    spread: most answers short, a tail at the cap). Smoke: prompts 3-20, responses 5-40.
    """
    rng = random.Random(seed)
    if smoke:
        return [rng.randint(3, 20) for _ in range(rows)], [rng.randint(5, 40) for _ in range(rows)]
    prompts = [rng.randint(60, 400) for _ in range(rows)]
    responses = [min(2048, 100 + int(rng.expovariate(1 / 800))) for _ in range(rows)]
    return prompts, responses


def write_model(folder: Path, shape: dict, device: str) -> int:
    """A random-initialised bf16 Qwen2 of ``shape`` and the in-memory character tokenizer in ``folder``.

    Returns:
        The parameter count.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from cpmobius.toy.tiny_models import build_char_tokenizer

    tokenizer = build_char_tokenizer()
    config = Qwen2Config(
        **shape,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return params


# ---------------------------------------------------------------------------- one process: one model build


def knob_policy_class():
    """`Policy` whose worker inputs carry fixed per-call knobs (``policy.knobs``) over its config's."""
    from cpmobius.engine.policy import Policy

    class KnobPolicy(Policy):
        knobs: dict = {}

        def _to_worker_input(self, batch, **metadata):
            return super()._to_worker_input(batch, **metadata, **self.knobs)

    return KnobPolicy


def _reset_peak_memory(worker: Any) -> None:
    from verl.utils.device import get_torch_device

    device = get_torch_device()
    if hasattr(device, "reset_peak_memory_stats"):
        device.synchronize()
        device.empty_cache()
        device.reset_peak_memory_stats()


def _peak_memory_gib(worker: Any) -> tuple[float, float]:
    from verl.utils.device import get_torch_device

    device = get_torch_device()
    allocated = getattr(device, "max_memory_allocated", lambda: 0)() or 0
    reserved = getattr(device, "max_memory_reserved", lambda: 0)() or 0
    return float(allocated) / 2**30, float(reserved) / 2**30


def on_workers(policy: Any, fn: Any) -> list[Any]:
    """``fn(worker)`` inside each of the policy's worker processes (Ray's ``__ray_call__``)."""
    import ray

    return ray.get([worker.__ray_call__.remote(fn) for worker in policy.worker_group.workers])


def time_passes(policy: Any, batch: Any, setting: Setting) -> dict[str, dict[str, Any]]:
    """The three passes on ``batch`` with ``setting``'s knobs: ``{op: {"s", "peak_allocated_gib",
    "peak_reserved_gib"}}`` (or ``{"error"}``)."""
    import torch

    results: dict[str, dict[str, Any]] = {}

    def timed(op: str, fn) -> Any:
        policy.knobs = {**setting.knobs, **(setting.log_prob_knobs if op != "update" else {})}
        on_workers(policy, _reset_peak_memory)
        started = time.perf_counter()
        try:
            value = fn()
        except Exception as error:  # an OOM in one setting must not lose the others
            results[op] = {"error": f"{type(error).__name__}: {str(error).strip().splitlines()[-1][:300]}"}
            return None
        seconds = time.perf_counter() - started
        allocated, reserved = max(on_workers(policy, _peak_memory_gib))
        results[op] = {"s": seconds, "peak_allocated_gib": allocated, "peak_reserved_gib": reserved}
        return value

    batch.meta_info["temperature"] = 0.6  # the Player's sampling temperature (its log-prob logits are scaled by it)
    old = timed("log_prob", lambda: policy.compute_log_probs(batch))
    if old is None:
        return results
    batch.batch["old_log_probs"] = old[0]
    ref = timed("ref_log_prob", lambda: policy.compute_ref_log_probs(batch))
    if ref is None:
        return results
    batch.batch["ref_log_prob"] = ref
    signs = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(batch))])[:, None]
    batch.batch["advantages"] = signs * batch.batch["response_mask"].float()
    metrics = timed("update", lambda: policy.update(batch))
    if metrics is not None:
        results["update"]["metrics"] = {k: v for k, v in metrics.items() if k in ("actor/grad_norm", "actor/pg_loss")}
    return results


def run_build(args: argparse.Namespace, build: str, names: list[str]) -> dict[str, Any]:
    """Start one Player policy with model build ``build`` and time ``names``' settings on one batch.

    Returns:
        ``{"build", "startup_s", "tokens", "rows", "settings": {name: time_passes(...)}}``.
    """
    import ray

    from cpmobius.config import compose_config
    from cpmobius.engine.batches import synthetic_rollouts
    from cpmobius.engine.config import apply_env_to_driver, build_policy_configs, ray_init_kwargs
    from cpmobius.engine.sharing import EngineGuard, make_resource_pool

    table = settings(args.budget)
    started = time.perf_counter()
    overrides = [
        *(SMOKE_BASE if args.smoke else GPU_BASE),
        f"model.player_path={args.model}",
        f"model.coach_path={args.model}",
        f"trainer.default_local_dir={args.out / 'run'}",
        "actor_rollout_ref.model.use_remove_padding=true",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={args.budget}",
        *BUILDS[build],
        *args.overrides,
    ]
    cfg = compose_config(overrides)
    apply_env_to_driver(cfg)
    import cpmobius.engine.extensions  # noqa: F401  (the platform in the driver)

    config = build_policy_configs(cfg)["player"]
    ray.init(**{"address": "local", **ray_init_kwargs(cfg)})  # its own Ray, never a cluster already running here
    policy = knob_policy_class()("player", config, make_resource_pool(cfg), EngineGuard())
    policy.start_models().wait_models()
    startup_s = time.perf_counter() - started
    print(f"[bench] build {build}: policy up in {startup_s:.1f} s", flush=True)

    vocab = int(args.shape["vocab_size"])
    width_p, width_r = (
        int(config.actor_rollout_ref.rollout.prompt_length),
        int(config.actor_rollout_ref.rollout.response_length),
    )
    prompts, responses = rollout_lengths(args.rows, args.smoke, args.seed)
    warm_p, warm_r = rollout_lengths(8, True, args.seed + 1)
    results, warm_ups = {}, {}
    for name in names:
        # First calls of a path pay one-off costs (kernel selection, mask code, compilation): 8 short rows first.
        warm_ups[name] = time_passes(
            policy, synthetic_rollouts(warm_p, warm_r, vocab, width_p, width_r, seed=args.seed + 1), table[name]
        )
        batch = synthetic_rollouts(
            prompts, responses, vocab, width_p, width_r, seed=args.seed
        )  # the same rows each time
        results[name] = time_passes(policy, batch, table[name])
        print(f"[bench] {name}: {json.dumps(results[name])} (warm-up {json.dumps(warm_ups[name])})", flush=True)
    ray.shutdown()
    return {
        "build": build,
        "budget_tokens": args.budget,
        "startup_s": startup_s,
        "rows": len(batch),
        "tokens": int(batch.batch["attention_mask"].sum()),
        "response_tokens": int(batch.batch["response_mask"].sum()),
        "settings": results,
        "warm_ups": warm_ups,
    }


# ---------------------------------------------------------------------------- the table


def failure_cell(error: str) -> str:
    """The table's cell for a pass that did not run to the end."""
    if "OutOfMemory" in error:
        return "out of memory"
    return "not run" if error.startswith("not run") else "failed"


def summarize(
    parts: list[dict[str, Any]], params: int, peak_tflops: float, budget: int, compare: Optional[dict[str, float]]
) -> tuple[str, dict[str, Any]]:
    """The table (markdown) and the figures (JSON) of the processes run so far."""
    rows = []
    for part in parts:
        table = settings(int(part.get("budget_tokens", budget)))
        for name, ops in part["settings"].items():
            for op in OPERATIONS:
                result = ops.get(op, {"error": "not run (an earlier pass failed)"})
                row = {"setting": name, "label": table[name].label, "op": op, **result}
                if "s" in result:
                    flops = FLOPS_PER_PARAM_TOKEN[op] * params * part["tokens"]
                    row.update(
                        tflops=flops / result["s"] / 1e12,
                        mfu=flops / result["s"] / (peak_tflops * 1e12),
                        of_matmul=flops / result["s"] / (MEASURED_MATMUL_TFLOPS * 1e12),
                        tokens_per_s=part["tokens"] / result["s"],
                    )
                rows.append(row)
    lines = [
        f"| setting | pass | s | TFLOP/s | MFU (of {peak_tflops:.0f}) | of measured {MEASURED_MATMUL_TFLOPS:.0f} | "
        "tokens/s | peak allocated GiB | peak reserved GiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "s" in row:
            lines.append(
                f"| {row['label']} | {row['op']} | {row['s']:.1f} | {row['tflops']:.0f} | {100 * row['mfu']:.1f} % | "
                f"{100 * row['of_matmul']:.1f} % | {row['tokens_per_s']:,.0f} | {row['peak_allocated_gib']:.1f} | "
                f"{row['peak_reserved_gib']:.1f} |"
            )
        else:
            lines.append(f"| {row['label']} | {row['op']} | {failure_cell(row['error'])} | | | | | | |")
    first = parts[0] if parts else {"rows": 0, "tokens": 0, "response_tokens": 0}
    text = [
        "## Player passes by fast-path setting",
        "",
        *lines,
        "",
        f"{first['rows']} rollouts, {first['tokens']:,} tokens ({first['response_tokens']:,} response tokens); "
        f"{params / 1e9:.2f} B parameters; FLOPs 2 (forward) or 6 (update) × parameters × tokens.",
        "Policy start-up per model build: " + ", ".join(f"{p['build']} {p['startup_s']:.0f} s" for p in parts) + ".",
    ]
    failed = sorted({row["label"] for row in rows if "error" in row})
    if failed:
        text.append("Failed: " + "; ".join(failed) + " (the errors are in the JSON).")
    if compare:
        text.append(
            "The step benchmark's plain GRPO step (--compare): "
            + ", ".join(f"{op} {compare[op]:.1f} s" for op in OPERATIONS if op in compare)
            + "."
        )
    figures = {
        "params": params,
        "peak_tflops": peak_tflops,
        "measured_matmul_tflops": MEASURED_MATMUL_TFLOPS,
        "budget_tokens": budget,
        "parts": parts,
        "rows": rows,
        "compare": compare,
    }
    return "\n".join(text) + "\n", figures


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--settings", default=None, help="comma-separated setting names (default: all)")
    parser.add_argument("--rows", type=int, default=None, help="rollouts in the batch (default 256; smoke 8)")
    parser.add_argument(
        "--budget", type=int, default=None, help="dynamic batch size: tokens per micro-batch (default 28000)"
    )
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="the MFU's peak (dense bf16, datasheet)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--compare", type=Path, default=None, help="a bench_step_gpu.json whose plain step's passes to show"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny shape on this machine's CPU (checks the benchmark)"
    )
    parser.add_argument(
        "--summarize",
        type=Path,
        nargs="+",
        default=None,
        help="only rebuild the table from these part_*.json files (of one or several runs)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile the first timed call of each pass (<out>/profiles/, cpmobius.engine.pass_profile); slows it",
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one model build, run in its own process
    parser.add_argument("--model", type=Path, default=None, help=argparse.SUPPRESS)
    args, args.overrides = parser.parse_known_args(argv)
    args.rows = args.rows or (8 if args.smoke else 256)
    args.budget = args.budget or (120 if args.smoke else 28000)
    args.shape = SHAPE_SMOKE if args.smoke else SHAPE_1P5B
    args.out.mkdir(parents=True, exist_ok=True)
    table = settings(args.budget)
    names = args.settings.split(",") if args.settings else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        parser.error(f"--settings: unknown {unknown} (known: {', '.join(table)})")

    if args.child:  # one model build: time its settings, write the part, exit
        part = run_build(args, args.child, names)
        (args.out / f"part_{args.child}.json").write_text(json.dumps(part, indent=1))
        return 0

    compare = None
    if args.compare:
        plain = json.loads(args.compare.read_text()).get("yardstick") or []
        compare = plain[-1]["ops"] if plain else None
    if args.summarize:
        parts = [json.loads(path.read_text()) for path in args.summarize]
        text, figures = summarize(parts, int(parts[0]["params"]), args.peak_tflops, args.budget, compare)
        (args.out / "bench_update_gpu.md").write_text(text)
        (args.out / "bench_update_gpu.json").write_text(json.dumps(figures, indent=1))
        print(text)
        return 0
    builds = list(dict.fromkeys(table[n].build for n in names))
    if args.profile:  # the workers inherit it (cpmobius.engine.config.worker_env_vars)
        os.environ["CPMOBIUS_PROFILE_PASSES"] = str(args.out / "profiles")
    with tempfile.TemporaryDirectory(prefix="bench_update_model_") as folder:
        import torch

        device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
        params = write_model(Path(folder), args.shape, device)
        print(f"[bench] model: {params:,} parameters in {folder}", flush=True)
        parts = []
        for build in builds:
            chosen = [n for n in names if table[n].build == build]
            command = [
                sys.executable,
                __file__,
                "--out",
                str(args.out),
                "--child",
                build,
                "--model",
                folder,
                "--settings",
                ",".join(chosen),
                "--rows",
                str(args.rows),
                "--budget",
                str(args.budget),
                "--seed",
                str(args.seed),
                *(["--smoke"] if args.smoke else []),
                *args.overrides,
            ]
            code = subprocess.call(command)
            part_file = args.out / f"part_{build}.json"
            if code != 0 or not part_file.exists():
                print(f"[bench] build {build} failed (exit {code})", flush=True)
                continue
            part = {**json.loads(part_file.read_text()), "params": params}
            part_file.write_text(json.dumps(part, indent=1))
            parts.append(part)
            text, figures = summarize(parts, params, args.peak_tflops, args.budget, compare)
            (args.out / "bench_update_gpu.md").write_text(text)
            (args.out / "bench_update_gpu.json").write_text(json.dumps(figures, indent=1))
            print(text, flush=True)
    return 0 if parts else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(1)
