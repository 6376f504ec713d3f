"""The toy world's pieces (task, pretraining targets, Coach corpora, warm-up data), the
``pseudo_label/kept_accuracy`` metric, the training-dynamics plot and the toy-learning benchmark's
summary; all fast, no Ray, no models."""

from __future__ import annotations

import importlib.util
import json
import random
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from cpmobius.coach import find_problem_fault
from cpmobius.metrics import pseudo_label_metrics
from cpmobius.plots import PANELS, plot_training_dynamics, read_run_metrics, series
from cpmobius.prompts import coach_prompt
from cpmobius.settings import CoachSettings
from cpmobius.toy import world as tw

REPO = Path(__file__).resolve().parents[1]
INSTRUCTION = CoachSettings().instruction


@pytest.mark.parametrize("difficulty", [0, 1, 2, 3])
def test_problems_of_each_difficulty_are_solved_by_the_ground_truth(difficulty):
    rng = random.Random(difficulty)
    for _ in range(200):
        problem = tw.make_problem(rng, difficulty)
        assert problem.difficulty == difficulty
        assert tw.solve(problem.text) == problem.answer  # the truth the loop logs against
        assert find_problem_fault(problem.text, truncated=False, settings=CoachSettings()) is None


def test_player_targets_carry_slips_and_unboxed_answers_in_the_asked_shares():
    rng = random.Random(0)
    problems = [tw.make_problem(rng) for _ in range(4000)]
    clean = [tw.noisy_player_target(p, rng, noise=0.0, unboxed=0.0) for p in problems]
    assert clean == [f"\\boxed{{{p.answer}}}" for p in problems]
    mixed = [tw.noisy_player_target(p, rng, noise=0.0, unboxed=0.5) for p in problems]
    unboxed = [t for t in mixed if "boxed" not in t]
    assert 0.45 < len(unboxed) / len(mixed) < 0.55  # 4000 draws: sd of the share is 0.008
    assert all(re.fullmatch(r"The answer is -?\d+\.", t) for t in unboxed)
    slipped = [tw.noisy_player_target(p, rng, noise=1.0) for p in problems]
    offsets = Counter(int(t[len("\\boxed{") : -1]) - int(p.answer) for t, p in zip(slipped, problems))
    assert set(offsets) == set(tw.SLIPS)


def test_generic_coach_corpus_holds_one_well_formed_form_and_never_the_instruction():
    rng = random.Random(1)
    settings = CoachSettings()
    sample = tw.coach_sampler(INSTRUCTION, "generic")
    pairs = [sample(rng) for _ in range(400)]
    assert all(user in tw.GENERIC_PROMPTS and user != INSTRUCTION for user, _ in pairs)
    faults = Counter(find_problem_fault(text, truncated=False, settings=settings) for _, text in pairs)
    # four forms drawn uniformly: the question passes, the equation, bare expression and statement do not
    assert 0.15 < faults[None] / len(pairs) < 0.35 and set(faults) == {None, "no_question"}
    problems = tw.coach_sampler(INSTRUCTION, "problems")
    assert all(user == INSTRUCTION and find_problem_fault(text, False, settings) is None
               for user, text in (problems(rng) for _ in range(50)))
    with pytest.raises(ValueError, match="coach_corpus"):
        tw.coach_sampler(INSTRUCTION, "novel")


def test_toy_warmup_data_uses_the_coach_prompt_of_the_loop_and_is_cached(tmp_path):
    import pandas as pd

    path = tw.write_coach_warmup_data(tmp_path / "warm.parquet", INSTRUCTION, count=32, seed=3)
    rows = pd.read_parquet(path)["messages"].tolist()
    assert len(rows) == 32
    for messages in rows:
        user, assistant = list(messages)
        assert [dict(user)] == coach_prompt(INSTRUCTION)  # the SFT prompt is the RL prompt (issue 6)
        assert assistant["role"] == "assistant" and tw.solve(assistant["content"]) is not None
    mtime = path.stat().st_mtime_ns
    assert tw.write_coach_warmup_data(path, INSTRUCTION, count=32, seed=3).stat().st_mtime_ns == mtime
    tw.write_coach_warmup_data(path, INSTRUCTION, count=16, seed=3)
    assert len(pd.read_parquet(path)) == 16  # another spec rewrites the file


def _outcome(label, kept):
    return SimpleNamespace(pseudo_label=label, kept=kept)


def test_kept_accuracy_counts_only_the_problems_the_step_trains_on():
    outcomes = [_outcome("3", True), _outcome("4", True), _outcome("5", False), _outcome(None, False), _outcome("6", True)]
    label_correct = [True, False, True, None, True]
    # trained on: groups 0, 1 and (say) 4 -> 2 right of 3; all labelled groups with a truth: 3 right of 4
    result = pseudo_label_metrics(outcomes, label_correct, kept_correct=[True, False, True])
    assert result == {"pseudo_label/accuracy": 0.75, "pseudo_label/kept_accuracy": pytest.approx(2 / 3)}
    # a truth unknown for every kept problem: no kept accuracy rather than a made-up 0
    assert pseudo_label_metrics(outcomes, label_correct, kept_correct=[None]) == {"pseudo_label/accuracy": 0.75}
    assert pseudo_label_metrics(outcomes, [None] * 5, kept_correct=[]) == {}


