"""``coach.delta_t_source``: the ablations of the Δt in the Coach's reward (`cpmobius.rewards.coach_delta_t`),
through the loop's real `update_coach`, `fit`, `save` and `try_resume` with a scripted Coach that records the
advantages it is updated with (no Ray, no model), and the config checks."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from stand_ins import ScriptedPolicy
from verl import DataProto

from cpmobius.coach import Problem
from cpmobius.config import ConfigError, compose_config
from cpmobius.difficulty_filter import GroupOutcome
from cpmobius.engine.sharing import EngineGuard
from cpmobius.loop import CoachPlayerLoop
from cpmobius.loop_state import KeptProblems
from cpmobius.methods import check_settings
from cpmobius.rewards import coach_delta_t
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet

N = 2  # rollouts per problem
PASS_RATES = (0.5, 0.75)
MEASURED = {1: 0.05, 2: 0.04, 3: 0.03, 4: 0.02, 5: 0.01, 6: 0.015}  # Δt measured at step t


class RecordingPolicy(ScriptedPolicy):
    """The shared stand-in, every answer ``\\boxed{1}`` (validation all correct), sharing one engine guard with the
    other policy; an update records its advantages (R_i of each Coach row)."""

    def __init__(self, guard: EngineGuard) -> None:
        super().__init__(lambda prompt, i: ["\\boxed{1}"] * 64)
        self.guard = guard
        self.updates: list[list[float]] = []

    def update(self, batch) -> dict:
        self.updates.append(batch.batch["advantages"][:, 0].tolist())
        return super().update(batch)

    def save(self, path: str) -> None:
        Path(path).mkdir(parents=True)
        super().save(path)


def kept_problems() -> KeptProblems:
    """Two kept problems with pass rates `PASS_RATES`: their groups' rollouts and one Coach row each."""
    outcomes = [GroupOutcome("1", rate, [True] * N, [False] * N, True, None) for rate in PASS_RATES]
    player = DataProto.from_dict(tensors={"advantages": torch.zeros(2 * N, 3), "response_mask": torch.ones(2 * N, 3)})
    coach = DataProto.from_dict(tensors={"response_mask": torch.ones(2, 4)}, meta_info={"temperature": 1.0})
    return KeptProblems([Problem("q1", 0), Problem("q2", 1)], outcomes, player, coach)


def make_loop(run_dir: Path, total_steps: int, coach: dict) -> tuple[CoachPlayerLoop, list[dict]]:
    """The loop with scripted policies; each step appends the scripted measured Δt (as `validate` does) and
    runs the real `update_coach`. Returns the loop and the metrics of each step it runs."""
    cfg = OmegaConf.create(
        {
            "seed": 3,
            "trainer": {"default_local_dir": str(run_dir), "total_training_steps": total_steps, "save_freq": 1},
        }
    )
    cfg.trainer.resume_mode = "auto"
    settings = load_settings(
        OmegaConf.create({"coach": coach, "validation": {}, "player": {"n": N, "answer_format": "template"}})
    )
    guard = EngineGuard()
    loop = CoachPlayerLoop(cfg, settings, RecordingPolicy(guard), RecordingPolicy(guard), val_set=VAL_SET)
    logged: list[dict] = []

    def scripted_step() -> dict:
        measured = MEASURED[loop.state.step + 1]
        loop.state.delta_t_history.append(measured)
        metrics = loop.update_coach(kept_problems(), measured)
        logged.append(metrics)
        return metrics

    loop.step = scripted_step
    loop._log = lambda data, step: None
    return loop, logged


VAL_SET = ValidationSet("v", ["0"], ["q?"], ["1"])


def test_the_constant_source_gives_the_coach_reward_computed_from_the_constant(tmp_path):
    loop, logged = make_loop(tmp_path / "constant", 2, {"delta_t_source": "constant", "delta_t_constant": 0.02})
    loop.fit()
    # paper reward R_i = pass_rate_i x 100 x 0.02: 0.5 x 2 = 1.0, 0.75 x 2 = 1.5 on both steps (measured: 0.05, 0.04)
    assert loop.coach.updates == [[1.0, 1.5], [1.0, 1.5]]
    assert [m["coach/delta_t"] for m in logged] == [0.02, 0.02] and "coach/delta_t_step" not in logged[0]
    measured, logged = make_loop(tmp_path / "measured", 2, {})
    measured.fit()
    # the method: 0.5 x 5 = 2.5, 0.75 x 5 = 3.75, then 0.5 x 4 = 2.0, 0.75 x 4 = 3.0; no ablation key logged
    assert measured.coach.updates == [pytest.approx([2.5, 3.75]), pytest.approx([2.0, 3.0])]
    assert "coach/delta_t" not in logged[0] and logged[0]["coach/updated"] == 1.0


