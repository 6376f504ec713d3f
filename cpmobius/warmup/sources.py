"""Coach warm-up data, the inputs: reading the sources, one Eurus row → a bare problem, and the
benchmark decontamination index.

Stage: data preparation for the Coach SFT warm-up (`cpmobius.warmup.data` runs the pipeline).
Everything here is ours (the paper names only "4K math problems" of Eurus-2-RL-Data) and marked
``# CPMöbius:`` where it filters:

* ``read_rows``: a local Eurus-schema parquet or JSONL file; ``load_benchmarks``: every benchmark
  problem under the eval dir (``<name>/<name>.jsonl``);
* one row: math rows only (``is_math_row``), the bare problem statement without PRIME's system
  prompt and instruction suffix (``extract_problem``), whitespace normalised, a case- and
  whitespace-insensitive identity for exact duplicates (``dedup_key``);
* ``OverlapIndex``: the benchmarks' word n-grams, matched by `OVERLAP_RULE`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from cpmobius.jsonl import JSONLineError, read_json_lines

DEFAULT_NGRAM = 13
# Candidates shorter than the n-gram but at least this many words are compared as a whole phrase.
SHORT_MIN_WORDS = 8
# A word sequence found in this many different benchmark problems is boilerplate, not an overlap alone.
BOILERPLATE_MIN_PROBLEMS = 2
# ... but a problem whose n-grams (boilerplate included) lie in one benchmark problem for this share overlaps it.
COVERAGE_MIN_FRAC = 0.5

# PRIME's instruction suffixes, removed from the end of the user message. The math one is the
# Eurus-2-7B-SFT prompt ({question} + "\n\nPresent the answer in LaTex format: \boxed{Your answer}");
# the others are the common CoT suffixes, in case a copy of the data carries one instead.
INSTRUCTION_SUFFIXES = (
    re.compile(r"\s*Present the answer in LaTe[Xx] format:\s*\\boxed\{\s*Your answer\s*\}\.?\s*$", re.IGNORECASE),
    re.compile(r"\s*Let'?s think step by step and output the final answer within \\boxed\{\s*\}\.?\s*$", re.IGNORECASE),
    re.compile(r"\s*Please reason step by step, and put your final answer within \\boxed\{\s*\}\.?\s*$", re.IGNORECASE),
)
OVERLAP_RULE = (
    "words = lower-cased [a-z0-9]+ runs. A problem overlaps a benchmark problem iff (a) both have >= n words "
    "and they share one contiguous n-word sequence (n = ngram, default 13, the GPT-3 decontamination rule) "
    f"that is not boilerplate (found in >= {BOILERPLATE_MIN_PROBLEMS} different benchmark problems; copies of one "
    f"problem in several benchmarks, i.e. >= {COVERAGE_MIN_FRAC:.0%} shared n-grams, count once), "
    f"or (b) the problem has {SHORT_MIN_WORDS} <= k < n words and its whole k-word sequence occurs contiguously "
    f"in the benchmark problem and is not boilerplate, or (c) >= {COVERAGE_MIN_FRAC:.0%} of the problem's n-word "
    f"sequences (boilerplate included) occur in that one benchmark problem, or (d) the problem has the same "
    f"word sequence as the benchmark problem (the only rule for problems under {SHORT_MIN_WORDS} words). "
    "Every benchmark JSONL "
    "<eval_dir>/<name>/<name>.jsonl (field 'problem') counts."
)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class BenchmarkProblem:
    """One evaluation problem the warm-up set must not overlap.

    Attributes:
        benchmark: folder name under the eval dir (``amc``, ``math500``, ...).
        id: the row's ``id`` (or ``<benchmark>-<line>`` when it has none).
        problem: the problem statement.
    """

    benchmark: str
    id: str
    problem: str


# --------------------------------------------------------------------------- reading


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a local Eurus-schema file.

    Args:
        path: a ``.parquet`` file or a ``.jsonl`` file (one JSON object a line).

    Returns:
        One dict per row, nested columns as plain lists and dicts.

    Raises:
        FileNotFoundError: no such file.
        ValueError: another extension, a file that is not Parquet, or a JSONL line that is not a JSON object
            (or bytes that are not UTF-8): the message names the file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"source file not found: {path}")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except ValueError as error:  # pyarrow's ArrowInvalid: cut short, or another format under the name
            raise ValueError(f"{path}: not a readable Parquet file ({str(error).splitlines()[0]})") from None
    if path.suffix == ".jsonl":
        try:
            return [row for _, row in read_json_lines(path)]
        except JSONLineError as error:
            raise ValueError(f"{path}:{error.line_no}: {error.reason}") from None
    raise ValueError(f"unsupported source file {path}: expected .parquet or .jsonl")


def load_benchmarks(eval_dir: str | Path) -> list[BenchmarkProblem]:
    """Every problem of every benchmark under ``eval_dir`` (``<name>/<name>.jsonl`` and any other
    ``<name>/*.jsonl``; ``upstream/`` copies are one level deeper and not read).

    Raises:
        FileNotFoundError: ``eval_dir`` is missing or holds no benchmark JSONL.
        ValueError: a line that is not a JSON object with a ``problem`` string, or bytes that are not UTF-8
            (the message names the file and line).
    """
    eval_dir = Path(eval_dir)
    files = sorted(eval_dir.glob("*/*.jsonl")) if eval_dir.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no benchmark JSONL (<name>/<name>.jsonl) under eval dir {eval_dir}")
    problems = []
    for path in files:
        name = path.parent.name
        try:
            rows = read_json_lines(path)
        except JSONLineError as error:
            raise ValueError(f"{path}:{error.line_no}: {error.reason}") from None
        for line_no, row in rows:
            if not isinstance(row.get("problem"), str):
                raise ValueError(f"{path}:{line_no}: needs a 'problem' string")
            problems.append(BenchmarkProblem(name, str(row.get("id", f"{name}-{line_no - 1}")), row["problem"]))
    return problems


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- one row


