"""The toy world's pieces (task, pretraining targets, Coach corpora, warm-up data), the
``pseudo_label/kept_accuracy`` metric, the training-dynamics plot and the toy-learning benchmark's
summary; all fast, no Ray, no models."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from cpmobius.coach import find_problem_fault
from cpmobius.metrics import pseudo_label_metrics
from cpmobius.plots import PANELS, plot_training_dynamics, read_run_metrics, series
from cpmobius.prompts import coach_prompt
from cpmobius.settings import CoachSettings
from cpmobius.toy import cache as tc
from cpmobius.toy import world as tw

INSTRUCTION = CoachSettings().instruction


@pytest.mark.parametrize(
    "argv",
    [
        [
            "--variants",
            "full",
            "filter.band_low=0.1",
            "--seeds",
            "7",
        ],  # the README's order: overrides after a list option
        ["filter.band_low=0.1", "--seeds", "7", "--variants", "full"],
    ],
)
def test_benchmark_passes_overrides_given_anywhere_to_every_run(tmp_path, load_script, monkeypatch, argv):
    bench = load_script("benchmarks/bench_toy_learning.py")
    calls = []
    monkeypatch.setattr(bench, "prepare_seed", lambda seed, extra: calls.append(("prepare", seed, extra)))
    monkeypatch.setattr(
        bench, "run_one", lambda out, variant, seed, extra, *_: calls.append((variant, seed, extra)) or (out, 0.0)
    )
    bench.main([*argv, "--out", str(tmp_path)])
    assert calls == [("prepare", 7, ["filter.band_low=0.1"]), ("full", 7, ["filter.band_low=0.1"])]


@pytest.mark.parametrize("difficulty", range(tw.LEVELS))
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
    assert all(
        user == INSTRUCTION and find_problem_fault(text, False, settings) is None
        for user, text in (problems(rng) for _ in range(50))
    )
    with pytest.raises(ValueError, match="coach_corpus"):
        tw.coach_sampler(INSTRUCTION, "novel")


def test_toy_warmup_data_uses_the_coach_prompt_of_the_loop_and_is_cached(tmp_path):
    import pandas as pd

    path = tc.write_coach_warmup_data(tmp_path / "warm.parquet", INSTRUCTION, count=32, seed=3)
    rows = pd.read_parquet(path)["messages"].tolist()
    assert len(rows) == 32
    for messages in rows:
        user, assistant = list(messages)
        assert [dict(user)] == coach_prompt(INSTRUCTION)  # the SFT prompt is the RL prompt
        assert assistant["role"] == "assistant" and tw.solve(assistant["content"]) is not None
    mtime = path.stat().st_mtime_ns
    assert tc.write_coach_warmup_data(path, INSTRUCTION, count=32, seed=3).stat().st_mtime_ns == mtime
    tc.write_coach_warmup_data(path, INSTRUCTION, count=16, seed=3)
    assert len(pd.read_parquet(path)) == 16  # another spec rewrites the file


def _outcome(label, kept):
    return SimpleNamespace(pseudo_label=label, kept=kept)


def test_kept_accuracy_counts_only_the_problems_the_step_trains_on():
    outcomes = [
        _outcome("3", True),
        _outcome("4", True),
        _outcome("5", False),
        _outcome(None, False),
        _outcome("6", True),
    ]
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
            data.update(
                {
                    "val/delta_t": 0.01,
                    "filter/kept_frac": 0.5,
                    "filter/kept": 8 if step % 2 else 6,
                    "filter/quota_met": float(step % 2),
                    "filter/pass_rate_mean": 0.4,
                    "filter/kept_pass_rate_mean": 0.5,
                    "pseudo_label/accuracy": 0.8,
                    "pseudo_label/kept_accuracy": 0.8,
                    "coach/valid_frac": 1.0,
                    "coach/problem_chars/mean": 15.0,
                    "player/response_length/mean": 12.0,
                    "coach/difficulty_mean": 0.4 + 0.1 * step,
                    "filter/kept_difficulty_mean": 1.0 + 0.1 * step,
                }
            )
            data["coach/difficulty/other"] = 0.05 * step
        data.update({f"val/accuracy/d{level}": min(1.0, 0.1 * step / (level + 1)) for level in range(3)})
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
    assert {
        "val/accuracy",
        "val/delta_t",
        "filter/kept_frac",
        "coach/problem_chars/mean",
        "player/response_length/mean",
        "val/accuracy/d*",
        "coach/difficulty_mean",
        "filter/kept_difficulty_mean",
    } <= logged


def test_a_redrawn_plot_keeps_the_title_of_the_run(tmp_path):
    from omegaconf import OmegaConf

    from cpmobius.config import compose_config
    from cpmobius.plots import run_title, saved_run_title

    assert saved_run_title(tmp_path) is None  # no checkpoint yet: the plot names the folder
    cfg = compose_config(["trainer.experiment_name=seed3"])
    for step, name in ((2, "older"), (10, "seed3")):  # the newest checkpoint's config wins (10 > 2, not by text)
        (tmp_path / f"global_step_{step}").mkdir()
        OmegaConf.save(
            OmegaConf.merge(cfg, {"trainer": {"experiment_name": name}}),
            tmp_path / f"global_step_{step}" / "config.yaml",
        )
    assert saved_run_title(tmp_path) == run_title(cfg) == f"CPMöbius: seed3 ({cfg.model.name})"
    (tmp_path / "global_step_10" / "config.yaml").write_text("trainer: [not, a, mapping]\n")
    assert saved_run_title(tmp_path) == f"CPMöbius: older ({cfg.model.name})"


def test_plot_without_metrics_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        plot_training_dynamics(tmp_path)


def test_benchmark_summary_and_table(tmp_path, load_script):
    bench = load_script("benchmarks/bench_toy_learning.py")
    _write_metrics(tmp_path / "metrics.jsonl", _toy_rows(range(0, 11)))
    row = bench.summarize_run(tmp_path)
    # start 0.20, end 0.30; last three 0.28, 0.29, 0.30 -> mean 0.29; peak 0.30
    assert row["gain"] == pytest.approx(0.10) and row["gain_last3"] == pytest.approx(0.09) and row["steps"] == 10
    assert row["peak"] == pytest.approx(0.30) and row["kept_label_ok_last5"] == pytest.approx(0.8)
    assert row["coach_level_first3"] == pytest.approx(0.6) and row["coach_level_last3"] == pytest.approx(1.3)
    assert row["coach_other_first3"] == pytest.approx(0.10) and row["coach_other_last3"] == pytest.approx(0.45)
    assert not bench.acceptance(row)  # +0.09 < +0.25
    assert bench.acceptance({**row, "start": 0.0})
    # paired by seed: full gains 0.09, 0.14; variant gains 0.09 - 0.05, 0.14 - 0.03 -> differences 0.05, 0.03
    full = [{**row, "seed": 0}, {**row, "seed": 1, "gain_last3": 0.14}]
    variant = [{**row, "seed": 0, "gain_last3": 0.04}, {**row, "seed": 1, "gain_last3": 0.11}]
    table = bench.format_table({"full": full, "no_filter": variant, "no_warmup": []})
    # gain 0.115 ± sd(0.09, 0.14)/sqrt 2 = 0.0354/1.414 = 0.025; difference 0.04 ± 0.01, t = 4 on 1 degree of
    # freedom (a Cauchy variable): two-sided p = 1 - 2 atan(4) / pi = 0.156
    assert "| full | 2 |" in table and "+0.115 ± 0.025" in table
    assert "+0.040 ± 0.010, t(1) = +4.00, p = 0.156, full ahead 2/2" in table
    # steps 1-10 keep 8, 6, 8, ...: 7.0 a step, 5 of 10 steps at the quota
    assert table.splitlines()[2].endswith("| 7.0 (0.50) |")
    assert "no_warmup" not in table
    off = bench.format_off_levels(
        {"full": full, "no_filter": [{**variant[0], "coach_other_last3": 0.9}], "no_warmup": []}
    )
    assert off.splitlines() == [
        "full: Coach problems outside the levels 0.10 → 0.45 (first 3 → last 3 steps)",
        "no_filter: Coach problems outside the levels 0.10 → 0.90 (first 3 → last 3 steps)",
    ]


def test_the_constant_and_noise_arms_take_the_full_arms_delta_t_and_run_after_it(tmp_path, load_script, monkeypatch):
    """docs/toy.md's measurement: the constant is the full arm's mean Δt over every step and seed, the noise SD
    its standard deviation, so the full arm runs first; a value given on the command line wins."""
    bench = load_script("benchmarks/bench_toy_learning.py")
    delta_t = {10: [0.01, 0.03], 11: [0.02, 0.06]}  # mean 0.03; SD sqrt((4 + 0 + 1 + 9) e-4 / 3) = 0.0216025
    calls = []

    def run_one(out, variant, seed, extra, *_):
        calls.append((variant, seed, extra))
        if variant == "full":
            (out / f"full_seed{seed}").mkdir(parents=True)
            rows = [(0, {"val/accuracy": 0.2})] + [
                (step, {"val/accuracy": 0.2, "val/delta_t": d}) for step, d in enumerate(delta_t[seed], 1)
            ]
            _write_metrics(out / f"full_seed{seed}" / "metrics.jsonl", rows)
        return out, 0.0

    monkeypatch.setattr(bench, "prepare_seed", lambda seed, extra: None)
    monkeypatch.setattr(bench, "run_one", run_one)
    with pytest.raises(FileNotFoundError, match="--variants full"):
        bench.main(["--variants", "delta_t_constant", "--seeds", "10", "--out", str(tmp_path)])
    bench.main(
        ["--variants", "delta_t_constant", "delta_t_noise", "full", "--seeds", "10", "11", "--out", str(tmp_path)]
    )
    assert [c[:2] for c in calls] == [
        ("full", 10), ("full", 11), ("delta_t_constant", 10), ("delta_t_constant", 11),
        ("delta_t_noise", 10), ("delta_t_noise", 11),
    ]  # fmt: skip
    assert calls[2][2] == ["coach.delta_t_constant=0.03"] and calls[4][2] == ["coach.delta_t_noise_sd=0.0216025"]
    given = ["coach.delta_t_constant=0.5"]
    assert bench.arm_overrides("delta_t_constant", tmp_path, [10, 11], given) == given
    assert bench.arm_overrides("delta_t_shuffled", tmp_path, [10], []) == []


def test_a_finished_run_is_archived_and_a_fresh_machine_restores_it_instead_of_running_it(
    tmp_path, load_script, monkeypatch
):
    """A measurement spanning several machines: each finished run's metrics go to the archive, and a run found
    there is restored into an empty --out and not run again; an unfinished run is neither archived nor skipped."""
    bench = load_script("benchmarks/bench_toy_learning.py")
    launched = []

    def fake_driver(command, cwd, stdout, stderr):
        run_dir = Path(next(a for a in command if a.startswith("trainer.default_local_dir=")).split("=", 1)[1])
        launched.append(run_dir.name)
        steps = 3 if "seed=1" in command else 2  # seed 2's run stops short of the 3 steps
        _write_metrics(run_dir / "metrics.jsonl", _toy_rows(range(0, steps + 1)))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bench.subprocess, "run", fake_driver)
    archive, first, second = tmp_path / "archive", tmp_path / "machine1", tmp_path / "machine2"
    bench.run_one(first, "full", 1, [], 3, archive)
    bench.run_one(first, "full", 2, [], 3, archive)
    assert launched == ["full_seed1", "full_seed2"]
    assert sorted(p.name for p in archive.iterdir()) == ["full_seed1.jsonl.gz"]  # only the finished one
    _, wall_s = bench.run_one(second, "full", 1, [], 3, archive)
    assert wall_s == 0.0 and launched == ["full_seed1", "full_seed2"]  # restored, not run
    restored, original = (json.dumps(bench.summarize_run(d / "full_seed1")) for d in (second, first))
    assert restored == original  # NaN (a metric the toy rows lack) is equal to itself in JSON
    bench.run_one(second, "full", 2, [], 3, archive)
    assert launched[-1] == "full_seed2"  # not in the archive: run
    assert not bench.restore_run(second / "full_seed1", archive)  # metrics of its own are never overwritten


def test_benchmark_details_give_the_greedy_and_per_level_gains_paired_by_seed(tmp_path, load_script):
    bench = load_script("benchmarks/bench_toy_learning.py")
    _write_metrics(tmp_path / "metrics.jsonl", _toy_rows(range(0, 11)))
    row = bench.summarize_run(tmp_path)
    assert math.isnan(row["greedy_gain_last3"]) and math.isnan(row["level3_gain_last3"])  # not logged there
    # level 1: 0.05 a step; the last three steps 0.40, 0.45, 0.50 -> 0.45 over step 0's 0.0
    assert row["level1_gain_last3"] == pytest.approx(0.45) and row["level0_gain_last3"] == pytest.approx(0.9)
    full = [{**row, "seed": 0, "greedy_gain_last3": 0.10}, {**row, "seed": 1, "greedy_gain_last3": 0.20}]
    frozen = [{**row, "seed": 0, "greedy_gain_last3": 0.05}, {**row, "seed": 1, "greedy_gain_last3": 0.05}]
    lines = bench.format_details({"full": full, "no_coach_update": frozen}).splitlines()
    # full 0.15 ± 0.05; frozen 0.05 ± 0; paired differences 0.05 and 0.15 -> 0.10 ± 0.05; levels 3, 4 never logged
    full_cells = [cell.strip() for cell in lines[2].split("|")[1:-1]]
    frozen_cells = [cell.strip() for cell in lines[3].split("|")[1:-1]]
    assert full_cells[:3] == ["full", "+0.150 ± 0.050", "—"] and full_cells[4] == "+0.450 ± 0.000"  # no ood logged
    assert frozen_cells[:2] == ["no_coach_update", "+0.050 ± 0.000 (full − it +0.100 ± 0.050)"]
    assert full_cells[-2:] == frozen_cells[-2:] == ["—", "—"]


@pytest.mark.parametrize("difficulty", range(tw.LEVELS))
def test_problem_difficulty_reads_back_the_level_of_a_generated_problem(difficulty):
    rng = random.Random(10 + difficulty)
    for _ in range(100):
        problem = tw.make_problem(rng, difficulty)
        assert tw.problem_difficulty(problem.text) == difficulty
        assert problem.text.count("(") == difficulty  # the level is the nesting depth


@pytest.mark.parametrize(
    "text",
    [
        "What is 12 * 3?",
        "What is ((3 + 4)?",
        "What is (3 + 4) * 2?",
        "What is 3 + 4 + 5?",
        "What is (((((1 + 1)))))?",
        "3 + 4",
        "What is 3 / 4?",
    ],
)
def test_problem_difficulty_is_none_outside_the_toy_levels(text):
    assert tw.problem_difficulty(text) is None


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("What is ((3 - 8))?", "-5"),
        ("What is (2 + 3) * 4?", "20"),
        ("What is (3 +) 4?", None),
        ("What is (3)(4)?", None),
        ("What is ((3 + 4)?", None),
    ],
)
def test_solve_reads_parentheses(text, answer):
    assert tw.solve(text) == answer


def test_natural_levels_fall_off_and_validation_covers_every_level_equally():
    rng = random.Random(2)
    counts = Counter(tw.make_problem(rng).difficulty for _ in range(5000))
    # weights 0.3**d: level 0 about 70 %, level 1 about 21 %, level 2 about 6 %
    assert 0.66 < counts[0] / 5000 < 0.74 and 0.18 < counts[1] / 5000 < 0.24 and counts[2] > counts[3] > counts[4]
    levels = Counter(p.difficulty for p in tw.validation_problems(64, 1234))
    assert sorted(levels) == list(range(tw.LEVELS)) and max(levels.values()) - min(levels.values()) <= 1


def test_unboxed_share_grows_with_the_level():
    # odds 0.4/0.6 = 2/3 at level 0, times 2 per level: 2/3, 4/3, 8/3 -> shares 0.4, 4/7, 8/11
    assert [round(tw.unboxed_share(d, 0.4, 2.0), 4) for d in range(3)] == [0.4, round(4 / 7, 4), round(8 / 11, 4)]
    assert tw.unboxed_share(3, 0.0, 2.0) == 0.0 and tw.unboxed_share(3, 0.4) == pytest.approx(0.4)
    sample = tw.player_sampler(0.0, 0.4, 2.0)
    rng = random.Random(3)
    by_level = {}
    for _ in range(4000):
        text, target = sample(rng)
        by_level.setdefault(tw.problem_difficulty(text), []).append("boxed" not in target)
    assert sorted(by_level) == list(range(tw.LEVELS))  # the Player learns every level equally often
    shares = [sum(v) / len(v) for _, v in sorted(by_level.items())]
    assert shares == sorted(shares) and abs(shares[0] - 0.4) < 0.06 and abs(shares[2] - 8 / 11) < 0.06


def test_unboxed_shares_can_be_given_per_level_and_a_listed_spec_is_a_cache_hit(tmp_path):
    shares = [0.3, 0.55, 0.62, 0.7, 0.78]
    assert [tw.unboxed_share(d, shares) for d in range(tw.LEVELS)] == shares
    spec = tw.PretrainSpec(player_unboxed=shares)  # a list, as Hydra hands it over
    assert spec.player_unboxed == tuple(shares) and hash(spec)
    record = tc._toy_record(INSTRUCTION, None, spec)
    for name in ("coach", "player"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cpmobius_toy.json").write_text(json.dumps(record))
    # the marker file reads back lists: the same spec must still find its folders
    assert tc.toy_models_cached(tmp_path / "coach", tmp_path / "player", INSTRUCTION, pretrain_spec=spec)
    assert not tc.toy_models_cached(
        tmp_path / "coach",
        tmp_path / "player",
        INSTRUCTION,
        pretrain_spec=tw.PretrainSpec(player_unboxed=[0.3, 0.55, 0.62, 0.7, 0.8]),
    )
    sample = tw.player_sampler(0.0, spec.player_unboxed)
    rng = random.Random(4)
    by_level = {}
    for _ in range(5000):
        text, target = sample(rng)
        by_level.setdefault(tw.problem_difficulty(text), []).append("boxed" not in target)
    assert all(abs(sum(v) / len(v) - shares[d]) < 0.06 for d, v in by_level.items())  # ~1000 draws: sd 0.016


@pytest.mark.parametrize("shares", [[0.3, 0.5], [0.3, 0.5, 0.6, 0.7, 1.0]])
def test_per_level_unboxed_shares_need_one_share_below_one_per_level(shares):
    with pytest.raises(ValueError, match="player_unboxed"):
        tw.PretrainSpec(player_unboxed=shares)


def test_cache_record_holds_the_seed_and_the_code_version(tmp_path):
    spec = tw.PretrainSpec(seed=5)
    record = tc._toy_record(INSTRUCTION, None, spec)
    assert record["pretrain"]["seed"] == 5 and record["code"] == tc.code_version() and len(record["code"]) == 16
    for name in ("coach", "player"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cpmobius_toy.json").write_text(json.dumps(record))
    paths = (tmp_path / "coach", tmp_path / "player", INSTRUCTION)
    assert tc.toy_models_cached(*paths, pretrain_spec=spec)
    assert not tc.toy_models_cached(*paths, pretrain_spec=tw.PretrainSpec(seed=6))  # another seed, other weights
    (tmp_path / "player" / "cpmobius_toy.json").write_text(json.dumps({**record, "code": "0" * 16}))
    assert not tc.toy_models_cached(*paths, pretrain_spec=spec)  # weights of older code are never reused


def test_code_version_ignores_docstrings_and_comments_but_not_code():
    source = 'def f():\n    """Doc."""\n    return 1  # one\n'
    assert tc.source_digest(source) == tc.source_digest('def f():\n    """Other doc."""\n    return 1\n')
    assert tc.source_digest(source) != tc.source_digest('def f():\n    """Doc."""\n    return 2\n')
    assert tc.source_digest('"""Module."""\n') == tc.source_digest("")


def test_one_seed_key_drives_pretraining_warmup_data_sampling_and_the_cache_folders():
    from cpmobius.config import compose_config

    cfg = compose_config(["seed=5"])
    assert cfg.model.pretrain.seed == 5 and cfg.model.toy_warmup.seed == 5
    assert cfg.actor_rollout_ref.rollout.seed == 5 and cfg.actor_rollout_ref.actor.data_loader_seed == 5
    assert cfg.model.coach_path.endswith("seed5/tiny-coach") and cfg.model.player_path.endswith("seed5/tiny-player")
    assert "seed5" in cfg.model.toy_warmup.path
    assert cfg.validation.seed == compose_config(["seed=6"]).validation.seed  # the same problems for every seed


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


def test_world_problems_only_rejects_text_the_toy_world_cannot_read():
    from cpmobius.coach import Problem, reject_off_world

    texts = ["What is ((3 + 4))?", "What is 3 + * 4?", "What is (2 + 3) * 4?", "What is 7 - 2?", ""]
    problems = [Problem(text=t, coach_row=i, reject_reason=None if t else "empty") for i, t in enumerate(texts)]
    assert reject_off_world(problems, tw.problem_difficulty) == 2
    # a levelled problem passes, malformed and unlevelled text is off the world, an earlier rejection is kept
    assert [p.reject_reason for p in problems] == [None, "off_world", "off_world", None, "empty"]
    with pytest.raises(ValueError, match="world_problems_only"):
        reject_off_world(problems, None)


def test_world_problems_only_needs_the_toy_world():
    from cpmobius.config import ConfigError, compose_config
    from cpmobius.settings import load_settings

    assert load_settings(compose_config(["coach.world_problems_only=true"])).coach.world_problems_only
    with pytest.raises(ConfigError, match=r"coach\.world_problems_only"):
        load_settings(
            compose_config(["coach.world_problems_only=true", "validation.dataset=amc", "validation.metric=greedy"])
        )


def test_pretrain_trains_on_the_tokenized_pairs_padded_with_the_loss_on_the_answer_only():
    """`pretrain` tokenizes each distinct pair once and pads the batch in one go: the same weights as a
    step written out pair by pair (`_chat_ids` per row, answer tokens labelled, padding masked)."""
    import torch

    from cpmobius.toy.tiny_models import build_char_tokenizer, build_tiny_qwen2

    tokenizer = build_char_tokenizer()
    sample = tw.player_sampler(0.2, (0.3, 0.6, 0.64, 0.68, 0.72), 1.0)
    spec = tw.PretrainSpec(batch_size=8, lr=3e-3, seed=5)
    model = build_tiny_qwen2(tokenizer, seed=1)
    reference = build_tiny_qwen2(tokenizer, seed=1)
    losses = tw.pretrain(model, tokenizer, sample, 3, spec)

    rng, optimizer = random.Random(spec.seed), torch.optim.AdamW(reference.parameters(), lr=spec.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: min(1.0, (i + 1) / 50) * max(0.1, 1 - i / 3))
    reference.train()
    for step in range(3):
        batch = [tw._chat_ids(tokenizer, *sample(rng)) for _ in range(spec.batch_size)]
        width = max(len(ids) for ids, _ in batch)
        assert len({len(ids) for ids, _ in batch}) > 1  # the batch needs padding
        input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (ids, start) in enumerate(batch):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            labels[row, start : len(ids)] = torch.tensor(ids[start:])
            attention[row, : len(ids)] = 1
        loss = reference(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        assert loss.item() == losses[step]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    for trained, expected in zip(model.state_dict().values(), reference.state_dict().values()):
        assert torch.equal(trained, expected)