def test_the_noise_source_draws_zero_mean_gaussians_of_the_given_sd_whatever_was_measured():
    draws = [coach_delta_t("noise", 0.05, [0.05] * t, seed=0, noise_sd=0.01)[0] for t in range(4000)]
    # 4000 draws of N(0, 0.01^2): the mean's SE is 0.00016, the SD's about 0.00011
    assert abs(statistics.fmean(draws)) < 0.0007 and 0.0095 < statistics.stdev(draws) < 0.0105
    assert coach_delta_t("noise", -0.3, [0.1] * 5, seed=0, noise_sd=0.01) == (draws[5], None)  # (seed, step) alone
    assert coach_delta_t("noise", 0.05, [0.05] * 5, seed=1, noise_sd=0.01)[0] != draws[5]


def test_the_shuffled_source_pays_each_step_with_an_earlier_steps_delta_t_drawn_uniformly():
    history = [0.01 * (k + 1) for k in range(6)]  # distinct values: Δt of step k is 0.01 k
    assert coach_delta_t("shuffled", 0.07, [], seed=0) == (0.0, None)  # step 1: no earlier step, no update
    for t in range(2, 7):
        earlier = history[: t - 1]
        steps = [coach_delta_t("shuffled", 0.99, earlier, seed=seed)[1] for seed in range(3000)]
        values = [coach_delta_t("shuffled", 0.99, earlier, seed=seed)[0] for seed in range(30)]
        assert set(values) <= set(earlier)  # never the step's own Δt (0.99), always one measured before it
        counts = [steps.count(j) for j in range(1, t)]
        # uniform over 1 … t-1: each count is 3000 / (t-1) (at least 600) within 6 binomial SDs
        expected = 3000 / (t - 1)
        assert all(abs(c - expected) < 6 * (expected * (1 - 1 / (t - 1))) ** 0.5 + 1 for c in counts), counts
        assert sum(counts) == 3000


def test_the_shuffled_draws_after_a_kill_and_a_resume_are_an_uninterrupted_runs(tmp_path):
    shuffled = {"delta_t_source": "shuffled"}
    straight, straight_logged = make_loop(tmp_path / "straight", 6, shuffled)
    straight.fit()
    drawn = [m.get("coach/delta_t_step") for m in straight_logged]
    assert drawn[0] is None and straight_logged[0]["coach/updated"] == 0.0  # step 1: nothing earlier
    assert all(1 <= s < t for t, s in enumerate(drawn, start=1) if s is not None) and len(set(drawn[1:])) > 1
    # every reward the Coach got is pass_rate x 100 x the measured Δt of the step drawn
    expected = [[r * 100 * MEASURED[int(s)] for r in PASS_RATES] for s in drawn[1:]]
    assert straight.coach.updates == [pytest.approx(e) for e in expected]
    first, _ = make_loop(tmp_path / "killed", 3, shuffled)
    first.fit()  # steps 1-3 and their checkpoints; then a new process resumes from step 3
    resumed, resumed_logged = make_loop(tmp_path / "killed", 6, shuffled)
    resumed.fit()
    assert resumed.state.delta_t_history == [MEASURED[t] for t in range(1, 7)]
    assert [m["coach/delta_t"] for m in resumed_logged] == [m["coach/delta_t"] for m in straight_logged[3:]]
    assert resumed.coach.updates == straight.coach.updates[-3:]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["coach.delta_t_source=shuffle"], r"coach.delta_t_source: must be one of"),
        (["coach.delta_t_source=constant"], r"coach.delta_t_constant: set it exactly when .*=constant"),
        (
            ["coach.delta_t_constant=0.02"],
            r"coach.delta_t_constant: set it exactly when .*got delta_t_source='measured'",
        ),
        (["coach.delta_t_source=noise", "coach.delta_t_noise_sd=0"], r"coach.delta_t_noise_sd: must be > 0"),
        (["coach.delta_t_source=constant", "coach.delta_t_constant=0.0"], r"0 never updates the Coach"),
        (["coach.delta_t_source=noise", "coach.delta_t_noise_sd=abc"], r"coach.delta_t_noise_sd: expected Optional"),
        (["coach.delta_t_source=shuffled", "coach.update=false"], r"needs method=cpmobius and coach.update=true"),
        (["coach.delta_t_source=shuffled", "method=rent"], r"got method=rent"),
    ],
)
def test_bad_delta_t_sources_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_settings(load_settings(compose_config(overrides)))  # the last two are the method's checks


def test_each_source_with_its_parameter_is_accepted():
    for overrides in (
        ["coach.delta_t_source=constant", "coach.delta_t_constant=-0.01"],
        ["coach.delta_t_source=noise", "coach.delta_t_noise_sd=0.02"],
        ["coach.delta_t_source=shuffled"],
    ):
        assert load_settings(compose_config(overrides)).coach.delta_t_source == overrides[0].split("=")[1]
