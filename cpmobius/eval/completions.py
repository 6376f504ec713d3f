"""The completions of a run (``completions.jsonl``): generated with resume, read back for scoring
(stage: evaluation).

- `generate_model`: one model's responses for every benchmark, appended per benchmark; a rerun
  skips the benchmarks already complete, drops and regenerates one cut short by a crash, and keeps
  those not asked for (`_load_existing`); ``run.json`` records the model and sampling settings, and
  a rerun with others in the same folder is refused (`_check_run`). Generation itself is
  `cpmobius.eval.generation` (vLLM or HF transformers).
- `read_completions`: a completions file, validated line by line (the CLI's score-only mode).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from cpmobius.eval.data import BENCHMARKS, STOP_STRINGS, encode_prompt
from cpmobius.jsonl import JSONLineError, decode_lines, json_objects, write_jsonl
from cpmobius.prompts import resolve_answer_instruction


def _load_existing(path: Path, expected: Mapping[str, Mapping[str, int]]) -> dict[str, list[dict[str, Any]]]:
    """Complete benchmarks already in `path`; rewrites the file without incomplete ones (a crash mid-append).

    Benchmarks of `expected` whose counts differ (cut short, other k or problems) are dropped; those
    not in `expected` (not asked for by this run) are kept untouched.
    """
    if not path.exists():
        return {}
    by_bench: dict[str, list[dict[str, Any]]] = {}
    # Split on "\n" only: json.dumps(ensure_ascii=False) leaves U+2028/U+0085 raw inside strings, where
    # `str.splitlines` would cut a record in two. A crash mid-append can cut a character's bytes in two:
    # replaced, so that its line fails as JSON and is dropped like any cut line.
    text = path.read_bytes().decode("utf-8", errors="replace")
    lines = [line for line in text.split("\n") if line.strip()]
    for line in lines:
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
        if isinstance(rec, dict):
            by_bench.setdefault(rec.get("benchmark"), []).append(rec)
    complete, kept = {}, {}
    for bench, recs in by_bench.items():
        if bench not in expected:
            kept[bench] = recs  # not asked for this time: kept as it is, never deleted
            continue
        counts: dict[str, int] = {}
        for rec in recs:
            counts[str(rec.get("problem_id"))] = counts.get(str(rec.get("problem_id")), 0) + 1
        if counts == dict(expected[bench]):
            complete[bench] = kept[bench] = recs
        else:
            print(
                f"[evaluate] {path}: dropping {len(recs)} responses of {bench!r} (incomplete or other k/problems)",
                file=sys.stderr,
            )
    if sum(len(r) for r in kept.values()) != len(lines):
        write_jsonl(path, [r for rs in kept.values() for r in rs])
    return complete


def _append(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """Append one benchmark's records in one write, flushed to disk."""
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
        f.flush()
        os.fsync(f.fileno())


def _check_run(run_path: Path, run: dict[str, Any]) -> dict[str, Any]:
    """Refuse to resume a folder holding another model's or other settings' responses (engine arguments
    included: one may change what is sampled); return the run record to keep, with what the earlier run
    recorded once its engine was up (backend, answer instruction) when this one starts none.

    Raises:
        ValueError: naming the settings that differ.
    """
    completions = run_path.parent / "completions.jsonl"
    # A run that wrote no responses (e.g. it failed to load the model) leaves nothing to protect.
    if run_path.exists() and completions.exists() and completions.read_text(encoding="utf-8").strip():
        old = json.loads(run_path.read_text())
        old.setdefault("answer_format", "template")  # a run from before --answer-format added nothing
        keys = ("model", "sampling", "system_prompt", "answer_format", "source", "limit", "engine_args")
        diff = [key for key in keys if old.get(key) != run.get(key)]
        if diff:
            raise ValueError(
                f"{run_path.parent} holds a run with other {diff} ({ {k: old.get(k) for k in diff} }); "
                "repeat them, or give another --out to start a new run"
            )
        run = {**{k: old[k] for k in ("backend", "answer_instruction") if k in old}, **run}
    run_path.parent.mkdir(parents=True, exist_ok=True)
    run_path.write_text(json.dumps(run, indent=1, ensure_ascii=False) + "\n")
    return run


