r"""Benchmark evaluation CLI: generate, grade, tabulate (stage: evaluation).

    python -m cpmobius.eval --model PATH [PATH ...] [options]        # generate + score
    python -m cpmobius.eval --completions FILE.jsonl [FILE ...]       # score only (no GPU)

Generate mode, per model: each benchmark's problems (`cpmobius.eval.data`: local copies, parquet or
the hub) are prompted exactly as the released evaluation (the
instruction suffix stripped, the bare problem as the only user turn of the model's own chat
template; `--answer-format auto` appends the \boxed{} instruction only to a template that lacks it, as
in training), sampled k times with the released protocol (T=0.7, top-p 0.9, repetition penalty 1.05,
4096 new tokens; k = 32, 32, 10, 5, 5, 5 for AIME24, AIME25, AMC, MATH-500, Minerva, OlympiadBench)
or greedily (`--greedy`: T=0, top-p 1, repetition penalty 1.0 unless given; k = 1 unless `--k` says
otherwise), through vLLM when importable, else HF
transformers (`cpmobius.eval.generation`). Then graded by the project's one grader (`cpmobius.eval.scoring`,
`cpmobius.eval.summary`): avg@k (the paper's number), unbiased pass@k, maj@k, bootstrap 95% CIs over problems,
Avg over the six and OOD Avg over the five without AMC, the paper's validation set (`--validation-set math500`
leaves out MATH-500 instead, for a Player whose Δt was measured on it; recorded in run.json and
results.json, and score-only mode takes it from the run.json beside the completions when not given).

Outputs under `--out` (default `outputs/eval`):

    <label>/run.json                 model, sampling, k per benchmark, data source (resume guard), validation set
    <label>/completions.jsonl        one line per response: benchmark, problem_id, sample, response,
                                     finish_reason, response_tokens, model (appended per benchmark)
    <label>/results.json             summaries (both graders), per-problem verdicts, disagreements
    <label>/results.md               the paper-order table with the paper's published rows beside ours
    <label>/grader_disagreements.md  problems where grader=cpmobius and grader=released disagree
    results.md, results.json         every model of the run side by side (avg@k), and each later model's
                                     paired difference from the first ("<label> − <first label>")

Score-only mode with several models (`--completions BASE.jsonl TRAINED.jsonl`, one model per file):
each model's table in `<out>/<label>/`, and in `<out>` (default: the first file's folder's parent)
the models side by side plus one row per later model, "<label> − <first label>": its avg@k minus the
first's on the same problems, with a paired bootstrap CI over problems (`cpmobius.eval.summary.
paired_difference`): the test of whether training changed the model, tighter than two separate CIs.

Coverage (`cpmobius.eval.summary`): every benchmark records problems scored vs problems evaluated;
Avg / OOD Avg come only from complete benchmarks, else they are None with the reason in
results.json and a footnote under the table. `--limit N` evaluates the first N problems of each
benchmark: a run (or a re-scoring with the same `--limit`) is complete for that slice, and the
footnote says it is a slice. Score-only mode takes `limit` from the `run.json` beside the first
completions file when `--limit` is not given, so re-scoring a `--limit` run needs no flag.
`--allow-partial` averages partial benchmarks deliberately (marked `*`). Problems with uneven
numbers of responses are an error naming them unless `--allow-uneven-k`. Grading timeouts and
errors are counted per benchmark (results.json `grading`, the table's footnote); a benchmark
whose every grade failed stops the run (exit 1) instead of reporting zeros.

Resume (`cpmobius.eval.completions`): a benchmark whose responses are all in `completions.jsonl`
(every problem, k each) is skipped on rerun; a benchmark cut short by a crash (or written with
another k) is dropped from the file and generated again; benchmarks not asked for this time stay in
the file untouched. Rerunning with other sampling settings or another model in a folder that holds
responses is refused (use another `--out`).

Departures from the released evaluation (`# CPMöbius:`): one aggregation step (Avg, OOD Avg, CIs);
`answer_key=corrected` by default (the released Minerva key holds the previous sub-problem's answer
on 32 rows); our grader by default (the released one strips answers with `str.strip` on phrases and
checks only the first of several accepted answers: `--grader released` reproduces it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from cpmobius.eval.completions import generate_model, read_completions
from cpmobius.eval.data import BENCHMARKS, load_benchmark
from cpmobius.eval.options import DEFAULT_OUT, build_parser
from cpmobius.eval.report import (
    PAPER_RESULTS,
    difference_row,
    generation_note,
    markdown_table,
    paper_model_for,
    table_notes,
    write_results,
)
from cpmobius.eval.scoring import DEFAULT_K, PAPER_VALIDATION_SET, ood_benchmarks
from cpmobius.eval.summary import paired_difference, score_run
from cpmobius.grading import GradingError

# What run.json records about how the responses were made (stated under the results table).
GENERATION_KEYS = ("sampling", "answer_format", "answer_instruction", "system_prompt", "backend", "engine_args")


def generation_of(run_path: Path) -> dict[str, Any]:
    """The `GENERATION_KEYS` a run's ``run.json`` holds ({} when there is none)."""
    run = json.loads(run_path.read_text()) if run_path.exists() else {}
    return {key: run[key] for key in GENERATION_KEYS if key in run}


