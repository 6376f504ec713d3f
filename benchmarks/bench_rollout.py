"""Throughput of the HF rollout server: generated tokens per second, one request at a time vs concurrent.

Runs the server in process (the same `HFGenerationServer` the Ray actor runs) with the tiny Qwen2
of the embedded default, or a real model folder (`--model`, e.g. `python -m cpmobius.models path
qwen2.5-coder-0.5b`), on the GPU when there is one; beside it, the yardstick: one plain batched
``model.generate`` of the same model, prompts and lengths. Prints a table. Usage:

    python benchmarks/bench_rollout.py [--model DIR] [--concurrency 64] [--new-tokens 64] [--repeats 3]
        [--no-full-determinism]

Figures on record (median of 3, 64 requests x 64 new tokens, ignore_eos):
- 2 CPU cores, tiny Qwen2 (2026-12-01): 1 at a time 391 tokens/s, 64 concurrent 6,568, plain generate
  11,344 (server 0.58x plain: on a CPU each row samples with its own generator).
- one H200, tiny Qwen2, 128 requests x 128 new tokens (2026-12-01): seeded server 18,476 tokens/s vs plain
  generate 22,377 (0.83x); without per-request seeds 24,087 vs 22,399 (1.08x). The tiny model is
  kernel-launch bound; a real model's figure is still to be measured (`--model`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import torch


def make_server(new_tokens: int, cache: str, model: str | None, full_determinism: bool):
    from verl.workers.rollout.replica import RolloutMode

    from cpmobius.config import compose_config
    from cpmobius.engine.config import policy_config
    from cpmobius.engine.hf_server import HFGenerationServer
    from cpmobius.toy.tiny_models import materialize_tiny_model

    overrides = [
        f"model.cache_dir={cache}",
        f"data.max_response_length={new_tokens}",
        f"actor_rollout_ref.rollout.full_determinism={full_determinism}",
    ]
    if model:
        overrides += [f"model.player_path={model}", f"model.coach_path={model}", "data.max_prompt_length=256"]
    if torch.cuda.is_available():
        overrides += ["actor_rollout_ref.rollout.dtype=bfloat16"]
    cfg = compose_config(overrides)
    if not model:
        materialize_tiny_model(cfg.model.player_path, seed=2)
    arr = policy_config(cfg, "player").actor_rollout_ref
    return HFGenerationServer(arr.rollout, arr.model, RolloutMode.HYBRID, replica_rank=0)


def plain_generate(server, prompts: list[list[int]], new_tokens: int) -> tuple[float, int]:
    """The yardstick: one batched ``model.generate`` (sampling, T=1) of the server's own model."""
    width = max(map(len, prompts))
    pad = server.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=server.device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=server.device)
    sync = torch.cuda.synchronize if server.device.type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    with torch.no_grad():
        out = server.model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=None,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=pad,
        )
    sync()
    return time.perf_counter() - start, int((out.shape[1] - width) * len(prompts))


async def run(server, prompts: list[list[int]], concurrent: bool, new_tokens: int) -> tuple[float, int]:
    params = {"temperature": 1.0, "max_tokens": new_tokens, "ignore_eos": True}
    start = time.perf_counter()
    if concurrent:
        outputs = await asyncio.gather(
            *[server.generate(p, dict(params), request_id=str(i)) for i, p in enumerate(prompts)]
        )
    else:
        outputs = [await server.generate(p, dict(params), request_id=str(i)) for i, p in enumerate(prompts)]
    elapsed = time.perf_counter() - start
    return elapsed, sum(len(o.token_ids) for o in outputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--serial-requests", type=int, default=8, help="requests timed one at a time")
    parser.add_argument("--model", default=None, help="a HF model folder (default: the toy's tiny Qwen2)")
    parser.add_argument(
        "--no-full-determinism",
        dest="full_determinism",
        action="store_false",
        help="sample from the global RNG instead of per-request seeds",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as cache:
        server = make_server(args.new_tokens, cache, args.model, args.full_determinism)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(server.launch_server())
        tokenizer = server.model_config.tokenizer
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "What is 17 * 23? Put the answer in \\boxed{}."}],
            add_generation_prompt=True,
            tokenize=False,
        )
        prompt = tokenizer.encode(text, add_special_tokens=False)
        loop.run_until_complete(run(server, [prompt] * 2, True, 4))  # warm-up
        rows = []
        for label, count, concurrent in (
            ("1 at a time", args.serial_requests, False),
            (f"{args.concurrency} concurrent", args.concurrency, True),
        ):
            rates, latencies = [], []
            for _ in range(args.repeats):
                elapsed, tokens = loop.run_until_complete(run(server, [prompt] * count, concurrent, args.new_tokens))
                rates.append(tokens / elapsed)
                latencies.append(elapsed / count if not concurrent else elapsed)
            rows.append((label, statistics.median(rates), statistics.median(latencies)))
        rates, latencies = [], []
        for _ in range(args.repeats):
            elapsed, tokens = plain_generate(server, [prompt] * args.concurrency, args.new_tokens)
            rates.append(tokens / elapsed)
            latencies.append(elapsed)
        rows.append((f"plain generate x{args.concurrency}", statistics.median(rates), statistics.median(latencies)))
        loop.run_until_complete(server.shutdown())
        loop.close()
    threads = torch.get_num_threads()
    where = torch.cuda.get_device_name(0) if server.device.type == "cuda" else f"CPU, torch threads {threads}"
    print(
        f"HF rollout, {args.model or 'tiny Qwen2'} ({sum(p.numel() for p in server.model.parameters()):,} params), "
        f"{args.new_tokens} new tokens/request, {where}, full_determinism={args.full_determinism}, "
        f"median of {args.repeats}"
    )
    print(f"{'mode':<22} {'tokens/s':>10} {'s/request or batch':>20}")
    for label, rate, latency in rows:
        print(f"{label:<22} {rate:>10.0f} {latency:>20.3f}")
    print(
        f"batched / one-at-a-time throughput: {rows[1][1] / rows[0][1]:.1f}x; "
        f"server batched / plain generate: {rows[1][1] / rows[2][1]:.2f}x"
    )


if __name__ == "__main__":
    main()
