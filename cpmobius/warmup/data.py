"""Coach warm-up data: Eurus-2-RL-Data math rows → bare problems → the 4K-problem SFT set.

Stage: data preparation for the Coach SFT warm-up (`cpmobius.warmup.sft` trains on its output).
Paper §3: before co-evolution the Coach gets a light SFT on 4,000 math problems from PRIME's
Eurus-2-RL-Data, so that it writes well-formed problems from the start. The paper says no more
than that; the released code ships no data, script or settings. Everything below the selection of
"4K math problems" is therefore ours and marked ``# CPMöbius:``:

* only math rows (``data_source`` ``numina_*``, ``ability`` ``math``);
* the bare problem statement: the system prompt and PRIME's instruction suffix
  (``"\\n\\nPresent the answer in LaTex format: \\boxed{Your answer}"``, the math prompt of
  PRIME's Eurus-2-7B-SFT model card) are removed; the ground truth never enters the output;
* whitespace normalised, exact duplicates (case- and whitespace-insensitive) dropped;
* a character-length band;
* benchmark decontamination by word n-grams (`OVERLAP_RULE`);
* the Coach-output validator (`cpmobius.coach.find_problem_fault`) applied to every problem, so
  the warm-up never teaches a format the loop would reject (a leaked answer, several problems, ...);
* a seeded sample from the pool sorted by text (same output for any input row order).

Each SFT row is ``[{"role": "user", "content": coach.instruction}, {"role": "assistant",
"content": problem}]``: the user turn is exactly the prompt the Coach answers during co-evolution
(`cpmobius.prompts.coach_prompt`).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from tqdm import tqdm

from cpmobius.warmup.sources import (
    DEFAULT_NGRAM,
    OVERLAP_RULE,
    BenchmarkProblem,
    OverlapIndex,
    dedup_key,
    extract_problem,
    file_sha256,
    is_math_row,
)

HUB_ID = "PRIME-RL/Eurus-2-RL-Data"
DEFAULT_NUM = 4000  # paper §3: "4K problems"
DEFAULT_SEED = 0
DEFAULT_MIN_CHARS = 40
DEFAULT_MAX_CHARS = 1000


class NotEnoughProblemsError(ValueError):
    """Fewer problems survive the filters than were asked for."""


@dataclass
class Candidate:
    """A problem that passed every filter.

    Attributes:
        problem: the bare, whitespace-normalised problem statement.
        data_source: the Eurus ``data_source`` (``numina_cn_k12``, ...).
        source_row: the row's position in the input.
    """

    problem: str
    data_source: str
    source_row: int


@dataclass
class FilterReport:
    """What `filter_problems` kept and dropped.

    Attributes:
        pool: surviving problems, in input order.
        rows_by_data_source: every input row's ``data_source``, counted.
        drops: reason → count; ``benchmark_overlap/<name>`` counts each benchmark a dropped problem
            matched (one problem may match two: ``amc`` and its subset ``amc23``), and
            ``coach_validator/<reason>`` each Coach-validator rejection.
        overlaps: one entry per problem dropped for benchmark overlap (source row, data_source,
            problem, matched benchmarks and ids, one shared n-gram).
        suffix_stripped: math rows whose instruction suffix was found and removed.
    """

    pool: list[Candidate] = field(default_factory=list)
    rows_by_data_source: Counter = field(default_factory=Counter)
    drops: Counter = field(default_factory=Counter)
    overlaps: list[dict] = field(default_factory=list)
    suffix_stripped: int = 0


def filter_problems(
    rows: Iterable[Mapping[str, Any]],
    overlap_index: OverlapIndex,
    *,
    min_chars: int = DEFAULT_MIN_CHARS,
    max_chars: int = DEFAULT_MAX_CHARS,
    coach_validate: bool = True,
    total: Optional[int] = None,
    progress: bool = False,
) -> FilterReport:
    """Keep the usable, unique, uncontaminated math problems of Eurus rows.

    Each row is dropped for the first reason that applies, in this order: ``not_math``,
    ``no_problem`` (no non-empty user message), ``too_short`` / ``too_long`` (normalised characters
    outside ``[min_chars, max_chars]``), ``duplicate`` (an earlier row had the same `dedup_key`,
    whatever happened to it; of a kept family the pool holds the smallest ``(text, data_source)``,
    so the pool's texts do not depend on the row order), ``benchmark_overlap`` (`OverlapIndex.match`),
    ``coach_validator/<reason>`` (`cpmobius.coach.find_problem_fault`).

    Args:
        rows: Eurus-schema rows (``data_source``, ``prompt``, ``ability``, ...).
        overlap_index: the benchmarks' n-grams.
        min_chars: shortest kept problem, characters.
        max_chars: longest kept problem, characters.
        coach_validate: apply the Coach-output validator.
        total: number of rows, for the progress bar.
        progress: show a tqdm progress bar.

    Returns:
        The `FilterReport`.

    Raises:
        ValueError: ``min_chars`` > ``max_chars``.
    """
    if not 0 <= min_chars <= max_chars:
        raise ValueError(f"need 0 <= min_chars <= max_chars, got {min_chars}, {max_chars}")
    from cpmobius.coach import find_problem_fault
    from cpmobius.settings import CoachSettings

    validator_settings = CoachSettings(max_problem_chars=max(max_chars, 1))
    report, seen = FilterReport(), {}  # dedup_key → index in the pool (None: the first copy was dropped)
    for row_index, row in enumerate(tqdm(rows, total=total, desc="filter rows", unit="row", disable=not progress)):
        data_source = str(row.get("data_source", ""))
        report.rows_by_data_source[data_source] += 1
        # CPMöbius: the paper says "math problems"; Eurus also holds code rows.
        if not is_math_row(row):
            report.drops["not_math"] += 1
            continue
        problem, suffix_stripped = extract_problem(row.get("prompt"))
        report.suffix_stripped += suffix_stripped
        if problem is None:
            report.drops["no_problem"] += 1
            continue
        # CPMöbius: a length band (the paper gives none).
        if len(problem) < min_chars or len(problem) > max_chars:
            report.drops["too_short" if len(problem) < min_chars else "too_long"] += 1
            continue
        key = dedup_key(problem)
        if key in seen:
            report.drops["duplicate"] += 1
            kept = seen[key]
            # The family's representative is its smallest (text, data_source): the same for any row order.
            if kept is not None and (problem, data_source) < (report.pool[kept].problem, report.pool[kept].data_source):
                report.pool[kept] = Candidate(problem, data_source, row_index)
            continue
        seen[key] = None
        # CPMöbius: decontamination against the evaluation benchmarks (the paper reports none).
        hits, shared = overlap_index.match(problem)
        if hits:
            for name in sorted({benchmark for benchmark, _ in hits}):
                report.drops[f"benchmark_overlap/{name}"] += 1
            report.overlaps.append(
                {
                    "source_row": row_index,
                    "data_source": data_source,
                    "problem": problem,
                    "benchmarks": sorted({benchmark for benchmark, _ in hits}),
                    "benchmark_ids": sorted(i for _, i in hits),
                    "shared_words": shared,
                }
            )
            continue
        # CPMöbius: teach only problems the loop's Coach validator would accept.
        fault = find_problem_fault(problem, False, validator_settings) if coach_validate else None
        if fault is not None:
            report.drops[f"coach_validator/{fault}"] += 1
            continue
        seen[key] = len(report.pool)
        report.pool.append(Candidate(problem, data_source, row_index))
    return report


def select_problems(
    pool: Sequence[Candidate], num: int, seed: int, drops: Optional[Mapping[str, int]] = None
) -> list[Candidate]:
    """``num`` problems drawn without replacement, with ``random.Random(seed)``, from the pool sorted
    by `dedup_key` (so the draw does not depend on the input row order).

    Raises:
        NotEnoughProblemsError: the pool holds fewer than ``num`` problems (the message gives the
            pool size and ``drops``).
        ValueError: ``num`` < 1.
    """
    if num < 1:
        raise ValueError(f"num must be >= 1, got {num}")
    if len(pool) < num:
        why = ", ".join(f"{reason}: {count}" for reason, count in sorted((drops or {}).items()))
        raise NotEnoughProblemsError(
            f"only {len(pool)} problems remain after filtering, {num} requested (dropped: {why or 'none'}); "
            "lower --num, widen --min-chars/--max-chars, or give a larger source"
        )
    ordered = sorted(pool, key=lambda c: (dedup_key(c.problem), c.source_row))
    return random.Random(seed).sample(ordered, num)


def build_messages(problem: str, instruction: str) -> list[dict[str, str]]:
    """One SFT conversation: the Coach's prompt (`cpmobius.prompts.coach_prompt`) answered by ``problem``."""
    from cpmobius.prompts import coach_prompt

    return coach_prompt(instruction) + [{"role": "assistant", "content": problem}]


def prepare_warmup_data(
    rows: Iterable[Mapping[str, Any]],
    benchmarks: Sequence[BenchmarkProblem],
    *,
    num: int = DEFAULT_NUM,
    seed: int = DEFAULT_SEED,
    min_chars: int = DEFAULT_MIN_CHARS,
    max_chars: int = DEFAULT_MAX_CHARS,
    ngram: int = DEFAULT_NGRAM,
    coach_validate: bool = True,
    instruction: Optional[str] = None,
    total: Optional[int] = None,
    progress: bool = False,
) -> tuple[list[dict], dict]:
    """Eurus rows → the warm-up SFT rows and their manifest (paper §3: 4K Eurus-2-RL-Data problems).

    Args:
        rows: Eurus-schema rows.
        benchmarks: evaluation problems to decontaminate against (`load_benchmarks`).
        num: problems to select (paper: 4,000).
        seed: selection seed.
        min_chars: shortest kept problem, characters.
        max_chars: longest kept problem, characters.
        ngram: n of the overlap rule (`OVERLAP_RULE`).
        coach_validate: drop problems the Coach-output validator rejects.
        instruction: the Coach's user turn; None = ``CoachSettings().instruction``, the prompt of
            co-evolution.
        total: number of rows, for the progress bar.
        progress: show progress bars.

    Returns:
        ``(sft_rows, manifest)``: ``num`` dicts with ``messages`` (user = instruction, assistant =
        problem), ``data_source`` and ``source_row``; and the manifest (counts, rule, drops, overlap
        report; the caller adds source and output hashes).

    Raises:
        NotEnoughProblemsError: too few problems survive the filters.
    """
    from cpmobius.settings import CoachSettings

    instruction = CoachSettings().instruction if instruction is None else instruction
    index = OverlapIndex(tqdm(benchmarks, desc="index benchmarks", unit="problem", disable=not progress), ngram)
    report = filter_problems(
        rows,
        index,
        min_chars=min_chars,
        max_chars=max_chars,
        coach_validate=coach_validate,
        total=total,
        progress=progress,
    )
    chosen = select_problems(report.pool, num, seed, report.drops)
    sft_rows = [
        {"messages": build_messages(c.problem, instruction), "data_source": c.data_source, "source_row": c.source_row}
        for c in chosen
    ]
    manifest = {
        "paper": "CPMöbius §3: Coach warm-up SFT on 4K math problems from PRIME's Eurus-2-RL-Data",
        "num": num,
        "seed": seed,
        "selection": "random.Random(seed).sample(pool sorted by case/whitespace-insensitive text, num)",
        "length_chars": {"min": min_chars, "max": max_chars},
        "ngram": ngram,
        "overlap_rule": OVERLAP_RULE,
        "coach_validator": coach_validate,
        "coach_instruction": instruction,
        "rows_in": sum(report.rows_by_data_source.values()),
        "suffix_stripped": report.suffix_stripped,
        "pool": len(report.pool),
        "rows_by_data_source": {
            "before": dict(sorted(report.rows_by_data_source.items())),
            "pool": dict(sorted(Counter(c.data_source for c in report.pool).items())),
            "after": dict(sorted(Counter(c.data_source for c in chosen).items())),
        },
        "drops": dict(sorted(report.drops.items())),
        "benchmarks": dict(sorted(Counter(b.benchmark for b in benchmarks).items())),
        "benchmark_overlaps": report.overlaps,
    }
    return sft_rows, manifest


def write_parquet(sft_rows: Sequence[Mapping[str, Any]], path: str | Path) -> str:
    """Write the SFT rows (a ``messages`` column of ``[{role, content}]``) and return the file's sha256.

    The bytes depend only on the rows and the pyarrow version (no pandas index or timestamps).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    schema = pa.schema([("messages", pa.list_(message)), ("data_source", pa.string()), ("source_row", pa.int64())])
    pq.write_table(pa.Table.from_pylist(list(sft_rows), schema=schema), path)
    return file_sha256(path)
