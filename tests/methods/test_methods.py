"""The comparison baselines as methods of the loop (``method=ttrl|rent``, `cpmobius.methods.fixed_pool`): the questions
a step draws, TTRL's vote-then-train split and RENT's entropy reward through the Player update, checked with
hand-computed values on a stand-in Player (no Ray, no models), and the settings that refuse a bad combination
(R-Zero's too; its schedule is tested in tests/methods/test_rzero.py). The toy runs are in tests/test_method_runs.py."""

from __future__ import annotations

import pytest
import torch
from stand_ins import ScriptedPolicy

from cpmobius.config import ConfigError, compose_config
from cpmobius.loop import CoachPlayerLoop
from cpmobius.methods import check_settings
from cpmobius.methods.fixed_pool import FixedPool
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet

QUESTIONS = ["What is 2 + 3?", "What is 1 + 3?", "What is 6 - 2?"]


def make_pool(method: str, player: ScriptedPolicy, *overrides: str) -> FixedPool:
    """The pool the method builds for the loop (`cpmobius.methods.Method.problem_source`) over `QUESTIONS`."""
    cfg = compose_config([f"method={method}", *overrides])
    val_set = ValidationSet("v", [str(i) for i in range(len(QUESTIONS))], QUESTIONS, ["5", "4", "4"])
    pool = CoachPlayerLoop(cfg, load_settings(cfg), None, player, val_set=val_set).filter
    assert isinstance(pool, FixedPool)
    return pool


def test_a_steps_draw_depends_only_on_the_seed_and_the_step_and_never_repeats_a_question():
    pool = make_pool("rent", ScriptedPolicy(lambda q, i: []), "method.prompts_per_step=2")
    assert pool.draw(1) == pool.draw(1) and len(set(pool.draw(1))) == 2
    assert {tuple(pool.draw(step)) for step in range(1, 20)} != {tuple(pool.draw(1))}  # steps differ
    everything = make_pool("rent", ScriptedPolicy(lambda q, i: []), "method.prompts_per_step=80")
    assert sorted(everything.draw(3)) == [0, 1, 2]  # a pool smaller than the draw: every question once


def test_ttrl_votes_over_all_rollouts_and_trains_the_first_n_against_the_label():
    responses = {
        # votes 5, 5, 7, 5 -> label "5" (3 of 4); the first two train and both agree
        QUESTIONS[0]: ["\\boxed{5}", "\\boxed{5}", "\\boxed{7}", "\\boxed{5}"],
        # votes 3, (none), 4, 4 -> label "4" (2 of 4, the no-answer "" has 1); the first two train: neither agrees
        QUESTIONS[1]: ["\\boxed{3}", "I do not know", "\\boxed{4}", "\\boxed{4}"],
        # votes 1, 2, 1, 2 -> a tie goes to the first seen: "1"; the first two train: 1 agrees, 2 does not
        QUESTIONS[2]: ["\\boxed{1}", "\\boxed{2}", "\\boxed{1}", "\\boxed{2}"],
    }
    player = ScriptedPolicy(lambda q, i: responses[q])
    pool = make_pool("ttrl", player, "method.votes=4", "player.n=2", "method.prompts_per_step=3")
    kept, metrics = pool.collect(step=1)
    order = pool.draw(1)
    assert player.generated == [([QUESTIONS[i] for i in order], 4)]  # every question voted with 4 rollouts
    expected = {0: ("5", [True, True], 0.75), 1: ("4", [False, False], 0.5), 2: ("1", [True, False], 0.5)}
    for problem, outcome in zip(kept.problems, kept.outcomes):
        label, agrees, share = expected[QUESTIONS.index(problem.text)]
        assert (outcome.pseudo_label, outcome.agrees, outcome.pass_rate) == (label, agrees, share)
    # the training rows are the first two of each group of four, in the draw's order
    assert kept.player_batch.batch["row"].tolist() == [g * 4 + i for g in range(3) for i in (0, 1)]
    assert kept.coach_batch is None and metrics["pool/questions"] == 3.0
    assert metrics["pool/label_share_mean"] == pytest.approx((0.75 + 0.5 + 0.5) / 3)


