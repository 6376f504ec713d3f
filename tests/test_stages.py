"""The loop's stage functions on hand-computed cases (pure: no Ray, no models)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

from cpmobius.coach import Problem, find_problem_fault
from cpmobius.config import ConfigError, compose_config
from cpmobius.difficulty_filter import assign_pseudo_labels, decide
from cpmobius.duplicates import mark_duplicates
from cpmobius.rewards import (
    coach_advantages,
    coach_rewards,
    grpo_advantages,
    player_token_rewards,
    token_weighted_mean_advantage,
)
from cpmobius.settings import CoachSettings, FilterSettings, ValidationSettings, load_settings
from cpmobius.toy.world import solve, validation_problems
from cpmobius.validation import DeltaTracker, load_validation_set

# --------------------------------------------------------------------------- coach


@pytest.mark.parametrize(
    ("text", "truncated", "reason"),
    [
        ("", False, "empty"),
        ("   \n", False, "empty"),
        ("What is 2 + 2?", True, "truncated"),
        ("What is " + "1 + " * 600 + "1?", False, "over_long"),
        ("The sky is blue today.", False, "no_question"),
        ("Sure! Here is a problem: what is 3 + 4?", False, "chatter"),
        ("Problem 1: What is 2+2?\nProblem 2: What is 3+3?", False, "several_problems"),
        ("Compute 17 × 3. (Hint: the result is \\boxed{51}.)", False, "leaks_answer"),  # the public answer-leak case
        ("Find x if 2x = 6. Answer: 3", False, "leaks_answer"),
        ("A bag holds 3 red and 5 blue marbles. What is the probability that two draws are red?", False, None),
        ("Find all real x with x^2 = 4.", False, None),
    ],
)
def test_problem_faults(text, truncated, reason):
    assert find_problem_fault(text, truncated, CoachSettings()) == reason


def test_near_duplicates_are_dropped():
    base = "A bag has {} red and {} blue marbles. Two marbles are drawn without replacement. What is the probability that both are red?"
    paraphrases = [
        base.format(3, 5),
        base.format(4, 6),
        base.format(2, 7),
        base.format(3, 5),
        base.format(5, 5).replace("Two marbles", "Two balls"),
        base.format(1, 9).replace("both", "both of them"),
    ]
    distinct = ["What is the sum of the first 10 positive integers?", "Find the remainder when 2^10 is divided by 7."]
    problems = [Problem(text, i) for i, text in enumerate(paraphrases + distinct)]
    mark_duplicates(problems, similarity=0.9)
    kept = [p.text for p in problems if p.valid]
    assert sum(text in paraphrases for text in kept) == 1
    assert all(text in kept for text in distinct)
    assert Counter(p.reject_reason for p in problems)["duplicate"] == 5


def _near_by_definition(a: str, b: str, similarity: float) -> bool:
    """The duplicate rule as `mark_duplicates` states it, every pair computed in full: the larger of the
    difflib ratio (candidate first) and the Dice overlap of the normalised texts' word multisets."""
    from difflib import SequenceMatcher

    from cpmobius.duplicates import _normalise, _word_counts

    na, nb = _normalise(a), _normalise(b)
    wa, wb = _word_counts(na), _word_counts(nb)
    dice = 2 * sum((wa & wb).values()) / max(1, sum(wa.values()) + sum(wb.values()))
    return max(dice, SequenceMatcher(None, na, nb).ratio()) >= similarity


