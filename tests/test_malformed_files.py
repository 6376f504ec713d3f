"""Every JSON-lines reader meets the same malformed files with one error naming the file and line, never a
traceback from deep inside the JSON parser or a codec: validation and out-of-distribution sets, benchmark files,
completions files, warm-up sources and the benchmarks they are decontaminated against, the grading command line.
A crash that cut a completions file inside a character is resumed from, not a decode error."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cpmobius.config import ConfigError
from cpmobius.eval.completions import read_completions
from cpmobius.eval.data import load_benchmark
from cpmobius.settings import ValidationSettings
from cpmobius.validation import load_validation_set
from cpmobius.warmup import sources

GOOD = {"id": "p0", "problem": "What is 2 + 3?", "answer": "5", "benchmark": "amc", "problem_id": "p0", "response": "5"}
# (name, the bad line as bytes, what the message says)
PAYLOADS = [
    ("nested", b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    (
        "latin-1",
        json.dumps({**GOOD, "problem": "Combien fait 2 + 3, très vite ?"}, ensure_ascii=False).encode("latin-1"),
        "not UTF-8 text (byte 0xe8)",
    ),
    ("not an object", b"[1, 2, 3]", "expected a JSON object, got list"),
]


def _write(path: Path, bad: bytes) -> Path:
    """A good line, then the bad one on line 2."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + bad + b"\n")
    return path


def _validation(path: Path) -> None:
    load_validation_set(ValidationSettings(dataset=str(path)))


def _benchmark(path: Path) -> None:
    load_benchmark("amc", path=path)


def _warmup_benchmarks(path: Path) -> None:
    sources.load_benchmarks(path.parent.parent)


READERS = [
    ("validation set", "val.jsonl", _validation, ConfigError),
    ("benchmark file", "amc.jsonl", _benchmark, ValueError),
    ("completions file", "completions.jsonl", read_completions, ValueError),
    ("warm-up source", "eurus.jsonl", sources.read_rows, ValueError),
    ("decontamination benchmarks", "eval/amc/amc.jsonl", _warmup_benchmarks, ValueError),
]


@pytest.mark.parametrize(("payload", "bad", "says"), PAYLOADS, ids=[p[0] for p in PAYLOADS])
@pytest.mark.parametrize(("reader", "name", "read", "error"), READERS, ids=[r[0] for r in READERS])
def test_a_malformed_line_is_one_error_naming_the_file_and_line(
    tmp_path, reader, name, read, error, payload, bad, says
):
    path = _write(tmp_path / name, bad)
    with pytest.raises(error) as raised:
        read(path)
    assert f"{path}:2: " in str(raised.value) and says in str(raised.value), str(raised.value)


@pytest.mark.parametrize(("payload", "bad", "says"), PAYLOADS, ids=[p[0] for p in PAYLOADS])
def test_the_grading_command_line_names_the_line(payload, bad, says):
    good = json.dumps({"gold": "5", "response": "\\boxed{5}"}).encode()
    done = subprocess.run(
        [sys.executable, "-m", "cpmobius.grading", "verify"], input=good + b"\n" + bad + b"\n", capture_output=True
    )
    err = done.stderr.decode()
    assert done.returncode == 2 and err.startswith("error: line 2: ") and says in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("sample", [0, 1], "sample must be a whole number"),
        ("sample", -1, "sample must be a whole number"),
        ("sample", True, "sample must be a whole number"),
        ("model", {"name": "x"}, "model must be a string"),
    ],
)
def test_a_completion_whose_sample_or_model_has_the_wrong_type_is_named(tmp_path, field, value, says):
    path = _write(tmp_path / "completions.jsonl", json.dumps({**GOOD, field: value}).encode())
    with pytest.raises(ValueError, match=f"^{path}:2: {says}"):
        read_completions(path)


def test_resuming_a_completions_file_cut_inside_a_character_drops_the_cut_line(tmp_path):
    from cpmobius.eval.completions import _load_existing

    path = tmp_path / "completions.jsonl"
    whole = json.dumps({**GOOD, "sample": 0}, ensure_ascii=False)
    cut = json.dumps({**GOOD, "problem_id": "p1", "sample": 0, "response": "é"}, ensure_ascii=False).encode()
    path.write_bytes(whole.encode() + b"\n" + cut[: cut.index("é".encode()) + 1])  # one byte of the two
    kept = _load_existing(path, {"amc": {"p0": 1}})
    assert [rec["problem_id"] for rec in kept["amc"]] == ["p0"]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ({"problem": {"text": "What is 1+1?"}, "answer": "2"}, "needs 'problem', a non-empty string"),
        ({"problem": "  ", "answer": "2"}, "needs 'problem', a non-empty string"),
        ({"problem": "What is 1+1?", "answer": [2]}, "needs 'answer', text or a number"),
        ({"problem": "What is 1+1?", "answer": True}, "needs 'answer', text or a number"),
        ({"problem": "What is 1+1?", "answer": float("inf")}, "'answer' must be a finite number"),
        ({"id": "p0", "problem": "What is 1+1?", "answer": "2"}, "id 'p0' already on line 1"),
    ],
)
def test_a_validation_row_of_the_wrong_shape_is_named_not_read_as_its_text(tmp_path, line, says):
    path = _write(tmp_path / "val.jsonl", json.dumps(line).encode())
    with pytest.raises(ConfigError, match=f"{path}:2: {re.escape(says)}"):
        _validation(path)


def test_validation_numbers_are_read_as_the_benchmarks_answers_are(tmp_path):
    path = tmp_path / "val.jsonl"
    path.write_text("\n".join(json.dumps({"problem": f"p{i}", "answer": a}) for i, a in enumerate([4.0, 7, "x"])))
    assert load_validation_set(ValidationSettings(dataset=str(path))).answers == ["4", "7", "x"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"gold": "2", "response": "\\\\boxed{2}", "gold": "3"}', "the key 'gold' appears twice"),
        ('{"gold": ' + "9" * 5000 + ', "response": "x"}', "not readable JSON"),
    ],
    ids=["duplicate key", "5000-digit integer"],
)
def test_a_line_json_would_read_silently_or_not_at_all_is_named(text, says):
    from cpmobius.jsonl import JSONLineError, json_objects

    with pytest.raises(JSONLineError, match=says):
        list(json_objects([text]))


@pytest.mark.parametrize("answer", [True, {"value": "6"}, float("inf"), [5, float("inf")]])
def test_a_benchmark_gold_answer_that_is_not_text_or_a_finite_number_is_named(tmp_path, answer):
    row = {"id": "p0", "problem": "What is 2 + 3?", "answer": answer}
    path = tmp_path / "amc.jsonl"
    path.write_text(json.dumps(row))
    with pytest.raises(ValueError, match=f"{path}:1: a gold answer is text or a finite number"):
        _benchmark(path)


def test_a_gzip_file_under_a_plain_name_is_named_as_such(tmp_path):
    import gzip

    path = tmp_path / "completions.jsonl"
    path.write_bytes(gzip.compress(json.dumps(GOOD).encode()))
    with pytest.raises(ValueError, match=f"{path}:1: gzip-compressed bytes"):
        read_completions(path)


def test_a_folder_given_as_a_benchmark_file_is_named_as_a_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path} is a folder; give the .jsonl"):
        load_benchmark("amc", path=tmp_path)
