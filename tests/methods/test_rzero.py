"""R-Zero as a method of the loop (``method=rzero``, `cpmobius.methods.rzero`): which phase a step is in, the Challenger's
reward and GRPO advantages through its update, the Solver's training set and rollouts, and the schedule's state
across a resume, with hand-computed values on stand-in policies (no Ray, no models). The toy run is in
tests/test_method_runs.py; the settings that refuse a bad value are in tests/methods/test_methods.py."""

from __future__ import annotations

import pytest
from stand_ins import ScriptedPolicy

from cpmobius.clock import OpLog
from cpmobius.config import compose_config
from cpmobius.loop import CoachPlayerLoop
from cpmobius.methods.rzero import CHALLENGER, SOLVER, RZero, RZeroSchedule, rzero_phase
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet


def make_schedule(coach: ScriptedPolicy, player: ScriptedPolicy, *overrides: str) -> RZeroSchedule:
    settings = load_settings(compose_config(["method=rzero", *overrides]))
    options = RZero.read_settings(settings.method.options)
    return RZeroSchedule(settings, options, coach, player, PlayerPrompt(), 0, OpLog(), lambda stage, count: None)


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        # 5 Challenger + 15 Solver steps an iteration (20 steps): step s is offset (s - 1) % 20 of iteration
        # (s - 1) // 20 + 1; offsets 0-4 are Challenger steps 1-5, offsets 5-19 Solver steps 1-15.
        (1, (CHALLENGER, 1, 1)),
        (5, (CHALLENGER, 1, 5)),
        (6, (SOLVER, 1, 1)),
        (20, (SOLVER, 1, 15)),
        (21, (CHALLENGER, 2, 1)),
        (26, (SOLVER, 2, 1)),
        (60, (SOLVER, 3, 15)),
    ],
)
def test_the_phase_of_a_step_is_five_challenger_steps_then_fifteen_solver_steps(step, expected):
    assert rzero_phase(step, 5, 15) == expected


def test_the_phase_with_one_step_each_alternates_and_refuses_step_zero():
    assert [rzero_phase(s, 1, 1)[0] for s in range(1, 5)] == [CHALLENGER, SOLVER, CHALLENGER, SOLVER]
    assert [rzero_phase(s, 0, 2)[:2] for s in (1, 2, 3)] == [(SOLVER, 1), (SOLVER, 1), (SOLVER, 2)]
    with pytest.raises(ValueError):
        rzero_phase(0, 5, 15)


# The Challenger's outputs of one prompt (method.challenger_n=4) in R-Zero's format: two well formed, one with
# no <question> block and one whose block is empty (both malformed). The questions share no 4-gram, so each is
# a BLEU cluster of its own: every penalty is 1/4.
CHALLENGER_OUTPUTS = [
    "<question>\nWhat is 2 + 3?\n</question>\n\\boxed{5}",
    "Here is a hard question: what is 7 * 8?",
    "<question>\nCompute the sum of the first three odd primes.\n</question>\n\\boxed{15}",
    "<question>   </question>\\boxed{1}",
]
VOTES = {
    # 7 of 10 Player samples say 5: p = 0.7, min(p, 1 - p) = 0.3
    "What is 2 + 3?": ["\\boxed{5}"] * 7 + ["\\boxed{6}"] * 3,
    # 10 of 10 say 15: p = 1, min(p, 1 - p) = 0
    "Compute the sum of the first three odd primes.": ["\\boxed{15}"] * 10,
}


def test_a_challenger_step_rewards_uncertainty_minus_repetition_and_minus_one_for_a_malformed_output():
    coach = ScriptedPolicy(lambda prompt, i: CHALLENGER_OUTPUTS)
    player = ScriptedPolicy(lambda question, i: VOTES[question])
    schedule = make_schedule(coach, player, "method.challenger_format=tags", "method.challenger_prompts=1")
    kept, metrics = schedule.collect(step=1)
    assert len(kept) == 0 and player.updated is None  # nothing for the Player in a Challenger step
    assert coach.updated is None  # the Challenger trains in the loop's Coach update, after validation
    metrics.update(schedule.update_challenger())
    assert schedule.update_challenger() == {}  # one update per Challenger step
    assert coach.generated[0][1] == 4 and coach.generated[0][0][0].startswith("Generate one new, challenging")
    assert player.generated == [(list(VOTES), 10)]  # only the well-formed questions are voted on, 10 times each
    rewards = [0.3 - 0.25, -1.0 - 0.25, 0.0 - 0.25, -1.0 - 0.25]  # uncertainty (or -1) minus the 1/4 penalty
    assert metrics["coach/reward_mean"] == pytest.approx(sum(rewards) / 4)  # -0.675
    assert metrics["rzero/phase"] == 0.0 and metrics["coach/valid_frac"] == 0.5 and metrics["coach/updated"] == 1.0
    # one GRPO group: (r - mean) / (std + 1e-6), std unbiased (3 degrees of freedom)
    mean = sum(rewards) / 4
    std = (sum((r - mean) ** 2 for r in rewards) / 3) ** 0.5
    advantages = coach.updated.batch["advantages"][:, -1].tolist()
    assert advantages == pytest.approx([(r - mean) / (std + 1e-6) for r in rewards], abs=1e-5)


