"""The evaluation data's load checks (`cpmobius.eval.records`, `cpmobius.eval.data`): an empty or null
gold answer is an error naming the file and line, two rows with one id are an error unless
``--allow-duplicate-ids``, and a UTF-8 byte-order mark is read (benchmark and completions files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cpmobius.eval.cli import main
from cpmobius.eval.completions import read_completions
from cpmobius.eval.data import HUB_SOURCES, load_benchmark, rows_from_hub_records, rows_from_records
from cpmobius.jsonl import write_jsonl

BOM = b"\xef\xbb\xbf"


def row(i: int, answer, **extra) -> dict:
    return {"id": f"aime24-{i}", "problem": f"Problem {i}?", "answer": answer, "alt_answers": [], **extra}


def write_rows(folder: Path, rows: list[dict]) -> Path:
    return write_jsonl(folder / "aime24" / "aime24.jsonl", rows)


def completions(tmp_path: Path, problems: int) -> Path:
    return write_jsonl(
        tmp_path / "run" / "completions.jsonl",
        [{"benchmark": "aime24", "problem_id": f"aime24-{i}", "response": "\\boxed{1}"} for i in range(problems)],
    )


def score(tmp_path: Path, data: Path, problems: int, *extra: str) -> int:
    args = ["--completions", str(completions(tmp_path, problems)), "--data-dir", str(data), "--bootstrap", "10"]
    return main([*args, "--no-grader-report", *extra])


# ----------------------------------------------------------------------------- empty or null gold


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"answer": ""}, id="empty"),
        pytest.param({"answer": None}, id="null"),
        pytest.param({"answer": "  \n"}, id="blank"),
        pytest.param({"answer": []}, id="empty-list"),
        pytest.param({"answer": ["1", ""]}, id="list-with-empty"),
        pytest.param({"answer": "1", "alt_answers": ["", "1.0"]}, id="empty-alt"),
        pytest.param({"answer": "1", "alt_answers": [None]}, id="null-alt"),
        pytest.param({"answer": "1", "answer_upstream": None}, id="null-released-key"),
    ],
)
def test_an_empty_or_null_gold_is_a_load_error_naming_file_and_line(tmp_path, bad):
    path = write_rows(tmp_path, [row(0, "5"), {**row(1, "1"), **bad}, row(2, "7")])
    with pytest.raises(ValueError, match="empty gold answer") as error:
        load_benchmark("aime24", tmp_path)
    assert f"{path}:2" in str(error.value)


def test_a_blank_line_counts_in_the_line_number(tmp_path):
    path = tmp_path / "aime24" / "aime24.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(row(0, "5")) + "\n\n" + json.dumps(row(1, None)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{path}:3: empty gold answer"):
        load_benchmark("aime24", tmp_path)


def test_zero_is_a_gold_answer(tmp_path):
    write_rows(tmp_path, [row(0, 0), row(1, "0"), row(2, 0.0)])
    assert [r["answer"] for r in load_benchmark("aime24", tmp_path)] == [0, "0", 0.0]


def test_the_cli_refuses_an_empty_gold_instead_of_scoring_it_as_an_error(tmp_path, capsys):
    data = tmp_path / "data"
    path = write_rows(data, [row(0, "1"), row(1, "")])
    assert score(tmp_path, data, 2) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: empty gold answer" in err and "Traceback" not in err


def test_released_schemas_and_hub_records_are_checked_too():
    verl = {"prompt": [{"role": "user", "content": "Q?"}], "extra_info": {"index": 3}}
    with pytest.raises(ValueError, match="file.parquet row 1: empty gold answer"):
        rows_from_records(
            "amc",
            [{**verl, "reward_model": {"ground_truth": 1.0}}, {**verl, "reward_model": {"ground_truth": float("nan")}}],
            locations=["file.parquet row 0", "file.parquet row 1"],
        )
    with pytest.raises(ValueError, match="record 0: empty gold answer"):
        rows_from_records("aime25", [{"question": "Q?", "answer": None}])
    source = HUB_SOURCES["aime24"]
    with pytest.raises(ValueError, match="empty gold answer"):
        rows_from_hub_records("aime24", [{"problem": "Q?", "answer": "", "id": 1}], source)


# ----------------------------------------------------------------------------- duplicate ids


def test_two_rows_with_one_id_are_an_error_naming_both_lines(tmp_path):
    path = write_rows(tmp_path, [row(0, "5"), row(1, "6"), {**row(0, "7"), "problem": "Another?"}])
    with pytest.raises(ValueError, match="duplicate id 'aime24-0'") as error:
        load_benchmark("aime24", tmp_path)
    assert f"{path}:3" in str(error.value) and f"first at {path}:1" in str(error.value)
    assert "--allow-duplicate-ids" in str(error.value)


def test_an_exact_copy_of_a_row_is_a_duplicate_too(tmp_path):
    write_rows(tmp_path, [row(0, "5"), row(0, "5")])
    with pytest.raises(ValueError, match="duplicate id"):
        load_benchmark("aime24", tmp_path)


def test_ids_are_compared_as_text(tmp_path):
    write_rows(tmp_path, [{**row(0, "5"), "id": 1}, {**row(1, "6"), "id": "1"}])
    with pytest.raises(ValueError, match="duplicate id"):
        load_benchmark("aime24", tmp_path)


def test_allow_duplicate_ids_keeps_the_first_and_says_so(tmp_path, capsys):
    write_rows(tmp_path, [row(0, "5"), row(1, "6"), row(0, "7"), row(1, "8")])
    rows = load_benchmark("aime24", tmp_path, allow_duplicate_ids=True)
    assert [(r["id"], r["answer"]) for r in rows] == [("aime24-0", "5"), ("aime24-1", "6")]
    err = capsys.readouterr().err
    assert "2 duplicate row(s) dropped" in err and "duplicate id 'aime24-0'" in err


def test_the_cli_flag(tmp_path, capsys):
    data = tmp_path / "data"
    write_rows(data, [row(0, "1"), row(1, "2"), row(1, "3")])
    assert score(tmp_path, data, 2) == 2
    assert "duplicate id 'aime24-1'" in capsys.readouterr().err
    assert score(tmp_path, data, 2, "--allow-duplicate-ids") == 0
    result = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [p["golds"] for p in result["problems"]["aime24"]] == [["1"], ["2"]]


def test_tiled_released_copies_are_dropped_but_conflicting_copies_are_not():
    def verl(index: int, truth) -> dict:
        return {
            "prompt": [{"role": "user", "content": f"Q{index}?"}],
            "reward_model": {"ground_truth": truth},
            "extra_info": {"index": index},
        }

    tiled = [verl(0, 1.0), verl(1, 2.0)] * 3
    assert [r["answer"] for r in rows_from_records("amc", tiled)] == ["1", "2"]
    with pytest.raises(ValueError, match="record 2: duplicate problem 0"):
        rows_from_records("amc", [verl(0, 1.0), verl(1, 2.0), verl(0, 9.0)])
    flat = [{"question": "Q?", "answer": "4"}, {"question": "Q?", "answer": "4"}, {"question": "R?", "answer": "5"}]
    assert len(rows_from_records("aime25", flat)) == 2
    with pytest.raises(ValueError, match="duplicate problem 'Q\\?'"):
        rows_from_records("aime25", [{"question": "Q?", "answer": "4"}, {"question": "Q?", "answer": "5"}])


# ----------------------------------------------------------------------------- byte-order mark


def test_a_benchmark_file_with_a_byte_order_mark_loads(tmp_path):
    path = write_rows(tmp_path, [row(0, "5"), row(1, "6")])
    path.write_bytes(BOM + path.read_bytes())
    assert [r["id"] for r in load_benchmark("aime24", tmp_path)] == ["aime24-0", "aime24-1"]


def test_a_completions_file_with_a_byte_order_mark_loads(tmp_path):
    path = completions(tmp_path, 2)
    path.write_bytes(BOM + path.read_bytes())
    assert [r["problem_id"] for r in read_completions(path)] == ["aime24-0", "aime24-1"]


def test_the_cli_scores_files_with_byte_order_marks(tmp_path):
    data = tmp_path / "data"
    path = write_rows(data, [row(0, "1"), row(1, "2")])
    path.write_bytes(BOM + path.read_bytes())
    done = completions(tmp_path, 2)
    done.write_bytes(BOM + done.read_bytes())
    args = ["--completions", str(done), "--data-dir", str(data), "--bootstrap", "10", "--no-grader-report"]
    assert main(args) == 0
    result = json.loads((tmp_path / "run" / "results.json").read_text())
    assert [p["correct"] for p in result["problems"]["aime24"]] == [[True], [False]]


# ----------------------------------------------------------------------------- malformed records and encodings


def test_alt_answers_as_one_string_is_an_error_not_one_accepted_answer_per_character(tmp_path):
    path = write_rows(tmp_path, [row(0, "5", alt_answers="12")])
    with pytest.raises(ValueError, match=f"{path}:1: alt_answers must be a list"):
        load_benchmark("aime24", tmp_path)


def test_a_uniform_parquet_file_with_alt_answers_loads_and_is_checked(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "aime24" / "aime24.parquet"
    path.parent.mkdir(parents=True)
    pd.DataFrame([row(0, "5", alt_answers=["5.0", "05"]), row(1, "7")]).to_parquet(path)
    assert [r["alt_answers"] for r in load_benchmark("aime24", tmp_path)] == [["5.0", "05"], []]
    pd.DataFrame([row(0, "5", alt_answers=["5.0", ""])]).to_parquet(path)
    with pytest.raises(ValueError, match=r"row 0: empty gold answer \(alt_answers\[1\]"):
        load_benchmark("aime24", tmp_path)


@pytest.mark.parametrize("problem", [None, "", "  "])
def test_an_empty_or_null_problem_is_a_load_error(tmp_path, problem):
    path = write_rows(tmp_path, [row(0, "5"), {**row(1, "1"), "problem": problem}])
    with pytest.raises(ValueError, match=f"{path}:2: the problem statement is empty"):
        load_benchmark("aime24", tmp_path)


@pytest.mark.parametrize(
    "record",
    [
        {
            "prompt": [{"role": "user", "content": "q"}],
            "reward_model": {"ground_truth": "1"},
            "extra_info": {"index": "a"},
        },
        {
            "prompt": [{"role": "user", "content": "q"}],
            "reward_model": {"ground_truth": "1"},
            "extra_info": {"index": None},
        },
        {"prompt": "q", "reward_model": {"ground_truth": "1"}},
        {"prompt": [{"role": "user", "content": "q"}], "reward_model": "1"},
    ],
    ids=["index-text", "index-null", "prompt-text", "reward-model-text"],
)
def test_a_released_record_with_a_field_of_the_wrong_type_is_a_load_error_naming_file_and_line(tmp_path, record):
    path = write_rows(tmp_path, [record])
    with pytest.raises(ValueError, match=f"{path}:1: a malformed record"):
        load_benchmark("aime24", tmp_path)


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_a_benchmark_file_not_in_utf8_is_a_load_error_naming_file_and_line(tmp_path, encoding):
    path = tmp_path / "aime24" / "aime24.jsonl"
    path.parent.mkdir(parents=True)
    lines = [json.dumps(row(0, "5")), json.dumps(row(1, "é"), ensure_ascii=False)]
    path.write_bytes("\n".join(lines).encode(encoding))
    with pytest.raises(ValueError, match=f"{path}:{1 if encoding == 'utf-16' else 2}: not UTF-8 text"):
        load_benchmark("aime24", tmp_path)


def test_a_benchmark_file_with_windows_line_ends_loads(tmp_path):
    path = tmp_path / "aime24" / "aime24.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\r\n".join(json.dumps(row(i, str(i))).encode() for i in range(3)) + b"\r\n")
    assert [r["answer"] for r in load_benchmark("aime24", tmp_path)] == ["0", "1", "2"]