@pytest.mark.parametrize("similarity", [0.6, 0.8, 0.9, 0.97])
def test_near_duplicates_match_the_rule_pair_by_pair(similarity):
    """The cheap bounds that settle most pairs change no decision: mutated paraphrases at every distance
    from their source, compared with the rule computed in full for each pair in sampling order."""
    import random

    rng = random.Random(similarity)
    words = (
        "a bag box has holds red blue green marbles balls cards two three five are drawn picked without "
        "replacement what is the probability that both all of them sum product remainder when divided by "
        "find how many ways integers less than circle radius area triangle sides"
    ).split()
    sources = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 40))) + "?" for _ in range(12)]
    texts = []
    for _ in range(90):
        tokens = rng.choice(sources).split()
        for _ in range(rng.randint(0, 12)):  # 0 edits: a verbatim repeat
            edit, at = rng.random(), rng.randrange(len(tokens))
            if edit < 0.4:
                tokens[at] = rng.choice(words)
            elif edit < 0.7:
                tokens.insert(at, str(rng.randint(0, 99)))
            elif len(tokens) > 3:
                tokens.pop(at)
        texts.append(" ".join(tokens))
    problems = [Problem(text, i) for i, text in enumerate(texts)]
    mark_duplicates(problems, similarity=similarity, seen=texts[:5])
    kept, expected = list(texts[:5]), []
    for text in texts:
        near = any(_near_by_definition(text, other, similarity) for other in kept)
        expected.append("duplicate" if near else None)
        if not near:
            kept.append(text)
    assert [p.reject_reason for p in problems] == expected
    assert 0 < expected.count("duplicate") < len(texts)  # both outcomes are exercised


# --------------------------------------------------------------------------- difficulty filter


def boxed(answers):
    return [f"so \\boxed{{{a}}}" if a is not None else "I give up" for a in answers]


@pytest.mark.parametrize(
    ("agreeing", "kept"),
    [(2, True), (8, True), (9, False), (5, True)],  # band boundary rows, n = 10
)
def test_band_is_inclusive_on_integer_counts(agreeing, kept):
    # the other rollouts all answer differently, so "7" (agreeing ≥ 2) is the unique plurality
    answers = ["7"] * agreeing + [str(100 + i) for i in range(10 - agreeing)]
    outcome = assign_pseudo_labels(boxed(answers), [False] * 10, 10, FilterSettings())[0]
    assert outcome.kept is kept
    assert outcome.pseudo_label == "7"
    assert outcome.pass_rate == pytest.approx(agreeing / 10)
    assert outcome.drop_reason == (None if kept else "above_band")


def test_one_agreeing_rollout_is_below_the_band():
    # 1/10 agreement has a label only as a plurality over ties, e.g. against "no answer": 7 once, 9 no-answers
    # is a no-answer majority; with counts alone, decide() gives below_band (1/10 dropped)
    assert decide("7", 1, 10, FilterSettings(), tie=False) == "below_band"
    assert decide("7", 2, 10, FilterSettings(), tie=False) is None


def test_count_band_has_no_float_drift():
    assert FilterSettings().count_band(10) == (2, 8)
    assert FilterSettings().count_band(16) == (4, 12)  # released: 4 to 12 of 16 agree
    assert FilterSettings(band_low=0.3, band_high=0.7).count_band(10) == (3, 7)


def test_ties_and_no_answer_majorities_give_no_label():
    tie = assign_pseudo_labels(boxed(["1", "1", "2", "2"]), [False] * 4, 4, FilterSettings())[0]
    assert tie.pseudo_label is None and tie.drop_reason == "tie" and not tie.kept and tie.pass_rate == 0
    lone = assign_pseudo_labels(boxed([None, None, None, "3"]), [False] * 4, 4, FilterSettings())[0]
    assert lone.pseudo_label is None and lone.drop_reason == "no_answer"  # "no answer" is the commonest outcome
    allnone = assign_pseudo_labels(boxed([None] * 4), [False] * 4, 4, FilterSettings())[0]
    assert allnone.pseudo_label is None and allnone.drop_reason == "no_answer"


def test_equivalent_answers_form_one_cluster():
    outcome = assign_pseudo_labels(boxed(["\\frac12", "0.5", "1/2", "3"]), [False] * 4, 4, FilterSettings())[0]
    assert outcome.pass_rate == pytest.approx(0.75) and outcome.agrees == [True, True, True, False]


def test_truncated_rollouts_never_vote():
    texts = boxed(["12"] * 5) + ["\\boxed{9} and then I kept going"] * 2 + ["no box, cut off"]
    outcome = assign_pseudo_labels(texts, [False] * 5 + [True] * 3, 8, FilterSettings())[0]
    assert outcome.pseudo_label == "12" and outcome.pass_rate == pytest.approx(5 / 8)  # denominator stays n
    assert outcome.agrees[5:] == [False] * 3


