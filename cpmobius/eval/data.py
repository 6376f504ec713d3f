r"""Benchmark data for the evaluation: local JSONL / parquet or the Hugging Face hub; answer keys; prompts.

Stage: evaluation (data side). Every source is turned into the same row shape (the uniform schema of
../shared/data/MANIFEST.md §3): `id`, `problem` (instruction suffix removed), `answer` (the corrected
key), `alt_answers` (other accepted spellings), `answer_upstream` (the released key, when known).

Sources
-------
* local (default): `<data_dir>/<name>/<name>.jsonl` (the curated copies), else `<name>.parquet` in the
  same folder, or any file given as `--data-file name=PATH`. Parquet may be the uniform schema, the
  released verl schema (`prompt`, `reward_model.ground_truth`, `extra_info.index`: the files of
  `ASL-r/CPMobius evaluation/data/`, deduplicated by `extra_info.index`), or a flat `question` /
  `answer` table (the released AIME-2025 file, deduplicated by question text). A JSONL file may
  start with a UTF-8 byte-order mark.
* built in: `demo` (`cpmobius.eval.demo`), eight problems written for this project, shipped with the
  package so that the evaluation runs from a fresh clone (any source; `--data-file demo=PATH` overrides).
* hub: `HUB_SOURCES` (one dataset id, config and split per benchmark, field names below). The ids
  were chosen as the upstream origin of each released file where one exists on the hub, and their
  field mapping was checked against the local copies (tests/eval/test_evaluation_harness.py): the hub
  cannot be reached from our CI, so the row *contents* are checked only through the local copies.

Checks (`cpmobius.eval.records.rows_from_records`, re-exported here): a row whose gold answer
(`answer`, an `alt_answers` entry, the released key) is empty or null is a load error naming the file
and line (it would otherwise be scored as a grading error, lowering the model's score); two rows with
one `id` are an error unless `allow_duplicate_ids` (`--allow-duplicate-ids`: the first row of each id
is kept, the others named on stderr). Exact copies in the tiled released files are dropped silently;
copies that differ are duplicates.

Answer keys (`answer_key`)
--------------------------
* corrected (default): `[answer, *alt_answers]`. Differs from the released key on 32 Minerva rows
  where the released key holds the previous sub-problem's answer (MANIFEST §5), and in formatting
  only elsewhere (AIME leading zeros, AMC floats, OlympiadBench `$…$`).
* released: the released key exactly (`answer_upstream`; for a list, every element as an accepted
  answer with the cpmobius grader, the first element only with `grader=released`, as the released
  evaluation did). Needs the local copies or the released parquet files: the hub copies do not carry it.

Prompts (as the released evaluation): the verl suffix " Let's think step by step and output the
final answer within \boxed{}." is stripped and the bare problem is the only user turn in the evaluated
model's own chat template (no explicit system turn: Qwen2.5-Math's template inserts its default
"Please reason step by step, and put your final answer within \boxed{}.").
Generation gets the prompt as token ids from the template (`encode_prompt`), never as text to be
tokenized again: a template that writes `bos_token` itself (Llama 3, OctoThinker) would otherwise
get a second BOS from the engine's tokenizer.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from cpmobius.eval.records import (  # noqa: F401 - re-exported: the names of `cpmobius.eval.data`
    INSTRUCTION_SUFFIX,
    _as_list,
    _check_gold,
    _jsonable,
    _row,
    plain_answer,
    rows_from_records,
    strip_instruction,
)
from cpmobius.jsonl import JSONLineError, read_json_lines

BENCHMARKS = ("amc", "aime24", "aime25", "math500", "minerva_math", "olympiadbench", "amc23", "demo")
"""Every known benchmark name (folder and file stem under the data dir; `demo` is built in)."""

BUILTIN_BENCHMARKS = ("demo",)
"""Benchmarks shipped with the package (`cpmobius.eval.demo`): no file, no hub."""

STOP_STRINGS = {
    "aime24": ("\n###\nProblem: ", "<|eot_id|>"),
    "aime25": ("\n###\nProblem: ", "<|eot_id|>"),
    "math500": ("\n###\nProblem: ", "<|eot_id|>"),
}
"""Extra stop strings of the released evaluation (only these three tasks), notes §5.1."""

ANSWER_KEYS = ("corrected", "released")


@dataclass(frozen=True)
class HubSource:
    """Where a benchmark lives on the hub and how its fields map onto the uniform schema.

    Attributes:
        repo: dataset id; config: its config name (or None); split: the split holding the problems.
        problem_field / answer_field: the fields holding the statement and the final answer.
        id_field: a field giving a stable problem id (else the row index).
        filter_field / filter_contains: keep only rows whose field contains this text (AMC 2023).
        note: how it relates to the released file.
    """

    repo: str
    split: str
    problem_field: str
    answer_field: str
    config: Optional[str] = None
    id_field: Optional[str] = None
    filter_field: Optional[str] = None
    filter_contains: Optional[str] = None
    note: str = ""


HUB_SOURCES = {
    "amc": HubSource(
        "AI-MO/aimo-validation-amc",
        "train",
        "problem",
        "answer",
        id_field="id",
        note="83 AMC 12 2022-2023 problems; the origin of the released amc_x10.parquet (float answers)",
    ),
    "aime24": HubSource(
        "HuggingFaceH4/aime_2024",
        "train",
        "problem",
        "answer",
        id_field="id",
        note="30 AIME 2024 problems; answers without the released file's leading zeros",
    ),
    "aime25": HubSource(
        "math-ai/aime25",
        "test",
        "problem",
        "answer",
        id_field="id",
        note="30 AIME 2025 problems; a few wordings differ from the released file (MANIFEST §3)",
    ),
    "math500": HubSource(
        "HuggingFaceH4/MATH-500",
        "test",
        "problem",
        "answer",
        id_field="unique_id",
        note="the official MATH-500 split, same strings as the released math_x5.parquet",
    ),
    "minerva_math": HubSource(
        "math-ai/minervamath",
        "test",
        "question",
        "answer",
        note="272 Minerva (OCW) problems with the original keys (the corrected key)",
    ),
    "olympiadbench": HubSource(
        "Hothan/OlympiadBench",
        "train",
        "question",
        "final_answer",
        config="OE_TO_maths_en_COMP",
        id_field="id",
        note="OpenBMB OE_TO_maths_en_COMP, 675 rows; final_answer is a list of $…$ strings",
    ),
    "amc23": HubSource(
        "math-ai/amc23", "test", "question", "answer", note="the 40 AMC 2023 problems of Qwen2.5-Math's evaluation"
    ),
}
"""Hub source per benchmark (docs/evaluation.md, "Data from the hub", lists them)."""


def default_data_dir() -> Path:
    """`$CPMOBIUS_SHARED_DATA/eval`, else `../shared/data/eval` beside the checkout (the project's
    curated copies; tests skip what needs them when this folder is absent)."""
    import os

    env = os.environ.get("CPMOBIUS_SHARED_DATA")
    if env:
        return Path(env) / "eval"
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "eval"


FETCHED_DATA_DIR = Path("data") / "eval"
"""Where `scripts/fetch_benchmarks.py` writes the benchmarks by default (relative to the working folder)."""


def local_data_dir() -> Path:
    """The folder the evaluation reads local benchmarks from when `--data-dir` is not given:
    `default_data_dir()` when it exists, else `data/eval` (`scripts/fetch_benchmarks.py`'s output)."""
    curated = default_data_dir()
    return curated if curated.is_dir() else FETCHED_DATA_DIR


def rows_from_hub_records(name: str, records: Iterable[Mapping[str, Any]], source: HubSource) -> list[dict[str, Any]]:
    """Uniform rows from hub records of `source` (field mapping of `HUB_SOURCES`).

    Raises:
        ValueError: a record lacking the mapped problem or answer field, or with an empty answer.
    """
    rows = []
    for i, rec in enumerate(records):
        if source.filter_field and source.filter_contains not in str(rec.get(source.filter_field, "")):
            continue
        missing = [f for f in (source.problem_field, source.answer_field) if f not in rec]
        if missing:
            raise ValueError(f"hub {source.repo}: record {i} lacks {missing}; fields are {sorted(rec)}")
        _check_gold(name, f"hub {source.repo} record {i}", source.answer_field, rec[source.answer_field])
        rid = rec.get(source.id_field) if source.id_field else None
        row = _row(name, i, rec[source.problem_field], rec[source.answer_field], i)
        row["hub_id"] = _jsonable(rid) if rid is not None else i
        del row["answer_upstream"]  # the hub copies do not carry the released key (see `gold_answers`)
        rows.append(row)
    return rows


def _read_file(name: str, path: Path, allow_duplicate_ids: bool = False) -> list[dict[str, Any]]:
    if path.suffix == ".parquet":
        import pandas as pd

        records = pd.read_parquet(path).to_dict("records")
        where = [f"{path} row {i}" for i in range(len(records))]
        return rows_from_records(name, records, locations=where, allow_duplicate_ids=allow_duplicate_ids)
    try:  # a byte-order mark is read; UTF-16 or Latin-1 bytes are named with their line
        numbered = read_json_lines(path)
    except JSONLineError as error:
        raise ValueError(f"benchmark {name!r}: {path}:{error.line_no}: {error.reason}") from None
    return rows_from_records(
        name,
        [rec for _, rec in numbered],
        locations=[f"{path}:{line_no}" for line_no, _ in numbered],
        allow_duplicate_ids=allow_duplicate_ids,
    )


def load_benchmark(
    name: str,
    data_dir: str | Path | None = None,
    *,
    source: str = "local",
    path: str | Path | None = None,
    allow_duplicate_ids: bool = False,
) -> list[dict[str, Any]]:
    """One benchmark as uniform rows (one per problem).

    Args:
        name: one of `BENCHMARKS`.
        data_dir: folder with one sub-folder per benchmark (default `local_data_dir()`).
        source: "local" or "hub" (`datasets.load_dataset` with `HUB_SOURCES[name]`); a built-in
            benchmark (`demo`) ignores it.
        path: an explicit local file (JSONL or parquet), overriding `data_dir` (and a built-in benchmark).
        allow_duplicate_ids: keep the first of several rows with one id instead of refusing the file.

    Returns:
        Rows with `id`, `problem`, `answer`, `alt_answers` (and `answer_upstream` where known).

    Raises:
        ValueError: unknown benchmark or source, a malformed file, a row without `id`/`answer`, an
            empty or null gold answer (naming the file and line), two rows with one id.
        FileNotFoundError: no local file for the benchmark.
    """
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {BENCHMARKS}")
    if source not in ("local", "hub"):
        raise ValueError(f"unknown data source {source!r}; expected 'local' or 'hub'")
    if name in BUILTIN_BENCHMARKS and path is None:
        from cpmobius.eval.demo import demo_rows

        rows = demo_rows()
    elif source == "hub":
        import datasets

        hub = HUB_SOURCES[name]
        ds = datasets.load_dataset(hub.repo, hub.config, split=hub.split)
        rows = rows_from_hub_records(name, ds, hub)
    else:  # local
        if path is None:
            folder = Path(data_dir if data_dir is not None else local_data_dir()) / name
            candidates = [folder / f"{name}.jsonl", folder / f"{name}.parquet"]
            path = next((p for p in candidates if p.is_file()), candidates[0])
        path = Path(path)
        if path.is_dir():  # given where a file belongs: the fetch hint below would not apply
            raise FileNotFoundError(f"benchmark {name!r}: {path} is a folder; give the .jsonl or .parquet file in it")
        if not path.is_file():
            read_from = shlex.quote(
                str(data_dir if data_dir is not None else local_data_dir())
            )  # where fetched ones land
            raise FileNotFoundError(
                f"benchmark {name!r}: no file {path}. Fetch the benchmarks with `python scripts/fetch_benchmarks.py "
                f"--out {read_from}` (from the Hugging Face hub), load them from the hub with --source hub, give "
                f"--data-dir DIR or --data-file {name}=PATH, or try the pipeline on the built-in --benchmarks demo"
            )
        rows = _read_file(name, path, allow_duplicate_ids)
    for i, row in enumerate(rows):
        if "id" not in row or "answer" not in row:
            raise ValueError(f"benchmark {name!r}: row {i} lacks 'id' or 'answer'")
    if not rows:
        raise ValueError(f"benchmark {name!r}: no problems")
    return rows


def gold_answers(
    rows: Sequence[Mapping[str, Any]], answer_key: str = "corrected", first_only: bool = False
) -> dict[str, list[str]]:
    """problem id → accepted answers (strings, duplicates dropped).

    Args:
        rows: uniform rows.
        answer_key: "corrected" (`[answer, *alt_answers]`) or "released" (`answer_upstream` as
            released: a list's elements, unnormalised, e.g. AIME `"025"`, AMC `142.0`).
        first_only: keep only the first accepted answer (the released grader's rule for lists).

    Raises:
        ValueError: unknown key, or `released` on rows without `answer_upstream` (hub data).
    """
    if answer_key not in ANSWER_KEYS:
        raise ValueError(f"unknown answer_key {answer_key!r}; expected one of {ANSWER_KEYS}")
    golds = {}
    for row in rows:
        if answer_key == "corrected":
            accepted = [str(row["answer"])] + [str(a) for a in row.get("alt_answers") or []]
        else:
            if "answer_upstream" not in row:
                raise ValueError(
                    f"answer_key=released needs the released key ('answer_upstream'), which {row['id']!r} "
                    "lacks: use the local copies or the released parquet files, not the hub"
                )
            # Surrounding white space only (the released Minerva forms end in "\n"; its grader strips too).
            accepted = [str(a).strip() for a in _as_list(row["answer_upstream"])]
        accepted = list(dict.fromkeys(accepted))
        golds[str(row["id"])] = accepted[:1] if first_only else accepted
    return golds


def render_prompt(
    tokenizer: Any, problem: str, system_prompt: Optional[str] = None, answer_instruction: Optional[str] = None
) -> str:
    """The evaluation prompt text of one problem: the model's chat template, one user turn
    (`cpmobius.prompts.player_prompt`, as in training: ``answer_instruction`` from ``--answer-format``).

    Raises:
        ValueError: the tokenizer has no chat template (the released evaluation requires one).
    """
    from cpmobius.prompts import player_prompt

    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the model's tokenizer has no chat template; the released evaluation prompts through it")
    return tokenizer.apply_chat_template(
        player_prompt(problem, system_prompt, answer_instruction), tokenize=False, add_generation_prompt=True
    )


@dataclass(frozen=True)
class EncodedPrompt:
    """One evaluation prompt: its text (for the completions file) and the token ids the engine gets."""

    text: str
    token_ids: list[int] = field(default_factory=list)


def encode_prompt(
    tokenizer: Any, problem: str, system_prompt: Optional[str] = None, answer_instruction: Optional[str] = None
) -> EncodedPrompt:
    """The evaluation prompt of one problem as text and as token ids, both from the chat template.

    The ids are `apply_chat_template(..., tokenize=True)`: the template's own special tokens only
    (no `add_special_tokens` pass), so a template that starts with `bos_token` yields one BOS.

    Raises:
        ValueError: the tokenizer has no chat template, or the template gives no token ids.
    """
    from cpmobius.prompts import player_prompt

    text = render_prompt(tokenizer, problem, system_prompt, answer_instruction)
    ids = tokenizer.apply_chat_template(
        player_prompt(problem, system_prompt, answer_instruction), tokenize=True, add_generation_prompt=True
    )
    if isinstance(ids, Mapping):  # transformers >= 5 returns a BatchEncoding
        ids = ids["input_ids"]
    ids = list(ids)
    if not ids or not all(isinstance(t, int) for t in ids):
        raise ValueError(f"the chat template gave no token ids for a prompt (got {type(ids).__name__})")
    return EncodedPrompt(text, ids)
