r"""Benchmark records → uniform rows: the supported schemas, the answer normalisation, the load checks.

Stage: evaluation (data side; `cpmobius.eval.data` reads the files and re-exports these names).
Schemas (`rows_from_records`): the uniform schema (``id``, ``problem``, ``answer``, ``alt_answers``),
the released verl schema (``prompt``, ``reward_model.ground_truth``, ``extra_info.index``; tiled
copies), a flat ``question`` / ``answer`` table and a flat ``problem`` / ``answer`` table.

Checks: an empty or null gold answer (``answer``, an ``alt_answers`` entry, the released key) is an
error naming the file and line; two rows with one ``id`` are an error unless ``allow_duplicate_ids``
(the first of each id is kept, the others named on stderr); an exact copy in a tiled released file is
dropped silently, a copy that differs is a duplicate. Nothing in a record is run as code.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any, Iterable, Mapping, Optional, Sequence

INSTRUCTION_SUFFIX = " Let's think step by step and output the final answer within \\boxed{}."
"""The verl-schema suffix of every released evaluation prompt; the released loader strips it."""


def strip_instruction(text: str) -> str:
    """The problem without the released verl suffix (the released loader's behaviour)."""
    text = str(text)
    return text[: -len(INSTRUCTION_SUFFIX)] if text.endswith(INSTRUCTION_SUFFIX) else text


def plain_answer(value: Any) -> str:
    """A reference answer as a string: `142.0` → `"142"`, `$x$` → `x`, `$a$,$b$` and lists → `a, b`.

    The hub/parquet normalisation of the curated copies (MANIFEST §4): integral floats lose
    `.0`, outer `$…$` are removed, a list of several answers becomes `a, b`, strings are stripped.
    """
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return str(int(value))
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return ", ".join(plain_answer(v) for v in list(value))
    text = str(value).strip()
    if len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        # OlympiadBench lists: "$a$,$b$" / "$a$, $b$" → "a, b".
        parts = re.split(r"\$\s*,\s*\$", text[1:-1])
        if all("$" not in part for part in parts):
            text = ", ".join(part.strip() for part in parts)
    return text


def _as_list(value: Any) -> list:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return list(value)
    return [value]


def _row(name: str, i: int, problem: Any, answer_upstream: Any, row_id: Any = None) -> dict[str, Any]:
    """A uniform row from a released/hub record (corrected key = the normalised released key)."""
    forms = [plain_answer(a) for a in _as_list(answer_upstream)]
    return {
        "id": f"{name}-{row_id if row_id is not None else i}",
        "problem": strip_instruction(problem),
        "answer": forms[0] if forms else "",
        "alt_answers": list(dict.fromkeys(forms[1:])),
        "answer_upstream": _jsonable(answer_upstream),
        "flags": [],
    }


def _jsonable(value: Any) -> Any:
    if type(value).__name__ == "ndarray" or isinstance(value, tuple):
        return [_jsonable(v) for v in list(value)]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _blank(value: Any) -> bool:
    """Whether a gold answer is missing: null, NaN, only white space, an empty list, or a list with such an element."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        items = list(value)
        return not items or any(_blank(v) for v in items)
    return isinstance(value, str) and not value.strip()


def _check_gold(name: str, where: str, field_name: str, value: Any) -> None:
    """Refuse a missing gold answer (it would be scored as a grading error, lowering the model's score).

    A gold answer is text or a finite number, or a list of them (released copies).

    Raises:
        ValueError: naming the benchmark, the file and line (`where`) and the field.
    """
    if _blank(value):
        raise ValueError(f"benchmark {name!r}: {where}: empty gold answer ({field_name} is {value!r})")
    for item in _as_list(value):  # JSON's true, {"value": 6} or Infinity would be graded as the text "True", ...
        item = _jsonable(item)
        if isinstance(item, bool) or not isinstance(item, (str, int, float)) or item in (math.inf, -math.inf):
            raise ValueError(
                f"benchmark {name!r}: {where}: a gold answer is text or a finite number ({field_name} is {item!r:.60})"
            )


def _record_row(name: str, where: str, i: int, n_rows: int, rec: Mapping[str, Any]) -> tuple[dict[str, Any], Any, bool]:
    """(uniform row, duplicate key, whether the schema is a tiled one) of one record.

    Raises:
        ValueError: an empty gold answer, an `alt_answers` that is not a list, an empty problem, or a
            record of no known schema; TypeError, AttributeError, ...: a field of the wrong type.
    """
    tiled = True
    if "id" in rec and "problem" in rec and "answer" in rec:  # uniform schema
        _check_gold(name, where, "answer", rec["answer"])
        row = dict(rec)
        alts = row.get("alt_answers")
        if isinstance(alts, (str, bytes, Mapping)):
            # list("12") would accept "1" and "2" as answers
            raise ValueError(f"benchmark {name!r}: {where}: alt_answers must be a list, got {alts!r:.60}")
        row["alt_answers"] = [] if alts is None else _as_list(alts)  # parquet gives a numpy array
        for j, alt in enumerate(row["alt_answers"]):
            _check_gold(name, where, f"alt_answers[{j}]", alt)
        if "answer_upstream" in row:
            _check_gold(name, where, "answer_upstream", row["answer_upstream"])
        problem = row["problem"]
        row["problem"] = strip_instruction(problem)
        key, tiled = str(row["id"]), False
    elif "prompt" in rec and "reward_model" in rec:  # released verl schema, tiled copies
        prompt = _as_list(rec["prompt"])
        user = [m["content"] for m in prompt if m.get("role") == "user"]
        index = (rec.get("extra_info") or {}).get("index", i)
        truth = (rec["reward_model"] or {}).get("ground_truth")
        _check_gold(name, where, "reward_model.ground_truth", truth)
        problem = user[-1] if user else None
        row = _row(name, i, problem, truth, index)
        row["index"] = int(index)
        key = row["index"]
    elif "question" in rec and "answer" in rec:  # flat released schema (AIME 2025)
        _check_gold(name, where, "answer", rec["answer"])
        key = problem = rec["question"]
        row = _row(name, n_rows, problem, rec["answer"])
    elif "problem" in rec and "answer" in rec:
        _check_gold(name, where, "answer", rec["answer"])
        key = problem = rec["problem"]
        row = _row(name, n_rows, problem, rec["answer"])
    else:
        raise ValueError(f"benchmark {name!r}: {where}: a record of no known schema (fields {sorted(rec)[:8]})")
    if not isinstance(problem, str) or not problem.strip():  # a null problem was posed as the text "None"
        raise ValueError(f"benchmark {name!r}: {where}: the problem statement is empty or not text ({problem!r:.60})")
    return row, key, tiled


def rows_from_records(
    name: str,
    records: Iterable[Mapping[str, Any]],
    *,
    locations: Optional[Sequence[str]] = None,
    allow_duplicate_ids: bool = False,
) -> list[dict[str, Any]]:
    """Uniform rows from parsed records of any supported schema (see the module docstring).

    Every gold answer must be there (`answer`, each of `alt_answers`, the released key): an empty or
    null one is an error. Two rows with one `id` (uniform schema) are an error unless
    ``allow_duplicate_ids`` (then the first is kept, and the others are named on stderr). The tiled
    released files (verl schema, flat question/answer tables) repeat every problem by design: an
    exact copy is dropped silently, a copy that differs (another answer or statement) is a duplicate.

    Args:
        locations: where each record is, for errors ("path:line"); default "record i".

    Raises:
        ValueError: a record of no known schema, an empty gold answer, or a duplicate id.
    """
    rows: list[dict[str, Any]] = []
    first_at: dict[Any, tuple[str, dict[str, Any]]] = {}
    duplicates: list[str] = []
    for i, rec in enumerate(records):
        where = locations[i] if locations is not None else f"record {i}"
        try:
            row, key, tiled = _record_row(name, where, i, len(rows), rec)
            hash(key)
        except (TypeError, AttributeError, KeyError, ValueError) as error:
            if str(error).startswith(f"benchmark {name!r}: "):
                raise
            # A field of the wrong type (`extra_info.index: "abc"`, `reward_model: "5"`, a list as `question`).
            raise ValueError(
                f"benchmark {name!r}: {where}: a malformed record ({type(error).__name__}: {error})"
            ) from None
        if key in first_at:
            first_where, first_row = first_at[key]
            same = tiled and {k: v for k, v in row.items() if k != "id"} == {
                k: v for k, v in first_row.items() if k != "id"
            }
            if same:
                continue  # a tiled copy of the released file
            what = f"id {row['id']!r}" if not tiled else f"problem {key!r:.60} (another answer or statement)"
            message = f"{where}: duplicate {what}, first at {first_where}"
            if not allow_duplicate_ids:
                raise ValueError(
                    f"benchmark {name!r}: {message}; give every problem its own id, or pass "
                    "--allow-duplicate-ids to keep the first row of each id"
                )
            duplicates.append(message)
            continue
        first_at[key] = (where, row)
        rows.append(row)
    if duplicates:
        print(
            f"[evaluate] benchmark {name!r}: {len(duplicates)} duplicate row(s) dropped, the first of each id kept "
            f"(--allow-duplicate-ids): {duplicates[0]}" + (" ..." if len(duplicates) > 1 else ""),
            file=sys.stderr,
        )
    return rows
