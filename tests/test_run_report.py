"""python -m cpmobius.run_report: a run folder as Markdown tables (hand-written run, known values)."""

from __future__ import annotations

import json

from cpmobius import run_report


def write_run(root):
    rows = [
        {"step": 0, "data": {"val/accuracy": 0.25, "timing_s/validation": 3.0}},
        {
            "step": 1,
            "data": {
                "val/accuracy": 0.5,
                "val/delta_t": 0.25,
                "filter/kept": 1,
                "filter/quota": 2,
                "filter/attempts": 3,
                "coach/valid_frac": 0.5,
                "coach/rejected/chatter": 2,
                "coach/rejected/refusal": 1,
                "coach/rejected/empty": 0,
                "timing_s/step": 9.5,
            },
        },
        {"step": 1, "data": {"val/accuracy": 0.375, "val/delta_t": 0.125}},  # a resumed run logs step 1 again
    ]
    (root / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (root / "problems").mkdir()
    archive = [
        {
            "step": 1,
            "text": "What is 2 | 3?",
            "valid": True,
            "kept": True,
            "pass_rate": 0.5,
            "pseudo_label": "5",
            "pseudo_label_correct": True,
        },
        {"step": 1, "text": "Sure!", "valid": False, "reject_reason": "chatter", "kept": False},
        {"step": 1, "text": "I'm sorry", "valid": False, "reject_reason": "refusal", "kept": False},
        {"step": 1, "text": "Hi", "valid": False, "reject_reason": "chatter", "kept": False},
    ]
    (root / "problems" / "step_000001.jsonl").write_text("\n".join(json.dumps(r) for r in archive) + "\n")


def test_the_report_holds_the_runs_numbers(tmp_path):
    write_run(tmp_path)
    text = run_report.render(tmp_path, problems=3)
    step_rows = [line for line in text.splitlines() if line.startswith("| 0 |") or line.startswith("| 1 |")]
    assert step_rows[0].split(" | ")[1] == "0.250"
    cells = step_rows[1].split(" | ")
    assert cells[1:7] == ["0.375", "+12.5", "1/2", "3", "0.50", "chatter 2, refusal 1"]  # the last row of step 1 wins
    assert "| chatter | 2 | 50.0% |" in text and "| valid | 1 | 25.0% |" in text
    assert "| 1 | What is 2 \\| 3? | 0.50 | 5 | yes |" in text


def test_cli_writes_the_file_and_a_missing_run_is_one_line_exit_2(tmp_path, capsys):
    write_run(tmp_path)
    assert run_report.main([str(tmp_path), "--out", str(tmp_path / "r.md")]) == 0
    assert (tmp_path / "r.md").read_text() == run_report.render(tmp_path)
    assert run_report.main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_resumed_run_reports_the_steps_of_its_earlier_launches(tmp_path):
    # main.py moves a launch's metrics.jsonl to metrics.<k>.jsonl before the resumed launch logs its own.
    write_run(tmp_path)
    (tmp_path / "metrics.jsonl").rename(tmp_path / "metrics.1.jsonl")
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 2, "data": {"val/accuracy": 0.625}}) + "\n")
    steps = run_report.read_metrics(tmp_path)
    assert list(steps) == [0, 1, 2] and steps[1]["val/accuracy"] == 0.375 and steps[2]["val/accuracy"] == 0.625
    rows = [
        line.split(" | ")[1]
        for line in run_report.render(tmp_path).splitlines()
        if line[:4] in ("| 0 ", "| 1 ", "| 2 ")
    ]
    assert rows[:3] == ["0.250", "0.375", "0.625"]


def test_the_gpu_memory_column_appears_only_when_a_step_used_a_gpu(tmp_path):
    write_run(tmp_path)
    assert "GPU GiB" not in run_report.render(tmp_path)  # none logged
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 2, "data": {"player/actor/perf/max_memory_allocated_gb": 0.0}}) + "\n")
    assert "GPU GiB" not in run_report.render(tmp_path)  # verl's 0 on the CPU
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 3, "data": {"player/actor/perf/max_memory_allocated_gb": 12.34}}) + "\n")
    table = run_report.step_table(run_report.read_metrics(tmp_path))
    assert table.splitlines()[0].endswith("| GPU GiB |") and table.splitlines()[-1].endswith("| 12.3 |")


def test_an_expected_accuracy_run_shows_the_greedy_pass_and_the_problem_levels(tmp_path):
    write_run(tmp_path)
    extra = {"val/accuracy_greedy": 0.625, "coach/difficulty_mean": 0.75, "filter/kept_difficulty_mean": 1.5}
    with (tmp_path / "metrics.jsonl").open("a") as handle:
        handle.write(json.dumps({"step": 1, "data": extra}) + "\n")
    lines = run_report.render(tmp_path).splitlines()
    head = next(line for line in lines if line.startswith("| step |")).split(" | ")
    assert head[1:8] == ["val acc", "val greedy", "Δt (pts)", "kept", "attempts", "Coach level", "kept level"]
    cells = next(line for line in lines if line.startswith("| 1 |")).split(" | ")
    assert cells[1:8] == ["0.375", "0.625", "+12.5", "1/2", "3", "0.75", "1.50"]
    # without those keys the columns are left out (the test above reads the plain layout)