def generate_model(
    model: str,
    label: str,
    rows_by_bench: Mapping[str, Sequence[Mapping[str, Any]]],
    k: Mapping[str, int],
    args: argparse.Namespace,
    out: Path,
) -> list[dict[str, Any]]:
    """Generate (or resume) one model's completions for every benchmark; return all its records.

    Raises:
        ValueError: settings clash with the folder's earlier run, or a bad backend/sampling value.
    """
    from cpmobius.eval.generation import SamplingSettings, make_generator

    sampling = SamplingSettings(
        args.temperature, args.top_p, args.repetition_penalty, args.max_new_tokens, args.greedy, args.seed
    )
    run = {
        "model": model,
        "label": label,
        "sampling": sampling.as_dict(),
        "system_prompt": args.system_prompt,
        "answer_format": args.answer_format,
        "source": args.source,
        "limit": args.limit,
        "k": dict(k),
        "paper_model": args.paper_model,
        **({"engine_args": args.engine_args} if args.engine_args else {}),
    }
    run = _check_run(out / "run.json", run)
    expected = {b: {str(r["id"]): k[b] for r in rows} for b, rows in rows_by_bench.items()}
    path = out / "completions.jsonl"
    done = _load_existing(path, expected)
    generator, answer_instruction = None, None
    for bench, rows in rows_by_bench.items():
        if bench in done:
            print(f"[evaluate] {label} {bench}: {len(done[bench])} responses already there, skipped", file=sys.stderr)
            continue
        if generator is None:
            generator = make_generator(
                model,
                sampling,
                args.backend,
                device=args.device,
                dtype=args.dtype,
                batch_size=args.batch_size,
                tensor_parallel_size=args.tensor_parallel_size,
                gpu_memory_utilization=args.gpu_memory_utilization,
                max_model_len=args.max_model_len,
                trust_remote_code=args.trust_remote_code,
                engine_args=args.engine_args,
            )
            run["backend"] = generator.backend
            # The \boxed{} instruction as in training (player.answer_format), resolved from this model's template.
            answer_instruction = resolve_answer_instruction(args.answer_format, generator.tokenizer, args.system_prompt)
            run["answer_instruction"] = answer_instruction
            (out / "run.json").write_text(json.dumps(run, indent=1, ensure_ascii=False) + "\n")
        start = time.perf_counter()
        # Token ids straight from the chat template: the engine adds no second BOS (Llama-based models).
        prompts = [
            encode_prompt(generator.tokenizer, r["problem"], args.system_prompt, answer_instruction) for r in rows
        ]
        check_prompts_fit(bench, rows, prompts, getattr(generator, "context_tokens", None))
        outputs = generator.generate(
            [p.token_ids for p in prompts], k[bench], STOP_STRINGS.get(bench, ()), desc=f"{label} {bench}"
        )
        records = [
            {
                "benchmark": bench,
                "problem_id": str(row["id"]),
                "sample": j,
                "response": c.text,
                "finish_reason": c.finish_reason,
                "response_tokens": c.response_tokens,
                "model": label,
                **({"prompt": prompt.text} if j == 0 else {}),
            }
            for row, prompt, completions in zip(rows, prompts, outputs)
            for j, c in enumerate(completions)
        ]
        _append(path, records)
        done[bench] = records
        print(
            f"[evaluate] {label} {bench}: {len(records)} responses in {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )
    return [r for bench in rows_by_bench for r in done[bench]]


def check_prompts_fit(
    bench: str, rows: Sequence[Mapping[str, Any]], prompts: Sequence[Any], context_tokens: Optional[int]
) -> None:
    """Refuse prompts that leave no room for a response in the model's context.

    # CPMöbius: nothing is cut silently; an engine would reject or truncate such a prompt.

    Raises:
        ValueError: naming the benchmark, the first offending problem id, its length and the context.
    """
    if not context_tokens:
        return
    over = [(str(row["id"]), len(p.token_ids)) for row, p in zip(rows, prompts) if len(p.token_ids) >= context_tokens]
    if over:
        problem_id, tokens = over[0]
        raise ValueError(
            f"{bench}: {len(over)} of {len(rows)} prompts leave no room for a response in the model's "
            f"context of {context_tokens} tokens (problem {problem_id}: {tokens} tokens); nothing is "
            "cut: raise --max-model-len, or evaluate without those problems"
        )


def read_completions(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate a completions JSONL file (gzip-compressed when the name ends in ``.gz``, as the
    committed runs under ``results/`` keep them).

    A UTF-8 byte-order mark at the start is read. Nothing in the file is run: responses are text to grade.

    Raises:
        ValueError: a file that is not UTF-8, a line that is not a JSON object with `benchmark`
            (a known name), `problem_id` (str or int), `response` (str or null), `sample` (an index >= 0)
            and `model` (str) where given, or a repeated
            (benchmark, problem_id, sample) when records carry `sample`; the message names file:line.
        OSError: the file cannot be read.
    """
    records = []
    seen: dict[tuple, int] = {}
    raw = Path(path).read_bytes()
    if str(path).endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError; a cut-off file is an EOFError
            raise ValueError(f"{path}: not a complete gzip file ({error})") from None
    try:  # a byte-order mark is read; UTF-16 or Latin-1 bytes are named with their line
        lines = list(json_objects(decode_lines(raw)))
    except JSONLineError as error:
        raise ValueError(f"{path}:{error.line_no}: {error.reason}") from None
    for line_no, rec in lines:
        where = f"{path}:{line_no}"
        missing = [key for key in ("benchmark", "problem_id", "response") if key not in rec]
        if missing:
            raise ValueError(f"{where}: missing field(s) {missing}")
        if rec["benchmark"] not in BENCHMARKS:
            raise ValueError(f"{where}: unknown benchmark {rec['benchmark']!r}; expected one of {BENCHMARKS}")
        if not isinstance(rec["problem_id"], (str, int)) or isinstance(rec["problem_id"], bool):
            raise ValueError(f"{where}: problem_id must be a string or an integer")
        if rec["response"] is not None and not isinstance(rec["response"], str):
            raise ValueError(f"{where}: response must be a string or null")
        if rec.get("model") is not None and not isinstance(rec["model"], str):
            raise ValueError(f"{where}: model must be a string or null")
        if "sample" in rec:
            if not isinstance(rec["sample"], int) or isinstance(rec["sample"], bool) or rec["sample"] < 0:
                raise ValueError(f"{where}: sample must be a whole number >= 0 (the sample's index)")
            key = (rec["benchmark"], str(rec["problem_id"]), rec["sample"], rec.get("model"))
            if key in seen:
                raise ValueError(f"{where}: duplicate of line {seen[key]} (same benchmark, problem_id, sample)")
            seen[key] = line_no
        records.append(rec)
    if not records:
        raise ValueError(f"{path}: no completions")
    return records
