r"""Evaluation reports: the paper-order markdown table, the paper's published rows, the grader report.

Stage: evaluation (reporting). Pure formatting of `cpmobius.eval.summary` summaries; the files a run
writes (`write_results`). Published numbers (`PAPER_RESULTS`) are only those of the released code's
README Results table (its Avg and OOD Avg per model); every other paper cell is "—".
When OOD Avg leaves out a validation set other than AMC (`--validation-set`), the notes say which,
and that a paper row's OOD Avg (without AMC) is then not comparable with ours.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from cpmobius.eval.scoring import METRICS, NO_MINERVA_AVG, PAPER_VALIDATION_SET, TABLE_COLUMNS, averages


def _released_row(avg: float, ood: float, *benchmarks: float) -> dict[str, float]:
    """One row of the released table, in its column order: Average, OOD Average, AMC, AIME 2024, AIME 2025,
    Minerva, MATH, Olympiad → our column headers."""
    headers = ("AMC", "AIME24", "AIME25", "Minerva", "MATH-500", "OlympiadBench")
    row = {"Avg": avg, "OOD Avg": ood, **dict(zip(headers, benchmarks, strict=True))}
    # Not in the released table: computed from its own columns (as ours is from ours).
    kept = [value for header, value in zip(headers, benchmarks) if header != "Minerva"]
    return row | {NO_MINERVA_AVG: sum(kept) / len(kept)}


# Source: the released README's Results table, every row and column as printed (Avg and OOD Avg not recomputed:
# its OOD column differs from the mean of its own columns on 1.5B base, 1.5B CPMöbius, OctoThinker CPMöbius,
# 7B-Instruct base (by its rounding), RENT and CPMöbius). R-Zero and RENT share 27.1 / 24.7 on the 1.5B model, with
# different columns; the table has no R-Zero row for OpenMath-Nemotron-1.5B.
PAPER_RESULTS: dict[str, dict[str, dict[str, float]]] = {
    "qwen2p5_math_1p5b": {
        "Qwen2.5-Math-1.5B": _released_row(23.3, 19.8, 34.6, 6.2, 2.8, 16.3, 56.2, 23.4),
        "R-Zero (iteration 3)": _released_row(27.1, 24.7, 39.2, 9.8, 5.0, 19.3, 62.4, 26.8),
        "RENT": _released_row(27.1, 24.7, 39.3, 10.0, 5.0, 19.0, 62.2, 27.1),
        "CPMöbius": _released_row(28.8, 26.8, 39.4, 9.8, 5.4, 28.0, 63.1, 26.9),
    },
    "openmath_nemotron_1p5b": {
        "OpenMath-Nemotron-1.5B": _released_row(59.5, 54.9, 82.3, 55.6, 43.3, 25.1, 89.4, 61.0),
        "RENT": _released_row(61.7, 56.5, 87.7, 55.0, 46.0, 24.2, 90.7, 66.7),
        "CPMöbius": _released_row(62.1, 57.0, 87.5, 54.9, 46.9, 24.3, 91.2, 67.9),
    },
    "octothinker_3b": {
        "OctoThinker-3B-Hybrid-Zero": _released_row(21.3, 20.6, 24.6, 3.9, 1.7, 16.3, 57.9, 23.4),
        "R-Zero (iteration 3)": _released_row(20.5, 19.5, 25.9, 2.0, 0.3, 14.6, 58.1, 22.3),
        "RENT": _released_row(23.0, 21.7, 29.2, 7.3, 2.1, 15.0, 60.2, 24.1),
        "CPMöbius": _released_row(23.6, 22.0, 28.0, 4.8, 1.7, 22.1, 60.4, 24.7),
    },
    "qwen2p5_math_7b_instruct": {
        "Qwen2.5-Math-7B-Instruct": _released_row(35.8, 33.0, 49.2, 9.0, 6.3, 34.6, 78.0, 37.4),
        "R-Zero (iteration 3)": _released_row(36.9, 34.2, 50.5, 9.5, 7.4, 32.7, 83.3, 38.1),
        "RENT": _released_row(39.2, 37.6, 53.1, 10.8, 9.9, 38.8, 83.8, 38.8),
        "CPMöbius": _released_row(40.7, 38.4, 55.6, 11.8, 9.6, 44.9, 84.2, 38.3),
    },
}
"""Published numbers per base model (configs/model names), row label → column header → percent."""

PAPER_MODEL_PATTERNS = {
    "qwen2p5_math_1p5b": "qwen2.5-math-1.5b",
    "qwen2p5_math_7b_instruct": "qwen2.5-math-7b-instruct",
    "octothinker_3b": "octothinker-3b",
    "openmath_nemotron_1p5b": "openmath-nemotron-1.5b",
}
"""Lower-case text in a model path that names its base model (for `paper_model_for`)."""


def paper_model_for(model_path: str) -> Optional[str]:
    """The `PAPER_RESULTS` key whose base model a model path names (checked on the last two path
    parts, case-insensitive, so `Qwen/Qwen2.5-Math-1.5B` and `ckpt/qwen2.5-math-1.5b-cpm` match), or None."""
    tail = "/".join(str(model_path).rstrip("/").split("/")[-2:]).lower()
    # Longest pattern first so "qwen2.5-math-7b-instruct" is not taken for another model.
    for key, pattern in sorted(PAPER_MODEL_PATTERNS.items(), key=lambda kv: -len(kv[1])):
        if pattern in tail:
            return key
    return None


PARTIAL_MARK = "*"
"""Marks a cell computed from partial benchmarks (see the table's footnotes)."""


def _is_partial(entry: Mapping[str, Any]) -> bool:
    return entry.get("complete") is False or bool(entry.get("partial_benchmarks"))


def _cell(entry: Optional[Mapping[str, Any]], metric: str, signed: bool = False) -> str:
    if not entry or entry.get(metric) is None:
        return "—"
    lo, hi = entry[metric + "_ci"]
    f = "+.1f" if signed else ".1f"
    return f"{entry[metric]:{f}} [{lo:{f}}, {hi:{f}}]" + (PARTIAL_MARK if _is_partial(entry) else "")


def difference_row(difference: Mapping[str, Any], label: str) -> str:
    """One table row of `cpmobius.eval.summary.paired_difference` in the paper's column order
    (signed percentage points, [paired 95% bootstrap CI]); "—" where a column was not scored."""
    cells = [_cell(difference.get(key), "avg@k", signed=True) for _, key in TABLE_COLUMNS]
    return f"| {label} | " + " | ".join(cells) + " |"


def _k_text(entry: Mapping[str, Any]) -> str:
    n_min, n_max = entry.get("n_min", entry["k"]), entry.get("n_max", entry["k"])
    return str(entry["k"]) if n_min == n_max else f"{n_min}–{n_max} (uneven; pass@k with k = {entry['k']})"


def _extra_columns(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(header, key) of the evaluated benchmarks outside the paper's columns (amc23, demo), after OOD Avg."""
    known = {key for _, key in TABLE_COLUMNS}
    return [
        (key, key) for key, entry in summary.items() if key not in known and isinstance(entry, Mapping) and "k" in entry
    ]


def _header(key: str) -> str:
    """The column header of a summary key ("math500" → "MATH-500"); the key itself outside the paper's columns."""
    return dict((k, h) for h, k in TABLE_COLUMNS).get(key, key)


def validation_set_notes(summary: Mapping[str, Any], with_paper_rows: bool = False) -> list[str]:
    """Which benchmark OOD Avg leaves out, when it is not the paper's AMC (none when it is).

    Args:
        summary: the output of `summarise` (its "OOD Avg" entry records `validation_set`).
        with_paper_rows: the table shows published rows: say their OOD Avg is not comparable.
    """
    name = (summary.get("OOD Avg") or {}).get("validation_set", PAPER_VALIDATION_SET)
    if name == PAPER_VALIDATION_SET:
        return []
    left_out, paper = _header(name), _header(PAPER_VALIDATION_SET)
    notes = [
        f"OOD Avg leaves out {left_out}, the validation set that drove Δt in training (--validation-set "
        f"{name}); the paper's OOD Avg leaves out {paper}."
    ]
    if with_paper_rows:
        notes.append(
            f"Paper rows' OOD Avg is without {paper} (the paper's validation set): comparable with ours "
            f"only with --validation-set {PAPER_VALIDATION_SET}, so not here."
        )
    return notes


def table_notes(summary: Mapping[str, Any], with_paper_rows: bool = False) -> list[str]:
    """Footnotes of a table: partial benchmarks, why Avg / OOD Avg are missing, slices, the benchmark
    OOD Avg leaves out when it is not AMC (`validation_set_notes`), grading failures.

    Returns:
        Lines of text (no trailing newline); the grading-failure line is always there.
    """
    benches = [(h, key, summary[key]) for h, key in TABLE_COLUMNS[:6] if key in summary]
    benches += [(h, key, summary[key]) for h, key in _extra_columns(summary)]
    notes = []
    partial = [f"{h} {e['n_problems']}/{e['n_problems_expected']}" for h, _, e in benches if e.get("complete") is False]
    if partial:
        notes.append(f"{PARTIAL_MARK} Partial: only some problems scored (scored/expected): {', '.join(partial)}.")
    for name, _ in averages():
        entry = summary.get(name) or {}
        if entry.get("reason"):
            notes.append(f"{name} —: {entry['reason']}.")
        elif entry.get("partial_benchmarks"):
            notes.append(
                f"{PARTIAL_MARK} {name} averages partial benchmarks (--allow-partial): "
                f"{', '.join(entry['partial_benchmarks'])}."
            )
    sliced = [
        f"{h} {e['n_problems_expected']}/{e['n_problems_benchmark']}"
        for h, _, e in benches
        if e.get("n_problems_benchmark", 0) > e.get("n_problems_expected", 0)
    ]
    if sliced:
        notes.append(
            f"Slice (--limit): problems evaluated / in the benchmark: {', '.join(sliced)}; "
            "not comparable with the paper's numbers."
        )
    notes.extend(validation_set_notes(summary, with_paper_rows))
    failed = [
        f"{h} {e['grading']['timeout']} timeouts, {e['grading']['error']} errors"
        for h, _, e in benches
        if "grading" in e and e["grading"]["timeout"] + e["grading"]["error"]
    ]
    notes.append(
        f"Grading failures (responses, counted wrong): {'; '.join(failed)}." if failed else "Grading failures: none."
    )
    return notes


def markdown_table(
    summary: Mapping[str, Any],
    paper_row: Optional[Mapping[str, float]] = None,
    label: str = "ours",
    paper_rows: Optional[Mapping[str, Mapping[str, float]]] = None,
    metrics: Sequence[str] = METRICS,
) -> str:
    """A markdown table in the paper's column order, one row per metric, cells `value [lo, hi]`.

    Args:
        summary: the output of `summarise`.
        paper_row: optional published numbers keyed by column header ("AIME24", ..., "OOD Avg");
            shown first as a "paper" row (missing columns as "—").
        label: row-name prefix of our rows.
        paper_rows: several published rows, row label → numbers (shown as "paper: <label>").
        metrics: which of `METRICS` to show, in order.

    Returns:
        The table (a header, a separator, then the paper rows and our metric rows),
        newline-terminated. Below it: a `k` line (responses per problem) and `table_notes`.
    """
    columns = list(TABLE_COLUMNS) + _extra_columns(summary)
    headers = [h for h, _ in columns]
    lines = ["| | " + " | ".join(headers) + " |", "|---" * (len(headers) + 1) + "|"]
    rows = ({"": paper_row} if paper_row is not None else {}) | dict(paper_rows or {})
    for name, row in rows.items():
        cells = [f"{row[h]:.1f}" if row.get(h) is not None else "—" for h in headers]
        lines.append(f"| paper{': ' + name if name else ''} | " + " | ".join(cells) + " |")
    for metric in metrics:
        cells = [_cell(summary.get(key), metric) for _, key in columns]
        lines.append(f"| {label} {metric} | " + " | ".join(cells) + " |")
    ks = ", ".join(
        f"{h} {_k_text(summary[key])}"
        for h, key in [*TABLE_COLUMNS[:6], *columns[len(TABLE_COLUMNS) :]]
        if key in summary
    )
    lines.append("")
    lines.append(f"k (responses per problem): {ks or '—'}. Cells: percent, [95% bootstrap CI over problems].")
    lines.extend(table_notes(summary, with_paper_rows=bool(rows)))
    if rows:
        lines.append('Paper rows: the released README table; "—" where it gives no published number.')
    return "\n".join(lines) + "\n"


def disagreement_markdown(rows: Sequence[Mapping[str, Any]], names: tuple[str, str]) -> str:
    """The grader-disagreement report as markdown (one table row per problem)."""
    a, b = names
    lines = [
        f"# Grader disagreements: {a} vs {b}",
        "",
        f"{len(rows)} problem(s) where the two graders judge at least one response differently.",
        "",
        f"| benchmark | problem | gold ({a}) | gold ({b}) | responses differing | extracted ({a}) → verdict "
        f"| extracted ({b}) → verdict |",
        "|---|---|---|---|---|---|---|",
    ]

    def esc(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")[:80]

    for r in rows:
        lines.append(
            f"| {r['benchmark']} | {r['problem_id']} | {esc(r['golds'])} | {esc(r['golds_other'])} | "
            f"{r['n_disagree']}/{r['n']} | `{esc(r['example_extracted'])}` → {r['example_correct']} | "
            f"`{esc(r['example_extracted_other'])}` → {r['example_correct_other']} |"
        )
    return "\n".join(lines) + "\n"


def generation_note(run: Mapping[str, Any]) -> Optional[str]:
    """One line stating how the responses were generated: the decoding values the run used and its
    answer-format instruction (from its ``run.json``), or None when the run recorded no sampling."""
    s = run.get("sampling")
    if not s:
        return None
    decoding = (
        "greedy (temperature 0, top-p 1.0)"
        if s.get("greedy")
        else f"sampled (temperature {s.get('temperature')}, top-p {s.get('top_p')}, seed {s.get('seed')})"
    )
    line = (
        f"Generation: {decoding}, repetition penalty {s.get('repetition_penalty')}, "
        f"at most {s.get('max_new_tokens')} new tokens"
    )
    if "answer_format" in run:
        instruction = run.get("answer_instruction")
        line += f"; answer format {run['answer_format']}" + (
            f' (appended: "{instruction}")' if instruction else " (nothing appended)"
        )
    if run.get("system_prompt"):
        line += f'; system prompt "{run["system_prompt"]}"'
    if run.get("engine_args"):
        line += f"; vLLM engine arguments {json.dumps(run['engine_args'], sort_keys=True)}"
    return line + "."


def write_results(
    result: Mapping[str, Any],
    out_dir: str | Path,
    label: str = "ours",
    paper_rows: Optional[Mapping[str, Mapping[str, float]]] = None,
) -> str:
    """Write results.json, results.md (and grader_disagreements.md with a comparison); return the table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    table = markdown_table(result["summary"], label=label, paper_rows=paper_rows)
    note = generation_note(result.get("generation") or {})
    if note:
        table += f"\n{note}\n"
    if "other_summary" in result:
        table += (
            f"\nSame completions, grader={result['other_grader']} (answer_key={result['answer_key']}):\n\n"
            + markdown_table(result["other_summary"], label=result["other_grader"], metrics=("avg@k",))
        )
        (out / "grader_disagreements.md").write_text(
            disagreement_markdown(result["disagreements"], (result["grader"], result["other_grader"])), encoding="utf-8"
        )
    (out / "results.md").write_text(table, encoding="utf-8")
    return table
