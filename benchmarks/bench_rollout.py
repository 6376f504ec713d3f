"""Throughput of the HF rollout server: generated tokens per second, one request at a time vs concurrent.

Runs the server in process (the same `HFGenerationServer` the Ray actor runs) with the tiny Qwen2
of the embedded default, and prints a table. Usage:

    python benchmarks/bench_rollout.py [--concurrency 64] [--new-tokens 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

import torch


def make_server(new_tokens: int, cache: str):
    from verl.workers.rollout.replica import RolloutMode

    from cpmobius.engine.config import compose_config, policy_config
    from cpmobius.engine.hf_server import HFGenerationServer
    from cpmobius.toy.tiny_models import materialize_tiny_model

    cfg = compose_config([f"model.cache_dir={cache}", f"data.max_response_length={new_tokens}"])
    materialize_tiny_model(cfg.model.player_path, seed=2)
    arr = policy_config(cfg, "player").actor_rollout_ref
    return HFGenerationServer(arr.rollout, arr.model, RolloutMode.HYBRID, replica_rank=0)


async def run(server, prompts: list[list[int]], concurrent: bool, new_tokens: int) -> tuple[float, int]:
    params = {"temperature": 1.0, "max_tokens": new_tokens, "ignore_eos": True}
    start = time.perf_counter()
    if concurrent:
        outputs = await asyncio.gather(*[server.generate(p, dict(params), request_id=str(i)) for i, p in enumerate(prompts)])
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
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as cache:
        server = make_server(args.new_tokens, cache)
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
        loop.run_until_complete(server.shutdown())
        loop.close()
    threads = torch.get_num_threads()
    print(f"HF rollout, tiny Qwen2 ({sum(p.numel() for p in server.model.parameters()):,} params), "
          f"{args.new_tokens} new tokens/request, torch threads {threads}, median of {args.repeats}")
    print(f"{'mode':<16} {'tokens/s':>10} {'s/request or batch':>20}")
    for label, rate, latency in rows:
        print(f"{label:<16} {rate:>10.0f} {latency:>20.3f}")
    print(f"batched / one-at-a-time throughput: {rows[1][1] / rows[0][1]:.1f}x")


if __name__ == "__main__":
    main()