def test_everything_filtered_out():
    groups = boxed(["4"] * 8) + boxed(["1", "2", "3", "5", "6", "7", "8", "9"])
    outcomes = assign_pseudo_labels(groups, [False] * 16, 8, FilterSettings())
    assert [o.kept for o in outcomes] == [False, False]
    assert [o.drop_reason for o in outcomes] == ["above_band", "tie"]


def test_no_filter_ablation_keeps_every_labelled_group():
    outcome = assign_pseudo_labels(boxed(["4"] * 8), [False] * 8, 8, FilterSettings(enabled=False))[0]
    assert outcome.kept and decide(None, 0, 8, FilterSettings(enabled=False), tie=True) == "tie"


def test_groups_must_be_complete():
    with pytest.raises(ValueError, match="groups of 4"):
        assign_pseudo_labels(["a"] * 6, [False] * 6, 4, FilterSettings())


def test_the_released_vote_counts_exact_strings_where_ours_clusters_equivalent_answers():
    # 0.5 and \frac{1}{2} are one answer: ours keeps the group at 6/8 (in the band [0.2, 0.8]); the
    # released vote sees two strings of 3 each, a tie, and drops it.
    texts = boxed(["0.5", "0.5", "0.5", "\\frac{1}{2}", "\\frac{1}{2}", "\\frac{1}{2}", "2", "3"])
    ours = assign_pseudo_labels(texts, [False] * 8, 8, FilterSettings(), mode="cpmobius")[0]
    assert ours.kept and ours.pass_rate == 0.75 and sum(ours.agrees) == 6
    released = assign_pseudo_labels(texts, [False] * 8, 8, FilterSettings(), mode="released")[0]
    assert released.pseudo_label is None and released.pass_rate == 0.0 and released.drop_reason == "tie"
    # Without the tie the released vote labels the exact string and credits only its copies.
    texts = boxed(["0.5", "0.5", "0.5", "0.5", "\\frac{1}{2}", "\\frac{1}{2}", "2", "3"])
    released = assign_pseudo_labels(texts, [False] * 8, 8, FilterSettings(), mode="released")[0]
    assert released.pseudo_label == "0.5" and released.pass_rate == 0.5
    assert released.agrees == [True] * 4 + [False] * 4


def test_player_vote_is_checked_and_the_released_presets_use_the_released_vote():
    from cpmobius.grading.results import MODES
    from cpmobius.settings import VOTES

    assert VOTES == MODES
    assert load_settings(compose_config([])).player.vote == "cpmobius"
    assert load_settings(compose_config(["experiment=paper_qwen_1p5b"])).player.vote == "cpmobius"
    for preset in ("released_qwen_1p5b", "released_qwen_7b_instruct", "released_octothinker_3b"):
        assert load_settings(compose_config([f"experiment={preset}"])).player.vote == "released", preset
    with pytest.raises(ConfigError, match="player.vote"):
        load_settings(compose_config(["player.vote=exact"]))


# --------------------------------------------------------------------------- rewards


def test_player_reward_sits_on_the_last_response_token():
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    rewards = player_token_rewards([True, False], mask)
    assert rewards.tolist() == [[0, 0, 1, 0], [0, 0, 0, 0]]


def test_grpo_advantages_hand_computed_and_zero_variance():
    mask = torch.ones(8, 3)
    rewards = player_token_rewards([True, True, False, False, True, True, True, True], mask)
    adv = grpo_advantages(rewards, mask, ["a"] * 4 + ["b"] * 4)
    # group a: rewards [1,1,0,0], mean 0.5, unbiased std sqrt(4·0.25/3) = 0.57735 → ±0.8660
    assert adv[0].tolist() == pytest.approx([0.8660] * 3, abs=1e-3)
    assert adv[2].tolist() == pytest.approx([-0.8660] * 3, abs=1e-3)
    assert torch.equal(adv[4:], torch.zeros(4, 3))  # group b has no variance: exactly 0, no NaN
    # algorithm.norm_adv_by_std_in_grpo=false (Dr. GRPO): the reward minus its group's mean, unscaled
    unscaled = grpo_advantages(rewards, mask, ["a"] * 4 + ["b"] * 4, norm_by_std=False)
    assert unscaled[0].tolist() == pytest.approx([0.5] * 3) and unscaled[2].tolist() == pytest.approx([-0.5] * 3)