def test_rent_rewards_minus_the_mean_entropy_and_seven_without_a_box_through_the_update(tmp_path):
    responses = {q: ["\\boxed{1}", "\\boxed{2}"] for q in QUESTIONS}
    responses[QUESTIONS[1]] = ["no box here", "\\boxed{4}"]
    # each question's two rollouts, two tokens each: the entropies in nats
    entropies = {
        QUESTIONS[0]: torch.tensor([[1.0, 3.0], [2.0, 2.0]]),
        QUESTIONS[1]: torch.tensor([[0.5, 0.5], [1.0, 1.0]]),
        QUESTIONS[2]: torch.tensor([[4.0, 0.0], [2.0, 2.0]]),
    }
    player = ScriptedPolicy(lambda q, i: responses[q], entropies)
    cfg = compose_config(
        [f"trainer.default_local_dir={tmp_path}", "method=rent", "player.n=2", "method.prompts_per_step=3"]
    )
    val_set = ValidationSet("v", ["0", "1", "2"], QUESTIONS, ["5", "4", "4"])
    loop = CoachPlayerLoop(cfg, load_settings(cfg), None, player, val_set=val_set)
    kept, _ = loop.filter.collect(step=1)
    metrics = loop.update_player(kept)
    groups = [QUESTIONS.index(p.text) for p in kept.problems]
    # mean entropies: question 0 -> 2.0, 2.0; question 1 -> 0.5, 1.0; question 2 -> 2.0, 2.0. Question 1's
    # first rollout has no box: -7.0 instead of -0.5. Rewards per group, then GRPO (r - mean) / (std + 1e-6), std unbiased:
    rewards = {0: [-2.0, -2.0], 1: [-7.0, -1.0], 2: [-2.0, -2.0]}
    advantages = loop.player.updated.batch["advantages"][:, -1].tolist()
    for position, question in enumerate(groups):
        r = rewards[question]
        mean, std = sum(r) / 2, (((r[0] - r[1]) ** 2) / 2) ** 0.5  # unbiased std of two values: |a - b| / sqrt 2
        want = [(x - mean) / (std + 1e-6) for x in r]
        assert advantages[2 * position : 2 * position + 2] == pytest.approx(want, abs=1e-5)
    # a zero-variance group has zero advantage; the group with -7.0 and -1.0 has -/+ 1/sqrt(2)
    assert metrics["player/reward_mean"] == pytest.approx(sum(sum(v) for v in rewards.values()) / 6)
    assert loop.update_coach(kept, 0.1) == {}  # no Coach to update


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["method=ttrl", "player.n=65"], "player.n"),  # more trained than voted
        (["method=rent", "warmup.enabled=true"], "warmup.enabled"),  # no Coach to warm up
        (["method=rent", "method.entropy_window=last_fraction"], "method.last_fraction"),  # the window needs its share
        (["method=rent", "method.last_fraction=0.5"], "method.last_fraction"),  # a share with no window reads it
        (["method.name=r-zero"], "method.name"),
        (["method=rzero", "method.challenger_n=1"], "method.challenger_n"),  # a GRPO group of one
        (["method=rzero", "method.solver_steps=0"], "method.solver_steps"),
        (["method=rzero", "method.challenger_steps=-1"], "method.challenger_steps"),
        (["method=rzero", "method.solver_band_low=0.9"], "method.solver_band_low"),  # above the 0.8 high end
        (["method=rzero", "method.solver_band_high=1.5"], "method.solver_band_high"),
        (["method=rzero", "method.uncertainty=entropy"], "method.uncertainty"),
        (["method=rzero", "method.challenger_format=xml"], "method.challenger_format"),
        (["method=rzero", "method.reward_votes=0"], "method.reward_votes"),
    ],
)
def test_a_bad_method_setting_is_refused_naming_the_key(overrides, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_settings(load_settings(compose_config(overrides)))  # a section's check, or the method's


def test_random_rewards_replace_the_pseudo_labels_verdict_in_the_player_update(tmp_path):
    """``player.reward=random``, the null control: the update trains on coin flips, not on agreement."""
    from cpmobius.rewards import random_player_rewards

    # every rollout agrees with its label, so the paper's reward is 1 everywhere and every advantage 0
    player = ScriptedPolicy(lambda q, i: ["\\boxed{5}"] * 4)
    common = [f"trainer.default_local_dir={tmp_path}", "method=ttrl", "player.n=4", "method.votes=4"]
    val_set = ValidationSet("v", ["0", "1", "2"], QUESTIONS, ["5", "4", "4"])
    cfg = compose_config([*common, "method.prompts_per_step=3"])
    loop = CoachPlayerLoop(cfg, load_settings(cfg), None, player, val_set=val_set)
    kept, _ = loop.filter.collect(step=1)
    assert loop.update_player(kept)["player/reward_mean"] == 1.0
    assert loop.player.updated.batch["advantages"].abs().max() == 0.0

    cfg = compose_config([*common, "method.prompts_per_step=3", "player.reward=random", "seed=7"])
    loop = CoachPlayerLoop(cfg, load_settings(cfg), None, player, val_set=val_set)
    kept, _ = loop.filter.collect(step=1)
    metrics = loop.update_player(kept)
    coins = random_player_rewards(12, 0.5, seed=7, step=loop.state.step)
    assert 0 < sum(coins) < 12  # this seed's draw is mixed: some groups get advantages
    assert metrics["player/reward_mean"] == pytest.approx(sum(coins) / 12)
    advantages = loop.player.updated.batch["advantages"][:, -1]
    for group in range(3):  # each group's advantages follow its coins: positive where 1, negative where 0
        rewards, signs = coins[4 * group : 4 * group + 4], advantages[4 * group : 4 * group + 4]
        if 0 < sum(rewards) < 4:
            assert all((a > 0) == (r == 1.0) for a, r in zip(signs.tolist(), rewards))


def test_random_rewards_depend_on_seed_and_step_alone_and_hit_their_probability():
    from cpmobius.rewards import random_player_rewards

    assert random_player_rewards(64, 0.5, seed=1, step=3) == random_player_rewards(64, 0.5, seed=1, step=3)
    assert random_player_rewards(64, 0.5, seed=1, step=3) != random_player_rewards(64, 0.5, seed=1, step=4)
    assert random_player_rewards(64, 0.5, seed=1, step=3) != random_player_rewards(64, 0.5, seed=2, step=3)
    assert set(random_player_rewards(64, 0.0, seed=0, step=0)) == {0.0}
    assert set(random_player_rewards(64, 1.0, seed=0, step=0)) == {1.0}
    draws = random_player_rewards(20_000, 0.3, seed=0, step=0)
    assert sum(draws) / len(draws) == pytest.approx(0.3, abs=0.015)  # 4.6 standard errors
    with pytest.raises(ValueError):
        random_player_rewards(4, 1.5, seed=0, step=0)


@pytest.mark.parametrize(
    "override", ["player.reward=coin", "player.random_reward_p=1.5", "player.random_reward_p=-0.1"]
)
def test_a_bad_player_reward_setting_is_refused(override):
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        load_settings(compose_config([override]))
