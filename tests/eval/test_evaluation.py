"""Evaluation scoring (cpmobius.eval.scoring, cpmobius.eval.summary): hand-computed avg@k / pass@k /
maj@k, CIs, tables, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpmobius.eval.cli import main
from cpmobius.eval.data import default_data_dir, gold_answers, load_benchmark
from cpmobius.eval.report import markdown_table
from cpmobius.eval.scoring import (
    AVG_BENCHMARKS,
    ProblemScores,
    avg_at_k,
    maj_at_k,
    pass_at_k,
    score_completions,
)
from cpmobius.eval.summary import bootstrap_ci, summarise

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_EVAL = default_data_dir()


def boxed(answer: str) -> str:
    return f"Some reasoning. The answer is $\\boxed{{{answer}}}$."


# Three problems, n = 4 responses each (golds[0] is the answer, the rest alt_answers).
GOLDS = {"aime24": {"p1": ["204"], "p2": ["10", "12"], "p3": ["7"]}}
RESPONSES = {
    # correct [T, T, F, F]: avg 2/4 = 0.5; pass@4 = 1; vote 204×2, 205×1 → label 204 → maj correct.
    "p1": [boxed("204"), boxed("204"), boxed("205"), "I cannot box this."],
    # 12 is accepted through alt_answers; correct [T, F, F, T]: avg 0.5; pass@4 = 1;
    # vote 3×2, 12×1, 10×1 → label 3 → maj wrong.
    "p2": [boxed("12"), boxed("3"), boxed("3"), boxed("10")],
    # correct [F, F, F, F]: avg 0; pass@4 = 0; vote 8×2, 9×1 (None does not vote) → label 8 → wrong.
    "p3": [boxed("8"), boxed("8"), boxed("9"), None],
}


def fixture_records() -> list[dict]:
    return [
        {"benchmark": "aime24", "problem_id": pid, "response": r}
        for pid, responses in RESPONSES.items()
        for r in responses
    ]


@pytest.fixture(scope="module")
def scored():
    return score_completions(fixture_records(), GOLDS)


def test_score_completions_per_problem(scored):
    problems = {p.problem_id: p for p in scored["aime24"]}
    assert problems["p1"].correct == [True, True, False, False]
    assert problems["p1"].extracted == ["204", "204", "205", None]
    assert problems["p2"].correct == [True, False, False, True]
    assert problems["p3"].correct == [False, False, False, False]
    assert [problems[p].maj_correct for p in ("p1", "p2", "p3")] == [True, False, False]
    assert [problems[p].maj_label for p in ("p1", "p2", "p3")] == ["204", "3", "8"]


def test_summary_hand_computed(scored):
    s = summarise(scored, n_boot=200)["aime24"]
    assert s["k"] == 4 and s["n_problems"] == 3 and s["k_protocol"] == 32
    assert s["avg@k"] == pytest.approx(100 * (0.5 + 0.5 + 0) / 3)  # 33.33
    assert s["pass@k"] == pytest.approx(100 * (1 + 1 + 0) / 3)  # 66.67
    assert s["maj@k"] == pytest.approx(100 * (1 + 0 + 0) / 3)  # 33.33
    for metric in ("avg@k", "pass@k", "maj@k"):
        lo, hi = s[metric + "_ci"]
        assert 0 <= lo <= s[metric] <= hi <= 100


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (4, 2, 2, 1 - 1 / 6),  # 1 − C(2,2)/C(4,2) = 1 − 1/6
        (4, 2, 4, 1.0),  # n − c < k: every draw of 4 holds a correct one
        (4, 0, 3, 0.0),  # no correct response
        (5, 1, 1, 0.2),  # k = 1 is c / n
        (10, 3, 5, 1 - 21 / 252),  # 1 − C(7,5)/C(10,5) = 1 − 21/252
    ],
)
def test_pass_at_k(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize("n,c,k", [(4, 5, 1), (4, 1, 0), (4, 1, 5), (3, -1, 1)])
def test_pass_at_k_rejects(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_avg_at_k():
    assert avg_at_k([True, False, False, True, True]) == pytest.approx(3 / 5)
    with pytest.raises(ValueError):
        avg_at_k([])


@pytest.mark.parametrize(
    "answers,golds,expected",
    [
        (["7", "7", "8", "8"], ["7"], False),  # tie at the top → no label → wrong
        ([None, None], ["7"], False),  # nothing answered → no label → wrong
        (["1/2", "0.5", "3"], ["\\frac{1}{2}"], True),  # one cluster of equivalent answers (2 of 3)
        (["12", "12", "3"], ["10", "12"], True),  # label matches an alt answer
    ],
)
def test_maj_at_k(answers, golds, expected):
    assert maj_at_k(answers, golds) is expected


def test_bootstrap_ci_contains_mean_and_is_deterministic():
    scores = [0.0, 1.0] * 50  # mean 0.5
    lo, hi = bootstrap_ci(scores, n_boot=500, seed=0)
    assert 0.0 <= lo < 0.5 < hi <= 1.0
    assert bootstrap_ci(scores, n_boot=500, seed=0) == (lo, hi)
    assert bootstrap_ci([0.25] * 10) == pytest.approx((0.25, 0.25))
    with pytest.raises(ValueError):
        bootstrap_ci([])


def _synthetic(correct_by_bench: dict) -> dict:
    return {
        b: [ProblemScores(f"{b}-0", ["1"], c, ["1"] * len(c), maj_correct=all(c))] for b, c in correct_by_bench.items()
    }


AVG_CASE = {
    "aime24": [True, True],
    "aime25": [False, False],
    "amc": [True, True],
    "math500": [True, True],
    "minerva_math": [True, False],
    "olympiadbench": [False, False],
}


def test_avg_and_ood_avg_from_per_benchmark_numbers():
    s = summarise(_synthetic(AVG_CASE), n_boot=50)
    # avg@k per benchmark: 100, 0, 100, 100, 50, 0.
    assert s["Avg"]["avg@k"] == pytest.approx((100 + 0 + 100 + 100 + 50 + 0) / 6)  # 58.33
    assert s["OOD Avg"]["avg@k"] == pytest.approx((100 + 0 + 100 + 50 + 0) / 5)  # 50.0, no AMC
    assert s["OOD Avg"]["benchmarks"] == ["aime24", "aime25", "math500", "minerva_math", "olympiadbench"]
    # maj@k: 1, 0, 1, 1, 0, 0 → Avg 50, OOD 40.
    assert s["Avg"]["maj@k"] == pytest.approx(50.0) and s["OOD Avg"]["maj@k"] == pytest.approx(40.0)
    missing = summarise(_synthetic({b: AVG_CASE[b] for b in AVG_BENCHMARKS if b != "amc"}), n_boot=50)
    assert missing["Avg"]["avg@k"] is None and missing["OOD Avg"]["avg@k"] == pytest.approx(50.0)


@pytest.mark.parametrize("validation_set,left_out", [("amc", "amc"), ("math500", "math500"), ("aime24", "aime24")])
def test_ood_avg_leaves_out_the_validation_set(validation_set, left_out):
    # avg@k per benchmark (AVG_CASE): aime24 100, aime25 0, amc 100, math500 100, minerva 50, olympiad 0.
    per_bench = {"aime24": 100, "aime25": 0, "amc": 100, "math500": 100, "minerva_math": 50, "olympiadbench": 0}
    s = summarise(_synthetic(AVG_CASE), n_boot=50, validation_set=validation_set)
    others = [b for b in AVG_BENCHMARKS if b != left_out]
    assert s["OOD Avg"]["benchmarks"] == others and s["OOD Avg"]["validation_set"] == validation_set
    # math500: (100 + 0 + 100 + 50 + 0) / 5 = 50.0 (AMC back in); amc: (100 + 0 + 100 + 50 + 0) / 5 = 50.0;
    # aime24: (0 + 100 + 100 + 50 + 0) / 5 = 50.0. The same mean three ways: the members are checked above.
    assert s["OOD Avg"]["avg@k"] == pytest.approx(sum(per_bench[b] for b in others) / 5)
    assert s["Avg"]["avg@k"] == pytest.approx(350 / 6)  # Avg does not depend on it


def test_ood_avg_with_math500_as_validation_set_is_the_mean_of_the_other_five():
    # Unequal numbers, so leaving out MATH-500 and leaving out AMC give different OOD Avgs.
    case = {
        "aime24": [True, False],
        "aime25": [False, False],
        "amc": [True, True],
        "math500": [False, False],
        "minerva_math": [True, True],
        "olympiadbench": [True, False],
    }
    # avg@k: aime24 50, aime25 0, amc 100, math500 0, minerva 100, olympiad 50.
    with_math500 = summarise(_synthetic(case), n_boot=50, validation_set="math500")
    assert with_math500["OOD Avg"]["avg@k"] == pytest.approx((50 + 0 + 100 + 100 + 50) / 5)  # 60.0, AMC in
    default = summarise(_synthetic(case), n_boot=50)
    assert default["OOD Avg"]["avg@k"] == pytest.approx((50 + 0 + 0 + 100 + 50) / 5)  # 40.0, AMC out (paper)
    assert default["OOD Avg"]["validation_set"] == "amc"
    # Every benchmark but the validation set must be there: without AMC, a math500 OOD Avg has no number.
    no_amc = summarise(
        _synthetic({b: case[b] for b in AVG_BENCHMARKS if b != "amc"}), n_boot=50, validation_set="math500"
    )
    assert no_amc["OOD Avg"]["avg@k"] is None and "amc" in no_amc["OOD Avg"]["reason"]


def test_unknown_validation_set_is_an_error():
    with pytest.raises(ValueError, match="unknown validation set 'gsm8k'"):
        summarise(_synthetic(AVG_CASE), n_boot=5, validation_set="gsm8k")


def test_table_notes_name_the_left_out_validation_set():
    paper = {"CPMöbius": {"OOD Avg": 26.8}}
    table = markdown_table(summarise(_synthetic(AVG_CASE), n_boot=5, validation_set="math500"), paper_rows=paper)
    assert (
        "OOD Avg leaves out MATH-500, the validation set that drove Δt in training (--validation-set math500)" in table
    )
    assert "Paper rows' OOD Avg is without AMC" in table and "not here" in table
    # Without paper rows, no comparability note; with the paper's validation set, no note at all.
    bare = markdown_table(summarise(_synthetic(AVG_CASE), n_boot=5, validation_set="math500"))
    assert "OOD Avg leaves out MATH-500" in bare and "Paper rows' OOD Avg" not in bare
    default = markdown_table(summarise(_synthetic(AVG_CASE), n_boot=5), paper_rows=paper)
    assert "OOD Avg leaves out" not in default and "Paper rows' OOD Avg" not in default


def test_markdown_table_column_order():
    table = markdown_table(summarise(_synthetic(AVG_CASE), n_boot=50), paper_row={"AIME24": 10.0, "Avg": 40.5})
    lines = table.splitlines()
    assert (
        lines[0] == "| | AIME24 | AIME25 | AMC | MATH-500 | Minerva | OlympiadBench | Avg | OOD Avg | Avg w/o Minerva |"
    )
    assert lines[2] == "| paper | 10.0 | — | — | — | — | — | 40.5 | — | — |"
    assert lines[3].startswith("| ours avg@k | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 100.0")
    assert lines[3].split(" | ")[7].startswith("58.3 [")
    assert [line.split(" |")[0] for line in lines[3:6]] == ["| ours avg@k", "| ours pass@k", "| ours maj@k"]


def _data_dir(tmp_path: Path) -> Path:
    """../shared/data/eval when present, else a tiny fixture copy of the six benchmarks."""
    real = SHARED_EVAL
    if (real / "aime24" / "aime24.jsonl").exists():
        return real
    root = tmp_path / "data"
    for bench in AVG_BENCHMARKS:
        (root / bench).mkdir(parents=True)
        rows = [{"id": f"{bench}-{i}", "problem": "?", "answer": str(i + 2), "alt_answers": []} for i in range(2)]
        (root / bench / f"{bench}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_cli_writes_results(tmp_path, capsys):
    data_dir = _data_dir(tmp_path)
    lines = []
    for bench in AVG_BENCHMARKS:
        rows = load_benchmark(bench, data_dir)[:2]
        golds = gold_answers(rows)
        # Problem 0: 2 of 2 correct; problem 1: 0 of 2 → avg@2 = 50 for every benchmark.
        for row, verdicts in zip(rows, ([True, True], [False, False])):
            for ok in verdicts:
                answer = golds[row["id"]][0] if ok else "\\text{wrong answer}"
                lines.append({"benchmark": bench, "problem_id": row["id"], "response": boxed(answer)})
    completions = tmp_path / "completions.jsonl"
    completions.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "out"
    # The file covers the first 2 problems of each benchmark: scored as that slice (--limit 2).
    assert (
        main(["--completions", str(completions), "--data-dir", str(data_dir), "--limit", "2", "--out", str(out)]) == 0
    )
    result = json.loads((out / "results.json").read_text())
    for bench in AVG_BENCHMARKS:
        assert result["summary"][bench]["avg@k"] == pytest.approx(50.0)
        assert result["summary"][bench]["k"] == 2
    assert result["summary"]["Avg"]["avg@k"] == pytest.approx(50.0)
    assert result["summary"]["OOD Avg"]["maj@k"] == pytest.approx(50.0)
    table = (out / "results.md").read_text()
    assert table.splitlines()[0].startswith("| | AIME24 | AIME25 | AMC |")
    assert "50.0 [" in table and table == capsys.readouterr().out


def test_unknown_benchmark_name():
    with pytest.raises(ValueError, match="gsm8k"):
        load_benchmark("gsm8k", "/nonexistent")


@pytest.mark.parametrize(
    "line,message",
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"benchmark": "aime24", "response": "x"}', "missing field"),
        ('{"benchmark": "gsm8k", "problem_id": "1", "response": "x"}', "unknown benchmark"),
        ('{"benchmark": "aime24", "problem_id": "1", "response": 5}', "response must be"),
    ],
)
def test_cli_malformed_line(tmp_path, capsys, line, message):
    completions = tmp_path / "bad.jsonl"
    completions.write_text(json.dumps({"benchmark": "aime24", "problem_id": "x", "response": "y"}) + "\n" + line + "\n")
    assert main(["--completions", str(completions), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and f"{completions}:2" in err and "Traceback" not in err


def test_cli_unknown_problem_id_exits_2_without_traceback(tmp_path):
    data_dir = _data_dir(tmp_path)
    completions = tmp_path / "c.jsonl"
    completions.write_text(json.dumps({"benchmark": "aime24", "problem_id": "no-such-id", "response": "x"}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "cpmobius.eval", "--completions", str(completions), "--data-dir", str(data_dir)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "no-such-id" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.skipif(not (SHARED_EVAL / "aime24" / "aime24.jsonl").exists(), reason="needs ../shared/data")
@pytest.mark.parametrize("bench", ["amc", "aime24", "aime25", "math500", "minerva_math", "olympiadbench", "amc23"])
def test_boxed_gold_answers_score_100(bench):
    rows = load_benchmark(bench, SHARED_EVAL)
    records = [{"benchmark": bench, "problem_id": r["id"], "response": boxed(r["answer"])} for r in rows]
    problems = score_completions(records, {bench: gold_answers(rows)})[bench]
    assert [p.problem_id for p in problems if not (p.correct[0] and p.maj_correct)] == []
