"""Public bug-report cases (sections C, D, F and cases of the same kinds) against the loop's pure stages.

Pure and fast: no Ray, no verl workers, no models. Policies are fakes with save/load/generate.
A test marked ``regression("...")`` asserts behaviour that an earlier version got wrong;
the reason names the fault it had.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from stand_ins import ScriptedPolicy, not_sampled

from cpmobius import checkpoint
from cpmobius.coach import Problem, find_problem_fault
from cpmobius.config import ConfigError
from cpmobius.difficulty_filter import assign_pseudo_labels, decide, roll_out_and_filter
from cpmobius.duplicates import mark_duplicates
from cpmobius.prompts import PlayerPrompt, player_prompt
from cpmobius.rewards import coach_advantages, coach_rewards, grpo_advantages, player_token_rewards
from cpmobius.settings import CoachSettings, FilterSettings, ValidationSettings, load_settings
from cpmobius.toy.world import solve
from cpmobius.validation import DeltaTracker, ValidationSet, load_validation_set, measure_accuracy


def bug(reason: str):
    """Marks a regression test: ``reason`` is the bug this input exposed before it was fixed."""
    return pytest.mark.regression(reason)


def boxed(answers):
    return [f"so \\boxed{{{a}}}" if a is not None else "I give up" for a in answers]


# =========================================================================== F. Coach validator (answer leaks)

LEGIT = [
    "How many answers does the equation $x^2 = 4$ have?",
    "Solve for x: 2x + 3 = 7.",
    "$x^2=4$, find x.",
    "Show that the sum of two odd integers is even.",
    "Find the sum of all solutions of $x^2 - 5x + 6 = 0$.",
    "How many solutions does $\\sin x = 0$ have on $[0, 2\\pi]$?",
    "Let $a_1 = 1$ and $a_{n+1} = 2a_n$. Find $a_{10}$.",
    "A solution of salt water is 10% salt. How much water must be added to 5 L of it to make it 5% salt?",
]


@pytest.mark.parametrize("text", LEGIT)
def test_legit_problems_are_accepted(text):
    assert find_problem_fault(text, False, CoachSettings()) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "A number is doubled and the result is 14. What is the number?",
            marks=bug("coach._LEAK matches 'the result is' inside an ordinary word problem"),
        ),
        pytest.param(
            "Each correct answer = 4 points and each wrong answer = -1 point. Ana answered 10 "
            "questions and scored 30. How many did she get right?",
            marks=bug("coach._LEAK matches 'answer =' used as a scoring rule"),
        ),
        pytest.param(
            "A chemist has a 20% acid solution: 3 liters. How many liters of pure acid must be added to get 50%?",
            marks=bug("coach._LEAK matches 'solution:' (a chemical solution)"),
        ),
        pytest.param(
            "What is 2+2? Please put your final answer within \\boxed{}.",
            marks=bug("coach._LEAK matches any '\\boxed', even the empty format instruction"),
        ),
        pytest.param(
            "The answer is a positive integer. Find n such that n^2 = 49.",
            marks=bug("coach._LEAK matches 'the answer is' stating a property, not a value"),
        ),
        pytest.param(
            "Factor $x^2 - 5x + 6$.", marks=bug("coach._QUESTION_WORDS lacks imperative verbs (factor): 'no_question'")
        ),
        pytest.param(
            "Expand $(x+1)^3$.", marks=bug("coach._QUESTION_WORDS lacks imperative verbs (expand): 'no_question'")
        ),
    ],
)
def test_legit_problems_with_trigger_words_are_accepted(text):
    assert find_problem_fault(text, False, CoachSettings()) is None


@bug("coach._SEVERAL matches a lone numbered heading 'Question 1:' as several problems")
def test_single_numbered_problem_is_not_several_problems():
    assert find_problem_fault("Question 1: What is 2+2?", False, CoachSettings()) != "several_problems"


@pytest.mark.parametrize(
    "text",
    [
        "Compute 17 × 3. (Hint: the result is \\boxed{51}.)",  # the public answer-leak case verbatim
        "What is 17 × 3?\nFinal Answer: 51",
        "What is 17 × 3?\n\n**Solution:** 17 × 3 = 51",
        "What is 2 + 2?\n\nThe answer is $\\boxed{4}$.",
        "Find 2+2. \\fbox{4}",
        pytest.param("What is 2+2? Answer is 4.", marks=bug("coach._LEAK needs ':' or '=' after 'answer'")),
        pytest.param("What is 2+2?\n### Answer\n4", marks=bug("coach._LEAK misses a markdown 'Answer' heading")),
        pytest.param("What is 2+2?\n\nSolution. 2+2=4.", marks=bug("coach._LEAK misses an appended 'Solution.' block")),
    ],
)
def test_answer_leaks_are_rejected(text):
    assert find_problem_fault(text, False, CoachSettings()) == "leaks_answer"


@pytest.mark.parametrize(
    "text",
    [
        "Problem 1: What is 2+2?\nProblem 2: What is 3+3?",
        "1. What is 2+2?\n2. What is 3+3?",
        pytest.param("(a) What is 2+2? (b) What is 3+3?", marks=bug("coach._SEVERAL misses '(a) ... (b)' parts")),
        pytest.param(
            "1) What is 2+2? 2) What is 3+3?", marks=bug("coach._SEVERAL only sees '2.'/'2)' at a line start")
        ),
    ],
)
def test_several_problems_are_rejected(text):
    assert find_problem_fault(text, False, CoachSettings()) == "several_problems"


def test_truncated_and_empty_win_over_content_faults():
    # a leak in a truncated response is still "truncated": the order of checks is the documented one
    assert find_problem_fault("What is 2+2? Answer: 4", True, CoachSettings()) == "truncated"
    assert find_problem_fault(" \n\t", True, CoachSettings()) == "empty"
    assert (
        find_problem_fault("What is 1?" + " " * 5000, False, CoachSettings(max_problem_chars=20)) is None
    )  # stripped length


# =========================================================================== F. near-duplicate Coach problems


def test_numbers_changed_latex_problems_are_duplicates():
    texts = [
        "Compute $\\binom{10}{3}$.",
        "Compute $\\binom{12}{5}$.",
        "  COMPUTE   $\\binom{7}{2}$. ",
        "Find the remainder when $2^{100}$ is divided by $7$.",
    ]
    problems = [Problem(t, i) for i, t in enumerate(texts)]
    mark_duplicates(problems, 0.9)
    assert [p.reject_reason for p in problems] == [None, "duplicate", "duplicate", None]


def test_invalid_problems_do_not_suppress_later_valid_copies():
    first = Problem("What is 3 + 4?", 0, reject_reason="truncated")
    second = Problem("What is 3 + 4?", 1)
    mark_duplicates([first, second], 0.9)
    assert first.reject_reason == "truncated" and second.valid


def test_duplicate_detection_off_at_one():
    problems = [Problem("What is 3 + 4?", 0), Problem("What is 3 + 4?", 1)]
    mark_duplicates(problems, 1.0)
    assert all(p.valid for p in problems)


# =========================================================================== C. difficulty filter (nothing kept)


@pytest.mark.parametrize(
    ("n", "agreeing", "reason"),
    [
        # n = 5: band [0.2·5, 0.8·5] = [1, 4]
        (5, 1, None),
        (5, 4, None),
        (5, 5, "above_band"),
        # n = 16: [ceil 3.2, floor 12.8] = [4, 12] (released: 4 to 12 of 16)
        (16, 3, "below_band"),
        (16, 4, None),
        (16, 12, None),
        (16, 13, "above_band"),
        # n = 10: [2, 8] exactly, no float drift
        (10, 1, "below_band"),
        (10, 2, None),
        (10, 8, None),
        (10, 9, "above_band"),
    ],
)
def test_band_boundaries_on_counts(n, agreeing, reason):
    assert decide("7", agreeing, n, FilterSettings(), tie=False) == reason


@pytest.mark.parametrize(
    ("low", "high", "n", "band"), [(0.35, 0.85, 20, (7, 17)), (0.15, 0.8, 20, (3, 16)), (0.3, 0.7, 10, (3, 7))]
)
def test_count_band_is_exact_where_floats_drift(low, high, n, band):
    # 0.35·20 = 7.000000000000001 and 0.15·20 = 3.0000000000000004 in floats: ceil would give 8 and 4
    assert FilterSettings(band_low=low, band_high=high).count_band(n) == band


@pytest.mark.parametrize("n", range(2, 33))
def test_no_zero_variance_group_passes_the_default_band(n):
    kept = [k for k in range(n + 1) if decide("7", k, n, FilterSettings(), tie=False) is None]
    assert all(0 < k < n for k in kept)


def test_all_easy_or_all_hard_batch_keeps_nothing():
    # 16 problems, n = 8: half answered identically by all 8 rollouts, half with 8 distinct answers
    texts, truncated = [], []
    for i in range(16):
        texts += boxed([str(i)] * 8) if i % 2 else boxed([str(100 * i + j) for j in range(8)])
        truncated += [False] * 8
    outcomes = assign_pseudo_labels(texts, truncated, 8, FilterSettings())
    assert not any(o.kept for o in outcomes)
    assert Counter(o.drop_reason for o in outcomes) == {"above_band": 8, "tie": 8}
    assert all(o.pass_rate in (0.0, 1.0) for o in outcomes)


def test_no_answer_majority_drops_the_problem():
    # 5 rollouts without a box, 3 with \boxed{6}: "no answer" is the commonest outcome → dropped (DESIGN,
    # released code); "no answer" itself is never the label
    outcome = assign_pseudo_labels(boxed([None] * 5 + ["6"] * 3), [False] * 8, 8, FilterSettings())[0]
    assert outcome.pseudo_label is None and outcome.drop_reason == "no_answer" and not outcome.kept
    # 3 without a box, 4 × 6, 1 × 2: the answered plurality wins, agreement 4/8 (denominator n)
    outcome = assign_pseudo_labels(boxed([None] * 3 + ["6"] * 4 + ["2"]), [False] * 8, 8, FilterSettings())[0]
    assert outcome.pseudo_label == "6" and outcome.pass_rate == pytest.approx(4 / 8) and outcome.kept


def test_all_truncated_group_has_no_label():
    outcome = assign_pseudo_labels(boxed(["5"] * 8), [True] * 8, 8, FilterSettings())[0]
    assert outcome.pseudo_label is None and outcome.drop_reason == "no_answer" and not outcome.kept
    assert outcome.agrees == [False] * 8


def test_truncated_rollouts_cannot_create_or_break_a_majority():
    # 3 finished "12", 5 truncated "9": the truncated cluster does not exist; most rollouts have no
    # answer, so the problem is dropped rather than labelled "9" or "12"
    outcome = assign_pseudo_labels(boxed(["12"] * 3 + ["9"] * 5), [False] * 3 + [True] * 5, 8, FilterSettings())[0]
    assert outcome.pseudo_label is None and outcome.drop_reason == "no_answer"
    # 5 finished "12", 3 truncated "9" (the truncated-vote case): "12" with 5/8, truncated rollouts get no credit
    outcome = assign_pseudo_labels(boxed(["12"] * 5 + ["9"] * 3), [False] * 5 + [True] * 3, 8, FilterSettings())[0]
    assert outcome.pseudo_label == "12" and outcome.pass_rate == pytest.approx(5 / 8)
    assert outcome.agrees == [True] * 5 + [False] * 3
    # 3 "7" and 3 "5" finished, 2 truncated "7": still a tie, truncated rollouts never break it
    tie = assign_pseudo_labels(boxed(["7"] * 3 + ["5"] * 3 + ["7"] * 2), [False] * 6 + [True] * 2, 8, FilterSettings())[
        0
    ]
    assert tie.pseudo_label is None and tie.drop_reason == "tie"
    # a truncated rollout whose answer equals the label gets no credit (reward 0)
    same = assign_pseudo_labels(boxed(["4"] * 4 + ["1", "2", "3", "4"]), [False] * 7 + [True], 8, FilterSettings())[0]
    assert same.pseudo_label == "4" and same.agrees[-1] is False and same.pass_rate == pytest.approx(4 / 8)


def test_vote_is_invariant_to_sample_order():
    answers = ["\\frac12", "0.5", "1/2", "3", "3", None, "7", "3"]
    rng = random.Random(0)
    reference = assign_pseudo_labels(boxed(answers), [False] * 8, 8, FilterSettings())[0]
    for _ in range(5):
        order = list(range(8))
        rng.shuffle(order)
        outcome = assign_pseudo_labels(boxed([answers[i] for i in order]), [False] * 8, 8, FilterSettings())[0]
        assert (outcome.pass_rate, outcome.kept) == (reference.pass_rate, reference.kept)
        assert [outcome.agrees[order.index(i)] for i in range(8)] == reference.agrees


# =========================================================================== D. GRPO and Coach rewards


def test_zero_variance_groups_give_exact_zero_advantages():
    mask = torch.ones(16, 5)
    rewards = player_token_rewards([True] * 8 + [False] * 8, mask)
    adv = grpo_advantages(rewards, mask, ["ones"] * 8 + ["zeros"] * 8)
    assert torch.isfinite(adv).all() and torch.equal(adv, torch.zeros(16, 5))


def test_empty_response_gets_no_reward_token():
    mask = torch.tensor([[0, 0, 0], [1, 1, 0]])
    assert player_token_rewards([True, True], mask).tolist() == [[0, 0, 0], [0, 1, 0]]


def test_coach_rewards_are_bounded_in_fp32():
    # seven problems at pass rate 0.95 and one at 0.0 (possible with filter.enabled=false), Δt = 0.01
    # (one point): no baseline, no std: the singleton stays at its raw value (0), never ~-2000
    rewards = coach_rewards("paper", 0.01, [0.95] * 7 + [0.0])
    adv = coach_advantages(rewards, torch.ones(8, 3, dtype=torch.float32))
    assert adv.dtype == torch.float32 and torch.isfinite(adv).all()
    assert adv.abs().max().item() <= 0.95 + 1e-6
    same = coach_advantages(coach_rewards("released_uniform", 0.0, [0.5] * 4), torch.ones(4, 2))
    assert torch.equal(same, torch.zeros(4, 2))


def test_coach_advantages_vanish_on_padding():
    adv = coach_advantages([0.02, -0.01], torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert torch.allclose(adv, torch.tensor([[0.02, 0.02, 0.0], [-0.01, 0.0, 0.0]]))


def test_coach_reward_signs_and_scales():
    # Δt = +0.04 = 4 points: paper R = pass_rate·100·Δt (0.5·4 = 2.0); released_uniform 100·Δt = 4
    assert coach_rewards("paper", 0.04, [0.2, 0.5, 0.8]) == pytest.approx([0.8, 2.0, 3.2])
    assert coach_rewards("released_uniform", -0.025, [0.2, 0.8]) == pytest.approx([-2.5, -2.5])
    # released_advantage: 100·Δt × mean advantage; a mean of exactly 0 becomes a multiplier of -1
    assert coach_rewards("released_advantage", -0.02, [0.5, 0.5], [0.5, 0.0]) == pytest.approx([-1.0, 2.0])
    assert coach_rewards("paper", 0.04, []) == []
    with pytest.raises(ValueError, match="one mean Player advantage"):
        coach_rewards("released_advantage", 0.04, [0.5, 0.5], [0.1])


def test_token_mean_loss_uses_global_token_count():
    # verl's agg_loss, as the worker calls it with the mini-batch's token count: micro-batch A has
    # 2 × 10 tokens at loss 1, micro-batch B 2 × 1000 tokens at loss 0 → (20 + 0) / 2020, not 0.5
    from verl.trainer.ppo.core_algos import agg_loss

    a = agg_loss(torch.ones(2, 10), torch.ones(2, 10), "token-mean", batch_num_tokens=2020)
    b = agg_loss(torch.zeros(2, 1000), torch.ones(2, 1000), "token-mean", batch_num_tokens=2020)
    assert (a + b).item() == pytest.approx(20 / 2020, abs=1e-9)


# =========================================================================== E/D. validation and Δt


def test_delta_tracker_ema_restarts_after_rollback():
    tracker = DeltaTracker(ema_decay=0.9)
    tracker.start(0.30)
    assert tracker.update(0.40) == pytest.approx(0.01)  # 0.9·0.30 + 0.1·0.40 = 0.31
    tracker.start(0.50)  # rollback: the restored Player scored 0.50
    assert tracker.update(0.50) == 0.0  # same score: Δt exactly 0 (the Coach update is skipped)
    assert tracker.update(0.40) == pytest.approx(-0.01)  # 0.9·0.50 + 0.1·0.40 = 0.49
    assert tracker.history == [0.30, 0.40, 0.50, 0.50, 0.40]


@pytest.mark.parametrize("decay", [None, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("score", [0.1, 0.3, 0.35, 0.7, 1 / 3, 0.8313253012048193])
def test_unchanged_score_gives_exactly_zero_delta(decay, score):
    tracker = DeltaTracker(ema_decay=decay)
    tracker.start(score)
    assert tracker.update(score) == 0.0 and tracker.update(score) == 0.0


def test_delta_tracker_resume_equals_uninterrupted():
    scores = [0.3, 0.35, 0.32, 0.4, 0.38]
    straight = DeltaTracker(0.9)
    straight.start(scores[0])
    expected = [straight.update(s) for s in scores[1:]]
    first = DeltaTracker(0.9)
    first.start(scores[0])
    got = [first.update(s) for s in scores[1:3]]
    resumed = DeltaTracker(0.9)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))  # through the JSON loop state
    got += [resumed.update(s) for s in scores[3:]]
    assert got == expected


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_validation_set_blank_lines_and_explicit_ids(tmp_path):
    path = write_jsonl(
        tmp_path / "v.jsonl", [{"problem": "p0", "answer": "1", "id": "a"}, "", "   ", {"problem": "p1", "answer": 2}]
    )
    loaded = load_validation_set(ValidationSettings(dataset=str(path), size=None))
    assert loaded.problems == ["p0", "p1"] and loaded.answers == ["1", "2"] and loaded.ids[0] == "a"


@bug("validation.load_validation_set: the default id is the *line* number, so blank lines shift it ('v-2' for row 1)")
def test_default_ids_are_row_indices_despite_blank_lines(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [{"problem": "p0", "answer": "1"}, "", {"problem": "p1", "answer": "2"}])
    assert load_validation_set(ValidationSettings(dataset=str(path), size=None)).ids == ["v-0", "v-1"]


@bug("validation.load_validation_set: size > rows silently returns fewer problems (Δt granularity changes unnoticed)")
def test_size_larger_than_the_file_is_a_config_error(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [{"problem": "p0", "answer": "1"}, {"problem": "p1", "answer": "2"}])
    with pytest.raises(ConfigError, match="validation.size"):
        load_validation_set(ValidationSettings(dataset=str(path), size=10))


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param([{"problem": "p", "answer": None}], marks=bug("null answer becomes the gold string 'None'")),
        pytest.param([["p", "1"]], marks=bug("a non-object JSON line raises TypeError, not ConfigError")),
        pytest.param([], marks=bug("an empty file gives a 0-problem set; measure_accuracy then divides by zero")),
        [{"problem": "p"}],
        ["{not json"],
    ],
)
def test_malformed_validation_files_are_config_errors(tmp_path, rows):
    path = write_jsonl(tmp_path / "v.jsonl", rows)
    with pytest.raises(ConfigError, match="validation.dataset"):
        load_validation_set(ValidationSettings(dataset=str(path), size=None))


def test_unknown_benchmark_name_fails_with_the_key(tmp_path):
    with pytest.raises(ConfigError, match="validation.dataset: no file .*aime-aops"):
        load_validation_set(ValidationSettings(dataset="aime-aops", data_dir=str(tmp_path)))


@pytest.mark.parametrize(
    "system_prompt", [None, "Please reason step by step, and put your final answer within \\boxed{}."]
)
def test_training_and_validation_render_the_same_prompt(system_prompt):
    problem = "What is $7 \\cdot 20 + 2$?"
    player = ScriptedPolicy(lambda question, i: ["so \\boxed{142}"] * 16)
    prompt = PlayerPrompt(system_prompt)
    _, outcomes = roll_out_and_filter(player, [problem], 4, FilterSettings(enabled=False), prompt)
    result = measure_accuracy(player, ValidationSet("amc", ["amc-0"], [problem], ["142"]), ValidationSettings(), prompt)
    assert player.prompts[0] == player.prompts[1] == [player_prompt(problem, system_prompt)]
    assert outcomes[0].pseudo_label == "142" and result.accuracy == 1.0


# =========================================================================== settings (empty band, model context)


def settings_cfg(**groups):
    base = {"coach": {}, "player": {}, "filter": {}, "validation": {}}
    for key, value in groups.items():
        base[key].update(value)
    return OmegaConf.create(base)


@pytest.mark.parametrize(
    ("groups", "key"),
    [
        ({"coach": {"duplicate_similarty": 0.9}}, "coach.duplicate_similarty"),
        ({"filter": {"band": 0.2}}, "filter.band"),
        ({"validation": {"ema": 0.9}}, "validation.ema"),
        ({"player": {"rollback": {"patiense": 3}}}, "player.rollback.patiense"),
        ({"player": {"n": 2.5}}, "player.n"),
    ],
)
def test_settings_reject_unknown_keys_and_wrong_types(groups, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(settings_cfg(**groups))


@bug(
    "settings: a band holding no integer count for player.n (0.3-0.35 of 8 → counts [3, 2]) is accepted; every group is then dropped and every step skipped"
)
def test_band_without_any_count_for_n_is_rejected():
    with pytest.raises(ConfigError, match=r"filter\.band"):
        load_settings(settings_cfg(filter={"band_low": 0.3, "band_high": 0.35}, player={"n": 8}))


def test_shipped_qwen_presets_fit_the_4096_token_context():
    from cpmobius.config import compose_config

    for preset in ("paper_qwen_1p5b", "released_qwen_7b_instruct"):
        cfg = compose_config([f"experiment={preset}"])
        for policy in ("coach", "player"):
            assert cfg.data.max_prompt_length + cfg[policy].verl.rollout.response_length <= 4096, (preset, policy)
        # Token-mean loss: the recorded mode is the release's (tests/config/test_presets.py)
        assert cfg.actor_rollout_ref.actor.loss_agg_mode == {"paper_qwen_1p5b": "token-mean"}.get(
            preset, "seq-mean-token-mean"
        )


# =========================================================================== checkpoints (a resume that loses state)


def policy(weight: float, save_error: BaseException | None = None) -> ScriptedPolicy:
    """A policy whose checkpoint holds ``weight``; ``save_error`` is raised by its save once its file is written."""
    return ScriptedPolicy(not_sampled, weight=weight, save_error=save_error)


def loop_state(step: int, coach: ScriptedPolicy, player: ScriptedPolicy) -> dict:
    return {
        "step": step,
        "policies": {
            name: {"global_steps": p.global_steps, "generation_calls": p.generation_calls}
            for name, p in (("coach", coach), ("player", player))
        },
    }


def save(root, step, coach, player):
    return checkpoint.save_checkpoint(
        root,
        step,
        {"coach": coach, "player": player},
        loop_state(step, coach, player),
        OmegaConf.create({"step": step}),
    )


def test_checkpoint_round_trip_restores_both_policies_and_rng(tmp_path):
    coach, player = policy(1.0), policy(2.0)
    coach.global_steps, player.global_steps, player.generation_calls = 3, 4, 7
    random.seed(5)
    save(tmp_path, 2, coach, player)
    expected_draw = random.random()
    new_coach, new_player = policy(0.0), policy(0.0)
    path = checkpoint.find_latest_checkpoint(tmp_path)
    assert path == tmp_path / "global_step_2"
    state = checkpoint.load_checkpoint(path, {"coach": new_coach, "player": new_player})
    assert (new_coach.weight, new_player.weight) == (1.0, 2.0)
    assert (new_coach.global_steps, new_player.global_steps, new_player.generation_calls) == (3, 4, 7)
    assert Path(new_player.loaded[-1]) == (path / "player").resolve() and state["step"] == 2
    assert random.random() == expected_draw
    assert not list(tmp_path.glob(".*partial"))


def test_kill_mid_save_keeps_the_previous_checkpoint(tmp_path):
    coach, player = policy(1.0), policy(2.0)
    save(tmp_path, 2, coach, player)
    with pytest.raises(checkpoint.CheckpointSaveError, match="killed mid-save.*step 2, is intact"):
        save(tmp_path, 3, coach, policy(9.0, RuntimeError("killed mid-save")))
    assert not (tmp_path / ".global_step_3.partial").exists()  # a failed save removes its partial copy
    (tmp_path / ".global_step_3.partial" / "coach").mkdir(parents=True)  # a SIGKILL leaves one behind ...
    assert checkpoint.find_latest_checkpoint(tmp_path) == tmp_path / "global_step_2"  # ... and it is ignored
    save(tmp_path, 3, coach, policy(3.0))  # the retry replaces the stale partial
    assert checkpoint.find_latest_checkpoint(tmp_path) == tmp_path / "global_step_3"
    assert not (tmp_path / ".global_step_3.partial").exists()


def test_second_save_of_a_step_replaces_the_first(tmp_path):
    save(tmp_path, 4, policy(1.0), policy(1.0))
    save(tmp_path, 4, policy(5.0), policy(6.0))
    player = policy(0.0)
    checkpoint.load_checkpoint(checkpoint.find_latest_checkpoint(tmp_path), {"coach": policy(0.0), "player": player})
    assert player.weight == 6.0


def test_tracker_naming_a_missing_folder_fails_loudly(tmp_path):
    (tmp_path / checkpoint.TRACKER_FILE).write_text("7")
    with pytest.raises(FileNotFoundError, match="step 7"):
        checkpoint.find_latest_checkpoint(tmp_path)
    assert checkpoint.find_latest_checkpoint(tmp_path / "nowhere") is None


@bug(
    "checkpoint.save_checkpoint: re-saving step N rmtree()s global_step_N before the rename; a kill in between "
    "leaves the tracker naming a missing folder, so resume raises instead of loading the previous step-N checkpoint"
)
def test_kill_while_replacing_a_checkpoint_of_the_same_step_keeps_one(tmp_path, monkeypatch):
    save(tmp_path, 3, policy(1.0), policy(1.0))
    real_replace = checkpoint.os.replace

    def killed_on_folder_rename(src, dst):
        if Path(src).is_dir():
            raise OSError("killed")
        real_replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", killed_on_folder_rename)
    with pytest.raises(OSError):
        save(tmp_path, 3, policy(2.0), policy(2.0))
    monkeypatch.setattr(checkpoint.os, "replace", real_replace)
    path = checkpoint.find_latest_checkpoint(tmp_path)
    assert path is not None and (path / "loop_state.json").is_file()


def test_checkpoint_retention_keeps_the_newest_and_never_the_tracked_one(tmp_path):
    """trainer.max_actor_ckpt_to_keep: a 999-step run saving every 10 steps at ~37 GB a checkpoint
    fills any disk; keep=2 leaves the two newest, and the loop's own save passes the key through."""
    for step in (10, 20, 30):
        checkpoint.save_checkpoint(
            tmp_path,
            step,
            {"coach": policy(1.0), "player": policy(float(step))},
            loop_state(step, policy(1.0), policy(1.0)),
            OmegaConf.create({}),
            keep=2,
        )
    assert sorted(p.name for p in tmp_path.glob("global_step_*")) == ["global_step_20", "global_step_30"]
    player = policy(0.0)
    checkpoint.load_checkpoint(checkpoint.find_latest_checkpoint(tmp_path), {"coach": policy(0.0), "player": player})
    assert player.weight == 30.0
    (tmp_path / checkpoint.TRACKER_FILE).write_text("20")  # a resumed run whose latest is the older folder
    assert checkpoint.prune_checkpoints(tmp_path, 1) == []  # step 20 is tracked, step 30 is the newest
    with pytest.raises(ValueError, match="max_actor_ckpt_to_keep"):
        checkpoint.prune_checkpoints(tmp_path, 0)


# =========================================================================== toy world ground truth


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("What is 3 - 5?", "-2"),
        ("What is 1+1?", "2"),
        ("What is 007 * 2?", "14"),
        ("What is 2 ** 3?", None),
        ("What is 2 * -3?", None),
        ("what is 2 + 2?", None),
        ("What is 1234567 + 1?", None),
        ("What is 2 + 2?\n", "4"),
    ],
)
def test_toy_solve(text, answer):
    assert solve(text) == answer