def test_coach_reward_table():
    # P3: pass rate 0.5, Δt = +0.04 → paper 0.5 × 0.04 = 0.02; released 100·Δt = 4
    # paper: pass rate × Δt in points: 0.5 × 4 = 2.0
    assert coach_rewards("paper", 0.04, [0.5]) == pytest.approx([2.0])
    assert coach_rewards("released_uniform", 0.04, [0.5, 0.25]) == pytest.approx([4.0, 4.0])
    assert coach_rewards("released_advantage", 0.04, [0.5, 0.5], [0.25, 0.0]) == pytest.approx([1.0, -4.0])
    assert coach_rewards("paper", -0.1, [0.3]) == pytest.approx([-3.0])  # 0.3 × −10 points
    with pytest.raises(ValueError, match="unknown coach reward"):
        coach_rewards("best_of_n", 0.1, [0.5])


def test_coach_advantages_are_not_normalised():
    rewards = coach_rewards("paper", 0.01, [0.95] * 7 + [0.0])  # Δt = one point
    adv = coach_advantages(rewards, torch.ones(8, 2))
    assert adv[7].tolist() == [0.0, 0.0] and adv[0].tolist() == pytest.approx([0.95, 0.95])
    assert adv.abs().max() <= 0.95 + 1e-6


def test_token_weighted_mean_advantage():
    adv = torch.tensor([[1.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert token_weighted_mean_advantage(adv, mask) == pytest.approx(1 / 3)  # (1 + 1 − 1) / 3 tokens


# --------------------------------------------------------------------------- validation and Δt


def test_delta_tracker_raw_and_ema():
    tracker = DeltaTracker()
    with pytest.raises(RuntimeError, match="before start"):
        tracker.update(0.5)
    tracker.start(0.30)
    assert tracker.update(0.35) == pytest.approx(0.05)
    assert tracker.update(0.35) == 0.0
    ema = DeltaTracker(ema_decay=0.9)
    ema.start(0.30)
    assert ema.update(0.40) == pytest.approx(0.01)  # 0.9·0.30 + 0.1·0.40 = 0.31 → Δt = 0.01
    restored = DeltaTracker()
    restored.load_state_dict(ema.state_dict())
    assert restored.reference == pytest.approx(0.31) and restored.history == [0.30, 0.40]


def test_toy_validation_set_is_deterministic():
    first, again = validation_problems(16, seed=3), validation_problems(16, seed=3)
    assert first == again and first != validation_problems(16, seed=4)
    assert all(solve(p.text) == p.answer for p in first)
    assert solve("What is 16 + 05?") == "21" and solve("What is 3 +?") is None  # numbers the Coach pads with 0
    loaded = load_validation_set(ValidationSettings(dataset="toy", size=16, seed=3))
    assert loaded.problems == [p.text for p in first] and len(loaded) == 16


def test_validation_set_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="validation.dataset"):
        load_validation_set(ValidationSettings(dataset=str(tmp_path / "missing.jsonl")))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "no problem field"}) + "\n")
    with pytest.raises(ConfigError, match="bad.jsonl:1"):
        load_validation_set(ValidationSettings(dataset=str(bad)))
    with pytest.raises(ConfigError, match="validation.data_dir"):
        load_validation_set(ValidationSettings(dataset="amc"))


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("filter.band_low=0.9", "filter.band_low"),
        ("filter.band_high=1.5", "filter.band_high"),
        ("filter.quota=0", "filter.quota"),
        ("filter.on_shortfall=retry_forever", "filter.on_shortfall"),
        ("coach.reward=length", "coach.reward"),
        ("player.n=1", "player.n"),
        ("player.rollback.patience=0", "player.rollback.patience"),
        ("validation.samples_per_problem=4", "validation.samples_per_problem"),
        ("validation.ema_decay=1.5", "validation.ema_decay"),
        ("+filter.bandwidth=3", "filter.bandwidth"),
    ],
)
def test_bad_settings_name_their_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(compose_config([override]))