def test_the_paper_uncertainty_doubles_the_code_term():
    coach = ScriptedPolicy(lambda prompt, i: CHALLENGER_OUTPUTS)
    player = ScriptedPolicy(lambda question, i: VOTES[question])
    overrides = ("method.challenger_format=tags", "method.challenger_prompts=1", "method.uncertainty=paper")
    _, metrics = make_schedule(coach, player, *overrides).collect(step=1)
    # 1 - 2|0.7 - 0.5| = 0.6 instead of 0.3; the rest as under "code"
    assert metrics["coach/reward_mean"] == pytest.approx((0.6 - 0.25 - 1.25 - 0.25 - 1.25) / 4)


# The Solver phase's questions (plain format: the Coach's whole response) and the Player's 9 votes on each.
SOLVER_VOTES = {
    "What is 1 + 1?": ["\\boxed{2}"] * 5 + ["\\boxed{3}"] * 4,  # 5/9 = 0.56: kept, label 2
    "What is 2 + 2?": ["\\boxed{4}"] * 9,  # 9/9 = 1.0: above the band
    "What is 3 + 3?": ["no box"] * 5 + ["\\boxed{6}"] * 4,  # no box is the answer "None": 5/9, but no label
    "What is 4 + 4?": ["\\boxed{8}"] * 3 + ["\\boxed{7}"] * 2 + ["\\boxed{9}"] * 2 + ["\\boxed{1}"] * 2,  # 3/9: kept
}


def test_a_solver_phase_keeps_the_questions_in_the_band_and_trains_on_their_majority_answer():
    questions = list(SOLVER_VOTES)
    coach = ScriptedPolicy(lambda prompt, i: [questions[i]])
    # votes (9 a question) first, then the training rollouts (5 a question): two agree with the label 2
    rollouts = {"What is 1 + 1?": ["\\boxed{2}", "\\boxed{3}", "\\boxed{2}", "x", "\\boxed{5}"]}
    rollouts["What is 4 + 4?"] = ["\\boxed{8}"] * 5
    player = ScriptedPolicy(lambda q, i: SOLVER_VOTES[q] if len(player.generated) == 1 else rollouts[q])
    schedule = make_schedule(coach, player, "method.solver_questions=4", "method.challenger_steps=1")
    kept, metrics = schedule.collect(step=2)  # step 2 = the first Solver step of iteration 1
    assert metrics["rzero/phase"] == 1.0 and metrics["rzero/solver_written"] == 4.0
    # 1 + 1: 5 of 9 = 0.56 in [0.3, 0.8]; 2 + 2: 1.0, too easy; 3 + 3: "None" (5 of 9) is never a label;
    # 4 + 4: 3 of 9 = 0.33, kept
    assert schedule.pool["questions"] == ["What is 1 + 1?", "What is 4 + 4?"]
    assert schedule.pool["labels"] == ["2", "8"] and metrics["rzero/solver_kept"] == 2.0
    by_question = {p.text: o for p, o in zip(kept.problems, kept.outcomes)}
    assert by_question["What is 1 + 1?"].agrees == [True, False, True, False, False]
    assert by_question["What is 4 + 4?"].agrees == [True] * 5 and kept.coach_batch is None
    assert metrics["rzero/reward_mean"] == pytest.approx(7 / 10) and len(kept.player_batch) == 10


def test_the_schedule_after_a_resume_holds_the_same_solver_set_and_draws_the_same_questions():
    questions = list(SOLVER_VOTES)
    player = ScriptedPolicy(lambda q, i: SOLVER_VOTES[q])
    schedule = make_schedule(ScriptedPolicy(lambda prompt, i: [questions[i]]), player, "method.solver_questions=4")
    schedule.build_solver_set(iteration=1)
    saved = schedule.state_dict()
    resumed = make_schedule(
        ScriptedPolicy(lambda prompt, i: []), ScriptedPolicy(lambda q, i: []), "method.solver_questions=4"
    )
    assert resumed.state_dict() != saved  # a fresh schedule has no set yet
    resumed.load_state_dict(saved)
    assert resumed.state_dict() == saved and resumed.pool["iteration"] == 1
    assert [resumed.draw(step) for step in range(6, 21)] == [schedule.draw(step) for step in range(6, 21)]


def test_the_loop_trains_the_player_on_solver_steps_only_and_never_gives_the_coach_a_delta_t_reward(tmp_path):
    questions = list(SOLVER_VOTES)
    player = ScriptedPolicy(lambda q, i: SOLVER_VOTES[q][:5] if len(player.generated) > 1 else SOLVER_VOTES[q])
    coach = ScriptedPolicy(lambda prompt, i: [questions[i]])
    cfg = compose_config([f"trainer.default_local_dir={tmp_path}", "method=rzero", "method.solver_questions=4"])
    val_set = ValidationSet("v", ["0"], ["What is 1 + 1?"], ["2"])
    loop = CoachPlayerLoop(cfg, load_settings(cfg), coach, player, val_set=val_set)
    assert isinstance(loop.filter, RZeroSchedule)
    kept, _ = loop.filter.collect(step=6)
    metrics = loop.update_player(kept)
    assert player.updated is not None and 0.0 <= metrics["player/reward_mean"] <= 1.0
    assert loop.update_coach(kept, 0.1) == {} and coach.updated is None  # no Coach rows: no Δt reward
