"""Benchmark of vLLM's generation settings on the loop's validation pass: AMC x 10 at the Player's sampling.

Run (a GPU with vLLM, a model folder, the AMC file under ``--data-dir``):
`python benchmarks/bench_generation_gpu.py --model PATH --data-dir data/eval --out outputs/bench_generation`
`[--setting NAME=JSON ...] [--benchmark amc --k 10 --max-new-tokens 2048 --temperature 0.6]`.

Validation is the largest generation of a CPMöbius step at the paper's batch (830 sequences, ~676 K tokens,
28 s of a 66 s step on one H200), and it is bounded by its longest responses: 6.6 % run to the 2,048-token
limit. Each setting is one `python -m cpmobius.eval` run (its own process, so each engine starts on a free
device) with ``--engine-args`` set to the setting's JSON. The default settings: vLLM as verl's rollout server
runs it in the paper preset (256 sequences at once, chunked prefill of 8,192 tokens, a fixed 24 GiB KV
cache), then the same with vLLM's n-gram speculative decoding (proposals copied from the sequence's own
earlier text, checked by the model: the sampled distribution is the model's own, and repetitive text, such as
a response stuck until its limit, goes several tokens a step). 1,024 sequences at once (the cache holds all
of validation) was slower on one H200: 51.4 s against 41.8 s (2026-12-05); ``--setting`` runs it again:
``seqs_1024='{"max_num_seqs": 1024, "max_num_batched_tokens": 8192, "kv_cache_memory_bytes": 25769803776}'``.

Printed and written to ``<out>/bench_generation.md`` and ``.json``: per setting, the generation's seconds
(the engine's start not counted), the engine's start and the whole run, tokens generated, tokens/s, mean
response length, the share stopped at the limit, and avg@k with its 95 % CI (the settings should agree
within it: none of them changes what is sampled, only how fast).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cpmobius.eval.options import engine_args as read_engine_args  # noqa: E402

_FIXED_CACHE = {"max_num_batched_tokens": 8192, "kv_cache_memory_bytes": 24 * 1024**3}
_NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
DEFAULT_SETTINGS = {
    "verl_256": {"max_num_seqs": 256, **_FIXED_CACHE},
    "verl_256_ngram": {"max_num_seqs": 256, **_FIXED_CACHE, "speculative_config": _NGRAM},
}


def parse_setting(text: str) -> tuple[str, dict]:
    """``NAME=JSON`` → ``(NAME, engine arguments)`` (the JSON read as ``--engine-args`` reads it).

    Raises:
        argparse.ArgumentTypeError: no ``=``, an empty name, or a value that is not a JSON object.
    """
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"--setting {text!r}: expected NAME=JSON")
    return name.strip(), read_engine_args(value)


def run_setting(name: str, engine_args: dict, args: argparse.Namespace) -> dict:
    """One evaluation run with ``engine_args``; its figures (see the module docstring)."""
    out = args.out / "runs"
    command = [
        sys.executable, "-m", "cpmobius.eval", "--model", str(args.model), "--label", name,
        "--benchmarks", args.benchmark, "--k", f"{args.benchmark}={args.k}",
        "--temperature", str(args.temperature), "--top-p", "1.0", "--repetition-penalty", "1.0",
        "--max-new-tokens", str(args.max_new_tokens), "--seed", str(args.seed), "--backend", args.backend,
        "--gpu-memory-utilization", str(args.gpu_memory_utilization), "--no-grader-report", "--bootstrap", "200",
        "--out", str(out),
    ]  # fmt: skip
    if engine_args:
        command += ["--engine-args", json.dumps(engine_args)]
    if args.data_dir:
        command += ["--data-dir", str(args.data_dir)]
    shutil.rmtree(out / name, ignore_errors=True)  # a rerun measures a fresh generation, not the eval's resume
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    total = time.perf_counter() - started
    (args.out / f"{name}.log").write_text(done.stdout + done.stderr)
    row = {"setting": name, "engine_args": engine_args, "exit": done.returncode, "total_s": total}
    timed = re.search(rf"\[evaluate\] {re.escape(name)} {args.benchmark}: (\d+) responses in ([\d.]+) s", done.stderr)
    if done.returncode or not timed:
        row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return row
    records = [json.loads(line) for line in (out / name / "completions.jsonl").read_text().splitlines() if line]
    tokens = sum(r["response_tokens"] for r in records)
    summary = json.loads((out / name / "results.json").read_text())["summary"][args.benchmark]
    generation = float(timed.group(2))
    row.update(
        generation_s=generation,
        start_s=total - generation,
        responses=len(records),
        tokens=tokens,
        tokens_per_s=tokens / max(generation, 0.05),  # the eval prints tenths of a second
        mean_length=tokens / len(records),
        at_limit=sum(r["finish_reason"] == "length" for r in records) / len(records),
        avg_at_k=summary["avg@k"],
        avg_at_k_ci=summary.get("avg@k_ci"),
    )
    return row


def table(rows: list[dict], baseline: str) -> str:
    base = next((r for r in rows if r["setting"] == baseline and "generation_s" in r), None)
    columns = "generation s | vs first | start + rest s | tokens | tokens/s | mean length | at limit | avg@k (95 % CI)"
    lines = [f"| setting | {columns} |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "generation_s" not in r:
            lines.append(f"| {r['setting']} | failed: {r.get('error', '')} | | | | | | | |")
            continue
        ratio = f"{r['generation_s'] / base['generation_s']:.2f}x" if base and base["generation_s"] else ""
        ci = r["avg_at_k_ci"]
        interval = f" ({ci[0]:.1f}-{ci[1]:.1f})" if ci else ""
        lines.append(
            f"| {r['setting']} | {r['generation_s']:.1f} | {ratio} | {r['start_s']:.1f} | {r['tokens']:,} | "
            f"{r['tokens_per_s']:,.0f} | {r['mean_length']:.0f} | {100 * r['at_limit']:.1f} % | "
            f"{r['avg_at_k']:.1f}{interval} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_generation"))
    parser.add_argument("--data-dir", type=Path, default=None, help="folder with <benchmark>/<benchmark>.jsonl")
    parser.add_argument("--benchmark", default="amc")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--max-new-tokens", type=int, default=2048)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="vllm", help="vllm; hf only to check this script without a GPU")
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    parser.add_argument(
        "--setting",
        type=parse_setting,
        action="append",
        default=None,
        metavar="NAME=JSON",
        help=f"an engine setting to measure (repeatable; default: {', '.join(DEFAULT_SETTINGS)})",
    )
    args = parser.parse_args()
    settings = dict(args.setting) if args.setting else DEFAULT_SETTINGS
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, engine_args in settings.items():
        rows.append(run_setting(name, engine_args, args))
        print(f"[bench] {name}: {json.dumps({k: v for k, v in rows[-1].items() if k != 'engine_args'})}", flush=True)
        (args.out / "bench_generation.json").write_text(json.dumps(rows, indent=1) + "\n")
        text = table(rows, next(iter(settings)))
        (args.out / "bench_generation.md").write_text(text)
    print(text, end="")
    return 0 if all("generation_s" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