def test_amc_validation_set_loads_from_shared_data():
    from cpmobius.eval.data import default_data_dir

    data = default_data_dir().parent
    if not (data / "eval" / "amc" / "amc.jsonl").is_file():
        pytest.skip("shared AMC copy absent")
    amc = load_validation_set(ValidationSettings(dataset="amc", data_dir=str(data), size=None))
    assert len(amc) == 83 and amc.answers[0] == "142" and amc.ids[0] == "amc-0"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("filter.quota=abc", "filter.quota"),
        ("filter.enabled=maybe", "filter.enabled"),
        ("player.rollback.patience=x", "player.rollback.patience"),
    ],
)
def test_wrong_types_are_config_errors_not_tracebacks(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(compose_config([override]))


# --------------------------------------------------------------------------- prompt length


class TokenCountingPlayer:
    """count_prompt_tokens = characters of the problem text + 10 for the chat frame."""

    max_prompt_tokens = 40

    def count_prompt_tokens(self, prompts):
        return [len(p[-1]["content"]) + 10 for p in prompts]


def test_problems_whose_player_prompt_does_not_fit_are_rejected_with_their_own_reason():
    from cpmobius.coach import Problem, reject_unfit_prompts
    from cpmobius.prompts import PlayerPrompt

    problems = [
        Problem("What is 2+2?", 0),  # 12 + 10 = 22 tokens: fits
        Problem("What is " + "1+" * 11 + "1?", 1),  # 32 + 10 = 42 > 40: rejected
        Problem("x" * 100, 2, reject_reason="no_question"),  # already rejected: keeps its reason
        Problem("Find " + "y" * 25 + "?", 3),  # 31 + 10 = 41 > 40: rejected
        Problem("Find " + "y" * 24 + "?", 4),  # 30 + 10 = 40: fits (the limit is inclusive)
    ]
    assert reject_unfit_prompts(problems, TokenCountingPlayer(), PlayerPrompt()) == 2
    assert [p.reject_reason for p in problems] == [None, "prompt_too_long", "no_question", "prompt_too_long", None]


def test_the_agent_loop_refuses_to_cut_a_prompt():
    from types import SimpleNamespace

    from cpmobius.engine.agent_loop import ConfiguredSingleTurnAgentLoop, PromptTooLongError

    loop = ConfiguredSingleTurnAgentLoop.__new__(ConfiguredSingleTurnAgentLoop)
    loop.rollout_config = SimpleNamespace(prompt_length=4)
    assert loop._cap_text_prompt_length([1, 2, 3, 4]) == [1, 2, 3, 4]
    with pytest.raises(PromptTooLongError, match="5 tokens exceeds rollout.prompt_length=4"):
        loop._cap_text_prompt_length([1, 2, 3, 4, 5])


def test_candidates_per_attempt_fixed_and_adaptive():
    """Released: ceil(missing x 2). Adaptive: margin / acceptance so far, clamped to [oversample, max]."""
    from cpmobius.difficulty_filter import candidates_per_attempt
    from cpmobius.settings import FilterSettings

    fixed = FilterSettings(oversample=2.0)
    assert candidates_per_attempt(5, fixed, {"candidates": 100, "accepted": 10}) == 10
    adaptive = FilterSettings(oversample=2.0, adaptive_oversample=True, oversample_max=8.0, adaptive_margin=1.25)
    assert candidates_per_attempt(16, adaptive, {}) == 32  # no history yet
    assert candidates_per_attempt(16, adaptive, {"candidates": 100, "accepted": 25}) == 80  # 1.25 / 0.25 = 5
    assert candidates_per_attempt(16, adaptive, {"candidates": 100, "accepted": 90}) == 32  # floor: oversample
    assert candidates_per_attempt(16, adaptive, {"candidates": 100, "accepted": 1}) == 128  # cap: oversample_max
    assert candidates_per_attempt(3, adaptive, {"candidates": 50, "accepted": 0}) == 24  # nothing kept yet: the cap
    with pytest.raises(ValueError, match="oversample_max"):
        FilterSettings(oversample=4.0, oversample_max=2.0)


def test_the_player_prompt_renders_every_problem_alike_and_checks_its_fit_with_the_players_count():
    from cpmobius.prompts import BOXED_INSTRUCTION, PlayerPrompt, player_prompt

    prompt = PlayerPrompt("Be brief.", BOXED_INSTRUCTION)
    problems = ["What is 2+2?", "Find " + "y" * 25 + "?"]
    assert prompt.render(problems) == [player_prompt(p, "Be brief.", BOXED_INSTRUCTION) for p in problems]
    # TokenCountingPlayer counts the user turn's characters + 10; the instruction adds a newline and its 70 characters
    assert PlayerPrompt().fits(TokenCountingPlayer(), problems) == [True, False]
    assert prompt.fits(TokenCountingPlayer(), problems) == [False, False]
    assert prompt.fits(TokenCountingPlayer(), []) == []


def test_the_sampling_a_generate_call_reports_must_be_one_value_per_key_for_all_its_rows():
    import numpy as np
    from verl import DataProto

    from cpmobius.engine.batches import sampling_used

    def output(**columns):
        rows = {f"sampling_{k}": np.array(v, dtype=object) for k, v in columns.items()}
        return DataProto.from_dict(tensors={"x": torch.zeros(2, 1)}, non_tensors=rows)

    same = output(temperature=[0.6, 0.6], top_p=[1.0, 1.0], top_k=[-1, -1])
    assert sampling_used(same, "player") == {"temperature": 0.6, "top_p": 1.0, "top_k": -1.0}
    assert not any(key.startswith("sampling_") for key in same.non_tensor_batch)  # the per-row columns are gone
    with pytest.raises(RuntimeError, match="player: rows of one generate call were sampled with different top_p"):
        sampling_used(output(temperature=[0.6, 0.6], top_p=[1.0, 0.9], top_k=[-1, -1]), "player")
    with pytest.raises(RuntimeError, match="default_agent_loop"):
        sampling_used(output(temperature=[0.6, 0.6]), "coach")


@pytest.mark.parametrize(
    ("label_from", "label", "pass_rate", "kept", "reason"),
    [
        # 4 of 8 rollouts unanswered, the plurality "5" has 3: the paper's rule drops the group ...
        ("all", None, 0.0, False, "no_answer"),
        # ... the answered rollouts' rule labels it "5" and the unanswered count against it: 3/8 = 0.375,
        # inside [0.2, 0.8] (2..6 agreeing of 8), so it is kept
        ("answered", "5", 0.375, True, None),
    ],
)
def test_a_group_with_more_unanswered_rollouts_than_its_plurality(label_from, label, pass_rate, kept, reason):
    from cpmobius.difficulty_filter import assign_pseudo_labels
    from cpmobius.settings import FilterSettings

    texts = ["\\boxed{5}", "I give up", "\\boxed{5}", "I give up", "\\boxed{6}", "I give up", "\\boxed{5}", "no idea"]
    outcome = assign_pseudo_labels(texts, [False] * 8, 8, FilterSettings(label_from=label_from))[0]
    assert (outcome.pseudo_label, outcome.pass_rate, outcome.kept, outcome.drop_reason) == (
        label,
        pytest.approx(pass_rate),
        kept,
        reason,
    )
    assert outcome.agrees == ([True, False, True, False, False, False, True, False] if label else [False] * 8)


def test_the_answered_rule_still_drops_a_group_with_no_answer_at_all_or_a_tie():
    from cpmobius.difficulty_filter import assign_pseudo_labels
    from cpmobius.settings import FilterSettings

    answered = FilterSettings(label_from="answered")
    silent, tied = ["no idea"] * 4, ["\\boxed{1}", "\\boxed{2}", "no idea", "no idea"]
    outcomes = assign_pseudo_labels(silent + tied, [False] * 8, 4, answered)
    assert [o.drop_reason for o in outcomes] == ["no_answer", "tie"]
    with pytest.raises(ConfigError, match="filter.label_from"):
        FilterSettings(label_from="majority")