def _write_metrics(path: Path, rows: list[tuple[int, dict]]) -> None:
    path.write_text("".join(json.dumps({"step": step, "data": data}) + "\n" for step, data in rows))


def _toy_rows(steps: range, offset: float = 0.0) -> list[tuple[int, dict]]:
    rows = []
    for step in steps:
        data = {"val/accuracy": 0.2 + 0.01 * step + offset}
        if step:
            data.update({"val/delta_t": 0.01, "filter/kept_frac": 0.5, "filter/pass_rate_mean": 0.4,
                         "filter/kept_pass_rate_mean": 0.5, "pseudo_label/accuracy": 0.8, "coach/valid_frac": 1.0,
                         "coach/problem_chars/mean": 15.0, "player/response_length/mean": 12.0})
        rows.append((step, data))
    return rows


def test_run_metrics_merge_launches_and_the_plot_is_written(tmp_path):
    _write_metrics(tmp_path / "metrics.1.jsonl", _toy_rows(range(0, 4)))
    _write_metrics(tmp_path / "metrics.jsonl", _toy_rows(range(3, 7), offset=0.5))  # step 3 logged again
    steps = read_run_metrics(tmp_path)
    assert sorted(steps) == list(range(7))
    xs, ys = series(steps, "val/accuracy")
    assert xs == list(range(7)) and ys[3] == pytest.approx(0.73) and ys[2] == pytest.approx(0.22)
    assert series(steps, "val/delta_t")[0] == list(range(1, 7))  # step 0 has no Δt
    out = plot_training_dynamics(tmp_path)
    assert out == tmp_path / "training_dynamics.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    logged = {key for keys, _, _ in PANELS for key in keys}
    assert {"val/accuracy", "val/delta_t", "filter/kept_frac", "coach/problem_chars/mean",
            "player/response_length/mean"} <= logged


def test_plot_without_metrics_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        plot_training_dynamics(tmp_path)


def test_benchmark_summary_and_table(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_toy_learning", REPO / "benchmarks" / "bench_toy_learning.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    _write_metrics(tmp_path / "metrics.jsonl", _toy_rows(range(0, 11)))
    row = bench.summarize_run(tmp_path)
    # start 0.20, end 0.30; last three 0.28, 0.29, 0.30 -> mean 0.29
    assert row["gain"] == pytest.approx(0.10) and row["gain_last3"] == pytest.approx(0.09) and row["steps"] == 10
    table = bench.format_table({"full": [row, {**row, "gain": 0.14}], "no_filter": []})
    assert "| full | 2 |" in table and "+0.120 ± 0.028" in table and "no_filter" not in table


@pytest.mark.parametrize("difficulty", [0, 1, 2, 3])
def test_problem_difficulty_reads_back_the_level_of_a_generated_problem(difficulty):
    rng = random.Random(10 + difficulty)
    for _ in range(200):
        problem = tw.make_problem(rng, difficulty)
        # level 1 may draw "+", which reads as level 0 (one-digit sums count as 0)
        assert tw.problem_difficulty(problem.text) == (0 if difficulty == 1 and "+" in problem.text else difficulty)


@pytest.mark.parametrize("text", ["What is 12 * 3?", "What is 05 + 3?", "12 + 3", "What is 3 * 4 * 5?", "What is 123 + 4?"])
def test_problem_difficulty_is_none_outside_the_toy_levels(text):
    assert tw.problem_difficulty(text) is None


def test_difficulty_metrics_count_shares_and_wrong_labels_per_level():
    from cpmobius.metrics import accuracy_by_level, difficulty_metrics

    # candidates: levels 0, 0, 1, 3, other; kept: 0 (right), 1 (wrong), 3 (unknown truth)
    result = difficulty_metrics([0, 0, 1, 3, None], [0, 1, 3], [True, False, None])
    assert result["coach/difficulty/d0"] == 0.4 and result["coach/difficulty/other"] == 0.2
    assert result["coach/difficulty_mean"] == 1.0  # (0 + 0 + 1 + 3) / 4
    assert result["filter/kept_difficulty/d1"] == pytest.approx(1 / 3)
    assert result["filter/kept_difficulty_mean"] == pytest.approx(4 / 3)
    assert result["pseudo_label/kept_wrong/d0"] == 0.0 and result["pseudo_label/kept_wrong/d1"] == 1.0
    assert "pseudo_label/kept_wrong/d3" not in result  # no truth, no made-up share
    assert difficulty_metrics([], [], []) == {}
    assert accuracy_by_level([0, 1, 1, None], [1.0, 0.0, 1.0, 1.0]) == {"val/accuracy/d0": 1.0, "val/accuracy/d1": 0.5}
