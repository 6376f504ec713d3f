"""A sampled validation's own noise: the standard error of an avg@k accuracy from its samples, Δt's from the two
passes it subtracts, the SNR the run logs and prints, and the preset that gives the toy world the paper's validation
noise (``experiment=toy_paper_noise``: 83 problems x 10 samples at the Player's temperature). Fast, no Ray."""

from __future__ import annotations

import numpy as np
import pytest
from stand_ins import FAST_TOY, ScriptedPolicy

from cpmobius.config import compose_config
from cpmobius.engine.config import policy_config
from cpmobius.methods import table_columns
from cpmobius.metrics import delta_t_noise_metrics
from cpmobius.settings import ValidationSettings, load_settings
from cpmobius.validation import DeltaTracker, ValidationSet, measure_accuracy, sampling_standard_error


def test_the_standard_error_of_an_avg_at_k_is_computed_from_its_samples():
    # sum p(1-p) = 0.25 + 0 + 0 + 0.21 = 0.46; / (k - 1) = 0.46 / 9 = 0.05111; sqrt = 0.226078; / 4 problems = 0.056519
    assert sampling_standard_error([0.5, 0.0, 1.0, 0.3], k=10) == pytest.approx(0.056519, abs=1e-6)
    assert sampling_standard_error([0.5] * 83, k=10) == pytest.approx(0.018294, abs=1e-6)  # sqrt(83 x 0.25 / 9) / 83
    assert sampling_standard_error([0.0, 1.0], k=10) == 0.0  # every sample agrees: no sampling noise
    assert sampling_standard_error([1.0, 0.0], k=1) is None  # one sample per problem: no estimate


def test_the_standard_error_matches_the_spread_of_repeated_passes():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0.0, 1.0, size=83)  # each problem's probability of a correct sample
    passes = rng.binomial(10, truth, size=(4000, 83)) / 10  # 4000 validation passes of 83 problems x 10 samples
    spread = passes.mean(axis=1).std()  # the SD of the accuracy over passes: what Δt's noise is made of
    estimates = [sampling_standard_error(list(p), k=10) for p in passes[:400]]
    assert np.mean(estimates) == pytest.approx(spread, rel=0.05)


def test_delta_t_carries_the_standard_error_of_the_two_passes_and_keeps_it_across_a_resume():
    tracker = DeltaTracker()
    tracker.start(0.40, se=0.03)
    assert tracker.update(0.45, se=0.04) == pytest.approx(0.05)
    assert tracker.delta_se == pytest.approx(0.05)  # sqrt(0.03^2 + 0.04^2)
    metrics = delta_t_noise_metrics(0.05, 0.04, tracker.delta_se)
    assert metrics == {"val/accuracy_se": 0.04, "val/delta_t_se": pytest.approx(0.05), "val/delta_t_snr": 1.0}
    resumed = DeltaTracker()
    resumed.load_state_dict(tracker.state_dict())
    resumed.update(0.44, se=0.03)
    assert resumed.delta_se == pytest.approx(0.05)  # the reference's SE (0.04) came back with the checkpoint
    old = {"ema_decay": None, "reference": 0.4, "history": [0.4]}  # a checkpoint from before the SE was kept
    resumed.load_state_dict(old)
    resumed.update(0.5, se=0.03)
    assert resumed.delta_se is None and delta_t_noise_metrics(0.1, 0.03, None) == {"val/accuracy_se": 0.03}
    smoothed = DeltaTracker(ema_decay=0.9)
    smoothed.start(0.4, se=0.03)
    smoothed.update(0.5, se=0.03)
    assert smoothed.delta_se is None  # an EMA's noise is not two passes' noise: not reported
    assert delta_t_noise_metrics(0.0, None, None) == {}  # a greedy or expected pass


def sampled_player(correct: list[int]) -> ScriptedPolicy:
    """Problem i's k samples: the first ``correct[i]`` answer 1 (right), the others 2."""
    return ScriptedPolicy(lambda question, i: [f"\\boxed{{{1 if j < correct[i] else 2}}}" for j in range(10)])


