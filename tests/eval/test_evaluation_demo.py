"""The built-in `demo` benchmark: the evaluation runs with no benchmark files (a fresh clone), its
answers are graded right when a response gives them, it gets its own table column, and a missing
benchmark file says where the data comes from."""

from __future__ import annotations

import json

import pytest

from cpmobius.eval.cli import main
from cpmobius.eval.data import gold_answers, load_benchmark
from cpmobius.eval.report import markdown_table
from cpmobius.grading import grade
from cpmobius.jsonl import write_jsonl


def test_demo_loads_without_any_data_folder(tmp_path):
    rows = load_benchmark("demo", tmp_path / "nothing-here")
    assert [r["id"] for r in rows] == [f"demo-{i}" for i in range(8)]
    assert load_benchmark("demo", source="hub") == rows  # built in: no hub call either
    assert all(r["answer_upstream"] == r["answer"] for r in rows)


@pytest.mark.parametrize("key", ["corrected", "released"])
def test_each_demo_answer_is_graded_right_when_boxed(key):
    for problem_id, golds in gold_answers(load_benchmark("demo"), key).items():
        assert grade(golds[0], f"So the answer is $\\boxed{{{golds[0]}}}$.").correct, problem_id


def test_demo_scoring_cli_hand_computed(tmp_path, capsys):
    rows = load_benchmark("demo")
    # Responses 0, 1 of every problem: its answer boxed; response 2: a wrong box; response 3: none.
    # avg@4 = 2/4 = 50 % on every problem; pass@4 = maj@4 = 100 % (2 right votes vs 1 wrong).
    records = [
        {"benchmark": "demo", "problem_id": r["id"], "sample": j, "response": text}
        for r in rows
        for j, text in enumerate([f"\\boxed{{{r['answer']}}}"] * 2 + ["\\boxed{-1}", "no idea"])
    ]
    completions = write_jsonl(tmp_path / "c.jsonl", records)
    assert main(["--completions", str(completions), "--bootstrap", "50", "--out", str(tmp_path / "o")]) == 0
    summary = json.loads((tmp_path / "o" / "results.json").read_text())["summary"]
    assert summary["demo"]["k"] == 4 and summary["demo"]["n_problems"] == 8
    assert (summary["demo"]["avg@k"], summary["demo"]["pass@k"], summary["demo"]["maj@k"]) == (50.0, 100.0, 100.0)
    assert summary["Avg"]["avg@k"] is None  # the demo is never part of the paper's averages
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("| Avg | OOD Avg | Avg w/o Minerva | demo |")
    assert "| ours avg@k | — | — | — | — | — | — | — | — | — | 50.0 [50.0, 50.0] |" in out


def test_a_benchmark_outside_the_paper_columns_gets_its_own_column():
    entry = {
        "k": 2,
        "n_problems": 1,
        "n_problems_expected": 1,
        "n_problems_benchmark": 1,
        "complete": True,
        "avg@k": 50.0,
        "avg@k_ci": [50.0, 50.0],
    }
    table = markdown_table({"amc23": entry}, metrics=("avg@k",))
    assert (
        table.splitlines()[0]
        == "| | AIME24 | AIME25 | AMC | MATH-500 | Minerva | OlympiadBench | Avg | OOD Avg | Avg w/o Minerva | amc23 |"
    )
    assert "amc23 2" in table  # the k line names it


def test_a_missing_benchmark_file_says_where_the_data_comes_from(tmp_path, capsys):
    completions = write_jsonl(
        tmp_path / "c.jsonl", [{"benchmark": "aime24", "problem_id": "aime24-0", "response": "x"}]
    )
    assert main(["--completions", str(completions), "--data-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "scripts/fetch_benchmarks.py" in err and "--source hub" in err and "--benchmarks demo" in err
