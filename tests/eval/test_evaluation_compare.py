"""Base vs trained: scoring two models' completions side by side with a paired difference
(`python -m cpmobius.eval --completions BASE.jsonl TRAINED.jsonl`, `cpmobius.eval.summary.paired_difference`)."""

from __future__ import annotations

import json
import random

import pytest

from cpmobius.eval.cli import main
from cpmobius.eval.summary import bootstrap_ci, paired_difference
from cpmobius.jsonl import write_jsonl

BENCHES = ("aime24", "aime25", "amc", "math500", "minerva_math", "olympiadbench")


def _problems(per_problem: list[list[bool]], bench: str = "math500") -> dict:
    return {bench: [{"problem_id": f"{bench}-{i}", "correct": c} for i, c in enumerate(per_problem)]}


def test_paired_interval_sees_a_uniform_gain_that_separate_intervals_miss():
    # 12 problems of very different difficulty; the trained model answers one more of 8 on each.
    rng = random.Random(0)
    base = [[j < n for j in range(8)] for n in (rng.randrange(8) for _ in range(12))]
    trained = [[j < sum(c) + 1 for j in range(8)] for c in base]
    diff = paired_difference(_problems(base), _problems(trained), validation_set="math500")["math500"]
    assert diff["avg@k"] == pytest.approx(12.5)
    assert diff["avg@k_ci"] == pytest.approx([12.5, 12.5])  # every problem gained exactly 1/8
    # Separate intervals overlap: comparing them would call this gain noise.
    base_hi = bootstrap_ci([sum(c) / 8 for c in base])[1]
    trained_lo = bootstrap_ci([sum(c) / 8 for c in trained])[0]
    assert trained_lo < base_hi


def test_paired_difference_is_the_difference_of_means_with_a_sign():
    a = _problems([[True, False], [True, True], [False, False]])
    b = _problems([[False, False], [True, False], [False, False]])
    diff = paired_difference(a, b, validation_set="math500")["math500"]
    assert diff["avg@k"] == pytest.approx(100 * ((0 - 0.5) + (0.5 - 1) + 0) / 3)
    lo, hi = diff["avg@k_ci"]
    assert lo <= diff["avg@k"] <= hi <= 0


def test_paired_difference_refuses_different_problems():
    a = _problems([[True], [False]])
    b = {"math500": [{"problem_id": "math500-0", "correct": [True]}, {"problem_id": "math500-7", "correct": [True]}]}
    with pytest.raises(ValueError, match="different problems.*math500-1"):
        paired_difference(a, b)


def test_averages_need_every_member_in_both_runs():
    diff = paired_difference(_problems([[True]]), _problems([[False]]))
    assert diff["Avg"]["avg@k"] is None and "aime24" in diff["Avg"]["reason"]


def _run_files(tmp_path, benchmark_dir):
    """Two models' completions on all six benchmarks (2 problems each, gold "7"): the base answers
    problem 0 once in 2 everywhere; the trained model answers it twice, and on MATH-500 problem 1 too."""
    data = benchmark_dir({b: ["7", "7"] for b in BENCHES})
    files = {}
    for label in ("base", "trained"):
        recs = []
        for b in BENCHES:
            for pid in (f"{b}-0", f"{b}-1"):
                right = {"base": {f"{b}-0": 1}, "trained": {f"{b}-0": 2, "math500-1": 2}}[label].get(pid, 0)
                recs += [
                    {
                        "benchmark": b,
                        "problem_id": pid,
                        "sample": j,
                        "model": label,
                        "response": "\\boxed{7}" if j < right else "\\boxed{3}",
                    }
                    for j in range(2)
                ]
        (tmp_path / label).mkdir()
        files[label] = write_jsonl(tmp_path / label / "completions.jsonl", recs)
    return data, files


def test_cli_compares_two_models_side_by_side(tmp_path, benchmark_dir):
    data, files = _run_files(tmp_path, benchmark_dir)
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "--completions",
                str(files["base"]),
                str(files["trained"]),
                "--data-dir",
                str(data),
                "--out",
                str(out),
                "--validation-set",
                "math500",
                "--no-grader-report",
                "--bootstrap",
                "200",
            ]
        )
        == 0
    )
    table = (out / "results.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert {"base avg@k", "trained avg@k", "trained − base"} <= set(rows)
    cells = [c.strip() for c in rows["trained − base"].split("|")[2:-1]]
    assert cells[0].startswith("+25.0")  # AIME24: 25 % → 50 %
    assert cells[3].startswith("+75.0")  # MATH-500: 25 % → 100 %
    assert "paired 95% bootstrap CI" in table
    summary = json.loads((out / "results.json").read_text())
    diff = summary["differences"]["trained − base"]
    assert diff["OOD Avg"]["validation_set"] == "math500"
    assert diff["OOD Avg"]["avg@k"] == pytest.approx(25.0)  # MATH-500 left out: +25 on the other five
    assert diff["Avg"]["avg@k"] == pytest.approx((5 * 25 + 75) / 6)
    assert diff["Avg w/o Minerva"]["avg@k"] == pytest.approx((4 * 25 + 75) / 5)  # +25 on Minerva left out
    assert cells[8].startswith("+35.0")  # the same cell in the table's last column
    for label in ("base", "trained"):  # each model's own table in its folder
        assert json.loads((out / label / "results.json").read_text())["summary"]["math500"]["n_problems"] == 2


def test_cli_comparison_refuses_mismatched_problems(tmp_path, capsys, benchmark_dir):
    data, files = _run_files(tmp_path, benchmark_dir)
    lines = files["trained"].read_text().splitlines()
    files["trained"].write_text("\n".join(line for line in lines if "math500-1" not in line) + "\n")
    assert (
        main(
            [
                "--completions",
                str(files["base"]),
                str(files["trained"]),
                "--data-dir",
                str(data),
                "--out",
                str(tmp_path / "cmp"),
                "--no-grader-report",
                "--allow-partial",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "different problems" in err and "Traceback" not in err


def test_gzipped_completions_score_as_the_plain_file(tmp_path, benchmark_dir):
    import gzip

    data, files = _run_files(tmp_path, benchmark_dir)
    gz = tmp_path / "trained" / "completions.jsonl.gz"
    gz.write_bytes(gzip.compress(files["trained"].read_bytes()))
    argv = ["--data-dir", str(data), "--no-grader-report", "--bootstrap", "50"]
    assert main(["--completions", str(files["trained"]), "--out", str(tmp_path / "plain")] + argv) == 0
    assert main(["--completions", str(gz), "--out", str(tmp_path / "gz")] + argv) == 0
    plain, packed = (json.loads((tmp_path / d / "results.json").read_text())["summary"] for d in ("plain", "gz"))
    assert packed == plain
    gz.write_bytes(gz.read_bytes()[:-20])  # cut off
    assert main(["--completions", str(gz), "--out", str(tmp_path / "cut")] + argv) == 2