def parse_k(values: Sequence[str], benchmarks: Sequence[str], greedy: bool) -> dict[str, int]:
    """Responses per problem for each benchmark: the released k, 1 when greedy, then `--k` overrides.

    Args:
        values: `["4"]` (every benchmark) and/or `["aime24=8", ...]` (these win over a plain K).

    Raises:
        ValueError: a malformed value, a k < 1, or an unknown benchmark.
    """
    k = {b: 1 if greedy else DEFAULT_K[b] for b in benchmarks}
    parsed = []
    for value in values:
        name, _, number = value.rpartition("=")
        if not number.isdigit() or int(number) < 1:
            raise ValueError(f"--k {value!r}: expected K or BENCHMARK=K with an integer K >= 1")
        if name and name not in k:
            raise ValueError(f"--k {value!r}: {name!r} is not among the benchmarks {list(benchmarks)}")
        parsed.append((name, int(number)))
    # A plain K sets every benchmark; BENCHMARK=K overrides it whatever the order on the command line.
    for name, number in sorted(parsed, key=lambda item: bool(item[0])):
        for b in [name] if name else k:
            k[b] = number
    return k


def model_label(path: str) -> str:
    """A folder-safe label of a model path (its last part, or the last two for a generic last part)."""
    local = Path(path)
    # A local folder by its real name ("." or "ckpt/.." would name the output root or its parent).
    parts = [
        p for p in (local.resolve().parts if local.exists() else str(path).split("/")) if p not in ("", "/", ".", "..")
    ]
    if not parts:
        raise ValueError(f"cannot derive an output label from the model path {path!r}; give --label")
    generic = {"huggingface", "actor", "player", "hf", "model", "checkpoint"}
    name = "__".join(parts[-2:]) if len(parts) > 1 and parts[-1].lower() in generic else parts[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def paper_rows_for(paper_model: Optional[str], model_path: str) -> dict[str, dict[str, float]]:
    """The published rows to show beside a model: `--paper-model` (a key, "auto" or "none")."""
    key = paper_model_for(model_path) if paper_model in (None, "auto") else paper_model
    if key in (None, "none"):
        return {}
    if key not in PAPER_RESULTS:
        raise ValueError(f"--paper-model {key!r}: expected auto, none or one of {sorted(PAPER_RESULTS)}")
    return PAPER_RESULTS[key]


def _load_rows(
    benchmarks: Sequence[str], args: argparse.Namespace, limit: Optional[int] = None
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Each benchmark's evaluated rows (the first `limit` with a limit) and its full size in problems."""
    files = {}
    for value in args.data_file:
        name, sep, path = value.partition("=")
        if not sep or name not in BENCHMARKS:
            raise ValueError(f"--data-file {value!r}: expected BENCHMARK=PATH with BENCHMARK in {BENCHMARKS}")
        files[name] = path
    rows, sizes = {}, {}
    for b in benchmarks:
        rows[b] = load_benchmark(
            b, args.data_dir, source=args.source, path=files.get(b), allow_duplicate_ids=args.allow_duplicate_ids
        )
        sizes[b] = len(rows[b])
        if limit is not None:
            rows[b] = rows[b][:limit]
    return rows, sizes


def merge_paper_rows(per_model: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """The published rows of several models for one table: each base model's rows once (a base model and the
    model trained from it share them). With more than one base model, every row but a base model's own is
    named after its base model ("Qwen2.5-Math-1.5B + RENT"); the first row of each model's rows is its base."""
    distinct: list[Mapping[str, Mapping[str, float]]] = []
    for rows in per_model.values():
        if rows and rows not in distinct:
            distinct.append(rows)
    merged: dict[str, dict[str, float]] = {}
    for rows in distinct:
        base = next(iter(rows))
        for name, row in rows.items():
            merged[name if name == base or len(distinct) == 1 else f"{base} + {name}"] = dict(row)
    return merged


def combined_table(per_model: Mapping[str, Mapping[str, Any]], paper: Mapping[str, Mapping[str, float]]) -> str:
    """Every model's avg@k side by side (one row each), after the published rows of their base models."""
    tables = [
        markdown_table(result["summary"], label=label, paper_rows=paper if i == 0 else None, metrics=("avg@k",))
        .split("\n\n")[0]
        .splitlines()
        for i, (label, result) in enumerate(per_model.items())
    ]
    lines = tables[0] + [line for t in tables[1:] for line in t[2:]]
    # The paper rows' comparability note once (it is about the shared paper rows), on the first model.
    notes = [
        f"{label}: {note}"
        for i, (label, result) in enumerate(per_model.items())
        for note in table_notes(result["summary"], with_paper_rows=bool(paper) and i == 0)
        + [generation_note(result.get("generation") or {})]
        if note
    ]
    return "\n".join(lines + ["", "Cells: avg@k in percent, [95% bootstrap CI over problems]."] + notes) + "\n"


def _score_only(args: argparse.Namespace) -> str:
    """Score completions again. Files of one model give that model's table; files of several models
    (each file one model, e.g. a base and a trained Player) give each model's table in its own folder
    under `--out` and, in `--out`, the models side by side with each later model's paired difference
    from the first (`cpmobius.eval.summary.paired_difference`)."""
    paths = [Path(p).resolve() for p in args.completions]
    if len(set(paths)) != len(paths):
        raise ValueError(f"--completions names a file twice ({args.completions}): its responses would count twice")
    files: dict[str, list[str]] = {}  # model label → its files, in the order given
    for path in args.completions:
        records = read_completions(path)
        models = sorted({str(r["model"]) for r in records if r.get("model") is not None})
        if len(models) > 1:
            raise ValueError(f"{path} holds responses of several models {models}: one model per file")
        files.setdefault(models[0] if models else "ours", []).append(path)
    if len(files) == 1:
        label, group = next(iter(files.items()))
        result, run = _score_files(group, args)
        out = Path(args.out) if args.out else Path(group[0]).resolve().parent
        return write_results(result, out, paper_rows=paper_rows_for(args.paper_model, run.get("model", "")))
    out = Path(args.out) if args.out else Path(args.completions[0]).resolve().parent.parent
    per_model, paper_by_model = {}, {}
    for label, group in files.items():
        per_model[label], run = _score_files(group, args)
        paper_by_model[label] = paper_rows_for(args.paper_model, run.get("model", ""))
        write_results(per_model[label], out / label, label=label, paper_rows=paper_by_model[label])
    return _write_comparison(per_model, merge_paper_rows(paper_by_model), out, args.bootstrap)


def _score(
    records: Any,
    rows: Mapping[str, Any],
    sizes: Mapping[str, int],
    args: argparse.Namespace,
    validation_set: str,
    limit: Optional[int],
) -> dict[str, Any]:
    """`score_run` with the command line's grading options; the result records ``limit`` (``--limit``)."""
    result = score_run(
        records,
        rows,
        args.answer_key,
        args.grader,
        not args.no_grader_report,
        args.bootstrap,
        benchmark_sizes=sizes,
        allow_partial=args.allow_partial,
        allow_uneven=args.allow_uneven_k,
        validation_set=validation_set,
    )
    result["limit"] = limit
    return result


def _score_files(paths: Sequence[str], args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Grade one model's completion files; returns (the `score_run` result, the first file's run.json)."""
    records = [r for path in paths for r in read_completions(path)]
    benches = list(dict.fromkeys(r["benchmark"] for r in records))
    run_path = Path(paths[0]).resolve().parent / "run.json"
    run = json.loads(run_path.read_text()) if run_path.exists() else {}
    limit = args.limit if args.limit is not None else run.get("limit")
    if args.limit is None and limit is not None:
        print(
            f"[evaluate] {run_path}: a --limit {limit} run; scoring the first {limit} problems of each benchmark",
            file=sys.stderr,
        )
    validation_set = args.validation_set or run.get("validation_set") or PAPER_VALIDATION_SET
    ood_benchmarks(validation_set)  # an unknown name fails before anything is loaded
    if args.validation_set is None and "validation_set" in run:
        print(f"[evaluate] {run_path}: validation set {validation_set} (OOD Avg leaves it out)", file=sys.stderr)
    rows, sizes = _load_rows(benches, args, limit)
    result = _score(records, rows, sizes, args, validation_set, limit)
    result["generation"] = generation_of(run_path)
    result["completions"] = [str(p) for p in paths]
    return result, run


def _write_comparison(
    per_model: Mapping[str, Mapping[str, Any]], paper: Mapping[str, Mapping[str, float]], out: Path, n_boot: int
) -> str:
    """results.md / results.json in `out`: the models' avg@k side by side, then each later model's
    paired difference from the first (`paired_difference`; none with one model); returns the table.

    Raises:
        ValueError: models scored with different validation sets, or on different problems.
    """
    labels = list(per_model)
    first = per_model[labels[0]]
    differences: dict[str, Any] = {}
    for label in labels[1:]:
        if per_model[label]["validation_set"] != first["validation_set"]:
            raise ValueError(
                f"{label} and {labels[0]} were scored with different validation sets "
                f"({per_model[label]['validation_set']} vs {first['validation_set']}): pass --validation-set"
            )
        differences[f"{label} − {labels[0]}"] = paired_difference(
            first["problems"], per_model[label]["problems"], n_boot, validation_set=first["validation_set"]
        )
    table = combined_table(per_model, paper)
    if differences:
        head, _, notes = table.partition("\n\n")
        rows = [difference_row(d, name) for name, d in differences.items()]
        table = (
            head
            + "\n"
            + "\n".join(rows)
            + "\n\n"
            + notes.rstrip("\n")
            + "\n"
            + (
                "Difference rows: avg@k of the later model minus the first's, in percentage points, on the same "
                "problems, [paired 95% bootstrap CI over problems] (an interval that excludes 0 is a change beyond "
                "sampling noise of the problems and responses).\n"
            )
        )
    summary = {
        label: {
            "summary": r["summary"],
            "answer_key": r["answer_key"],
            "grader": r["grader"],
            "validation_set": r["validation_set"],
        }
        for label, r in per_model.items()
    }
    summary["differences"] = differences
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    (out / "results.md").write_text(table)
    return table


def record_validation_set(run_path: Path, validation_set: str) -> None:
    """Add the validation set to a run's ``run.json`` (written by the generation; a scoring setting,
    so not part of its resume guard)."""
    run = json.loads(run_path.read_text()) if run_path.exists() else {}
    run["validation_set"] = validation_set
    run_path.parent.mkdir(parents=True, exist_ok=True)
    run_path.write_text(json.dumps(run, indent=1, ensure_ascii=False) + "\n")


def _generate(args: argparse.Namespace) -> str:
    validation_set = args.validation_set or PAPER_VALIDATION_SET
    ood_benchmarks(validation_set)  # an unknown name fails before any model is loaded
    labels = args.label or [model_label(m) for m in args.model]
    if len(labels) != len(args.model) or len(set(labels)) != len(labels):
        raise ValueError(f"--label: need {len(args.model)} distinct labels, got {labels}")
    rows, sizes = _load_rows(args.benchmarks, args, args.limit)
    k = parse_k(args.k, args.benchmarks, args.greedy)
    out = Path(args.out or DEFAULT_OUT)
    per_model, paper_by_model = {}, {}
    for model, label in zip(args.model, labels):
        records = generate_model(model, label, rows, k, args, out / label)
        record_validation_set(out / label / "run.json", validation_set)
        result = _score(records, rows, sizes, args, validation_set, args.limit)
        result["generation"] = generation_of(out / label / "run.json")
        rows_paper = paper_rows_for(args.paper_model, model)
        paper_by_model[label] = rows_paper
        table = write_results(result, out / label, label=label, paper_rows=rows_paper)
        if (
            len(args.model) > 1
        ):  # each model's table as it finishes; the side-by-side one is returned (one model: the same table)
            print(table, end="")
        per_model[label] = result
    return _write_comparison(per_model, merge_paper_rows(paper_by_model), out, args.bootstrap)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """CLI entry point; returns the exit status (2 on bad input, 1 when grading failed throughout; a
    one-line message, no traceback)."""
    args = build_parser().parse_args(argv)
    if args.limit is not None and args.limit < 1:
        print("error: --limit must be >= 1", file=sys.stderr)
        return 2
    if args.bootstrap < 1:
        print("error: --bootstrap must be >= 1", file=sys.stderr)
        return 2
    try:
        print(_score_only(args) if args.completions else _generate(args), end="")
    except (ValueError, OSError) as error:  # OSError: a missing/unreadable file or folder, a bad model path
        print(f"error: {error}", file=sys.stderr)
        return 2
    except GradingError as error:  # every grade of a benchmark failed: its zeros would be reported as results
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