def is_math_row(row: Mapping[str, Any]) -> bool:
    """A math row of Eurus-2-RL-Data: ``data_source`` ``numina_*`` and ``ability`` math (when given).

    The code rows (``taco``, ``codecontests``, ``apps``, ``codeforces``; ability ``code``) are not.
    """
    ability = row.get("ability")
    return str(row.get("data_source", "")).startswith("numina_") and (ability is None or ability == "math")


def normalise_whitespace(text: str) -> str:
    """Trim, turn tabs/non-breaking spaces/space runs into one space, keep at most one blank line.

    Example: ``"  Find  x.\\n\\n\\n\\nThen y. "`` → ``"Find x.\\n\\nThen y."``.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [re.sub(r"[ \t\f\v\u00a0]+", " ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def extract_problem(prompt: Sequence[Mapping[str, str]]) -> tuple[Optional[str], bool]:
    """The bare problem statement of one Eurus ``prompt``.

    Args:
        prompt: the row's chat messages (a system message with PRIME's reasoning-actions prompt,
            then the user message ``{problem}\\n\\nPresent the answer in LaTex format: \\boxed{Your answer}``).

    Returns:
        ``(problem, suffix_stripped)``: the last user message without system prompt, instruction
        suffix or surrounding whitespace (None when there is no non-empty user message), and
        whether a known suffix was removed.
    """
    users = [m for m in (prompt if prompt is not None else []) if m.get("role") == "user"]
    if not users or not str(users[-1].get("content") or "").strip():
        return None, False
    text = str(users[-1]["content"])
    for suffix in INSTRUCTION_SUFFIXES:
        stripped = suffix.sub("", text)
        if stripped != text:
            return normalise_whitespace(stripped), True
    return normalise_whitespace(text), False


def dedup_key(problem: str) -> str:
    """Case- and whitespace-insensitive identity of a problem (exact duplicates share it)."""
    return re.sub(r"\s+", " ", problem.lower()).strip()


def words_of(text: str) -> tuple[str, ...]:
    """Lower-cased ``[a-z0-9]+`` runs: ``"$x^2 = 4$, find X."`` → ``("x", "2", "4", "find", "x")``."""
    return tuple(_WORD.findall(text.lower()))


# --------------------------------------------------------------------------- benchmark overlap


def _cluster_copies(words_by_ref: Mapping[tuple, tuple], grams: Mapping[tuple, set], ngram: int) -> dict:
    """Benchmark problem → a representative of its copies (problems with the same words, or with >=
    `COVERAGE_MIN_FRAC` of either one's n-grams in the other), by union-find."""
    parent = {ref: ref for ref in words_by_ref}

    def root(ref):
        while parent[ref] != ref:
            parent[ref] = parent[parent[ref]]
            ref = parent[ref]
        return ref

    by_words = {}
    for ref, words in sorted(words_by_ref.items()):
        parent[root(ref)] = root(by_words.setdefault(words, ref))
        windows = [words[i : i + ngram] for i in range(len(words) - ngram + 1)]
        shared = Counter(other for window in windows for other in grams.get(window, ()) if other != ref)
        for other, count in shared.items():
            if count / len(windows) >= COVERAGE_MIN_FRAC:
                parent[root(ref)] = root(other)
    return {ref: root(ref) for ref in words_by_ref}


class OverlapIndex:
    """Word n-grams of the benchmarks, for `OVERLAP_RULE`.

    Args:
        benchmarks: the problems to protect.
        ngram: n (words); at least `SHORT_MIN_WORDS`.

    Raises:
        ValueError: ``ngram`` < `SHORT_MIN_WORDS`.
    """

    def __init__(self, benchmarks: Iterable[BenchmarkProblem], ngram: int = DEFAULT_NGRAM) -> None:
        if ngram < SHORT_MIN_WORDS:
            raise ValueError(f"ngram must be >= {SHORT_MIN_WORDS}, got {ngram}")
        self.ngram = ngram
        # k → k-word sequence → benchmark problems holding it, for k in [SHORT_MIN_WORDS, ngram].
        self._grams: dict[int, dict[tuple, set]] = {k: defaultdict(set) for k in range(SHORT_MIN_WORDS, ngram + 1)}
        self._whole: dict[tuple, set] = defaultdict(set)
        words_by_ref = {}
        for item in benchmarks:
            words = words_of(item.problem)
            ref = (item.benchmark, item.id)
            words_by_ref[ref] = words
            self._whole[words].add(ref)
            for k, grams in self._grams.items():
                for i in range(len(words) - k + 1):
                    grams[words[i : i + k]].add(ref)
        # CPMöbius: contest boilerplate ("... m and n are relatively prime positive integers find m ...") is in
        # several different benchmark problems and in thousands of Numina ones; alone it is not an overlap.
        # One problem in two benchmarks (amc and amc23) counts once. Boilerplate n-grams still count towards
        # the coverage rule (c), so a verbatim copy is always caught.
        cluster = _cluster_copies(words_by_ref, self._grams[ngram], ngram)
        self._common: dict[tuple, set] = {}
        for k, grams in self._grams.items():
            common = [g for g, refs in grams.items() if len({cluster[r] for r in refs}) >= BOILERPLATE_MIN_PROBLEMS]
            for gram in common:
                refs = grams.pop(gram)
                if k == ngram:
                    self._common[gram] = refs
        self.boilerplate = len(self._common)

    def match(self, problem: str) -> tuple[set, Optional[str]]:
        """Benchmark problems ``problem`` overlaps, as ``{(benchmark, id)}``, and one shared word sequence.

        Example: with ngram 13, "a regular hexagon with side length 6 is inscribed in a circle and" (13
        words) shared with a benchmark problem is an overlap; the same 12 words followed by "or" are not.
        """
        words = words_of(problem)
        if words in self._whole:
            return set(self._whole[words]), " ".join(words[: self.ngram])
        if len(words) < SHORT_MIN_WORDS:
            return set(), None
        if len(words) < self.ngram:
            refs = self._grams[len(words)].get(words, set())
            return set(refs), (" ".join(words) if refs else None)
        grams, hits, shared, covered = self._grams[self.ngram], set(), None, Counter()
        windows = [words[i : i + self.ngram] for i in range(len(words) - self.ngram + 1)]
        for window in windows:
            refs = grams.get(window)
            if refs:
                hits |= refs
                shared = shared or " ".join(window)
            for ref in refs or self._common.get(window, ()):
                covered[ref] += 1
        for ref, count in covered.items():
            if count / len(windows) >= COVERAGE_MIN_FRAC and ref not in hits:
                hits.add(ref)
                shared = shared or "(coverage) " + " ".join(windows[0])
        return hits, shared