def test_a_sampled_pass_reports_its_standard_error_and_a_greedy_pass_none():
    val = ValidationSet("v", ["a", "b"], ["q1?", "q2?"], ["1", "1"])
    sampled = measure_accuracy(sampled_player([5, 10]), val, ValidationSettings(samples_per_problem=10, greedy=False))
    # shares 0.5 and 1.0: accuracy 0.75; SE = sqrt((0.25 + 0) / 9) / 2 = 0.08333
    assert sampled.accuracy == pytest.approx(0.75) and sampled.accuracy_se == pytest.approx(0.083333, abs=1e-6)
    greedy = measure_accuracy(sampled_player([1, 0]), val, ValidationSettings(samples_per_problem=1, greedy=True))
    assert greedy.accuracy == pytest.approx(0.5) and greedy.accuracy_se is None


def test_the_paper_noise_preset_samples_83_problems_10_times_at_the_players_temperature():
    cfg = compose_config(["experiment=toy_paper_noise"])
    validation = load_settings(cfg).validation
    assert (validation.dataset, validation.size, validation.samples_per_problem) == ("toy", 83, 10)
    assert not validation.greedy and validation.metric == "greedy"  # the decoded (sampled) pass feeds Δt
    rollout = policy_config(cfg, "player").actor_rollout_ref.rollout
    assert rollout.val_kwargs.do_sample and rollout.val_kwargs.temperature == rollout.temperature == 0.6
    assert cfg.trainer.experiment_name == "toy_paper_noise"
    assert load_settings(compose_config()).validation.metric == "expected"  # the default keeps its noise-free Δt


def test_the_step_table_shows_the_snr_after_delta_t_for_every_method():
    labels = [label for _, _, label in table_columns("cpmobius", levels=True, snr=True)]
    assert labels[:4] == ["step", "val_acc", "delta_t", "snr"]
    assert [label for _, _, label in table_columns("rent", snr=True)][:3] == ["step", "val_acc", "snr"]
    assert "snr" not in [label for _, _, label in table_columns("cpmobius", greedy_beside=True, levels=True)]


@pytest.mark.slow
def test_the_paper_noise_preset_runs_a_step_with_its_snr_and_the_ood_set_through_verl(tmp_path, model_cache):
    """``experiment=toy_paper_noise`` end to end, shrunk (the quick toy world, no warm-up, 10 validation problems x
    4 samples, 12 out-of-distribution ones, m = 2, n = 4, one step): the sampled passes' standard errors, Δt's SNR
    and the out-of-distribution set's sampled accuracy reach the metrics file and the step table."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "run"
    command = [
        *(sys.executable, "-m", "cpmobius.main", "experiment=toy_paper_noise"),
        *(f"model.cache_dir={model_cache / 'fast_toy'}", f"trainer.default_local_dir={out}"),
        f"hydra.run.dir={out / 'hydra'}",
        # The quick toy world on this CPU's own kernels, as the in-process loop tests and the bench test run it:
        # their cached models serve (a launched run holds the portable kernels otherwise, and pretrains anew).
        *FAST_TOY,
        "backend.portable_kernels=false",
        *("validation.size=10", "validation.samples_per_problem=4"),
        *("validation.ood_dataset=toy_ood", "validation.ood_size=12", "filter.quota=2", "player.n=4"),
        "trainer.total_training_steps=1",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    header = next(line.split() for line in done.stdout.splitlines() if line.split()[:2] == ["step", "val_acc"])
    assert header[:5] == ["step", "val_acc", "ood", "delta_t", "snr"] and "greedy" not in header
    by_step = {row["step"]: row["data"] for row in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())}
    for step in (0, 1):
        data = by_step[step]
        assert data["val/accuracy"] * 40 == pytest.approx(round(data["val/accuracy"] * 40))  # 10 problems x 4 samples
        assert data["val/ood_accuracy"] * 48 == pytest.approx(round(data["val/ood_accuracy"] * 48))  # sampled too
        assert 0.0 <= data["val/accuracy_se"] <= 0.5 / 3**0.5 / 10**0.5 + 1e-9  # at most sqrt(10 x 0.25 / 3) / 10
    se = (by_step[0]["val/accuracy_se"] ** 2 + by_step[1]["val/accuracy_se"] ** 2) ** 0.5
    if se > 0:
        assert by_step[1]["val/delta_t_se"] == pytest.approx(se)
        assert by_step[1]["val/delta_t_snr"] == pytest.approx(abs(by_step[1]["val/delta_t"]) / se)
