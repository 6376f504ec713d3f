"""The toy world's out-of-distribution set (``validation.ood_dataset=toy_ood``, `cpmobius.toy.ood`): disjoint from
the validation set and from what the Coach may write, scored beside validation every step for every method, by its
expected accuracy alone when Δt is (no decoded pass: the run samples as before). Fast, no Ray but one slow run."""

from __future__ import annotations

import json

import pytest
from stand_ins import ScriptedPolicy

from cpmobius.config import ConfigError, compose_config
from cpmobius.jsonl import write_jsonl
from cpmobius.loop import CoachPlayerLoop
from cpmobius.methods import table_columns
from cpmobius.settings import ValidationSettings, load_settings
from cpmobius.toy import ood
from cpmobius.toy import world as tw
from cpmobius.toy.tiny_models import build_char_tokenizer
from cpmobius.validation import ValidationSet, load_ood_set, measure_accuracy


def test_the_ood_set_holds_no_problem_of_the_world_and_none_of_the_validation_sets():
    problems = ood.ood_problems(600, seed=1234)
    validation = {p.text for p in tw.validation_problems(600, 1234)}
    assert not validation & {p.text for p in problems}
    # no OOD text is one of the world's levelled problems: the validation set cannot hold it, and the toy
    # default's Coach (coach.world_problems_only) has such text rejected as off_world, so no step trains on it
    assert all(tw.problem_difficulty(p.text) is None for p in problems)
    for p in problems:  # the answer is the arithmetic's, whatever the form
        expression = p.text.replace("Compute ", "").replace("What is ", "").strip("?.").strip("[]()")
        assert p.answer == str(tw.integer_arithmetic(expression.replace("[", "(").replace("]", ")")))


def test_the_ood_set_is_fixed_by_its_seed_and_weighs_every_form_and_depth_alike():
    problems = ood.ood_problems(ood.OOD_SIZE, seed=1234)
    assert problems == ood.ood_problems(ood.OOD_SIZE, seed=1234) != ood.ood_problems(ood.OOD_SIZE, seed=1)
    cells = [(p.form, p.depth) for p in problems]
    assert {cells.count(cell) for cell in ood.OOD_CELLS} == {5} and len(ood.OOD_CELLS) == 12
    assert [p.text for p in problems[:3]] == ["What is [0 * 5]?", "What is [[1 + 9]]?", "What is [[[8 - 6]]]?"]
    assert (problems[4].text, problems[8].text) == ("What is 3*1?", "Compute 3 - 7.")  # the cells take turns


def test_load_ood_set_reads_the_toy_set_a_file_or_none(tmp_path):
    toy = load_ood_set(ValidationSettings(ood_dataset="toy_ood"))
    assert (toy.name, len(toy)) == ("toy_ood", 60) and toy.ids[0] == "toy-ood-brackets1-0"
    assert toy.canonical_responses[0] == f"\\boxed{{{toy.answers[0]}}}"  # what the expected accuracy scores
    assert len(load_ood_set(ValidationSettings(ood_dataset="toy_ood", ood_size=7))) == 7
    assert load_ood_set(ValidationSettings()) is None
    path = tmp_path / "ood.jsonl"
    write_jsonl(path, [{"problem": "Q1?", "answer": "1"}, {"problem": "Q2?", "answer": "2"}])
    assert load_ood_set(ValidationSettings(ood_dataset=str(path), ood_size=1)).problems == ["Q1?"]
    with pytest.raises(ConfigError, match=r"validation.ood_dataset .*no file"):
        load_ood_set(ValidationSettings(ood_dataset=str(tmp_path / "missing.jsonl")))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["validation.ood_dataset=toy"], r"validation.ood_dataset: is the validation set itself"),
        (["validation.ood_dataset=minerva_math"], r"validation.ood_dataset: .*toy_ood or null"),
        (["validation.ood_size=0"], r"validation.ood_size: must be >= 1"),
    ],
)
def test_bad_ood_settings_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(compose_config(overrides))


def test_every_method_of_the_toy_world_scores_the_ood_set_and_shows_it_in_its_table():
    for method in ("cpmobius", "ttrl", "rent", "rzero"):
        assert load_settings(compose_config([f"method={method}"])).validation.ood_dataset == "toy_ood", method
        labels = [label for _, _, label in table_columns(method, method == "cpmobius", True, ood=True)]
        assert labels[: 4 if method == "cpmobius" else 3][-1] == "ood", labels  # beside the accuracies
    gentle = load_settings(compose_config(["experiment=toy_gentle"])).validation
    assert gentle.ood_dataset is None  # as its tables were made
    assert load_settings(compose_config(["model=qwen2p5_math_1p5b"])).validation.ood_dataset is None


def scoring_player() -> ScriptedPolicy:
    """Every response token has probability 1/2 under the teacher-forced pass; every decoded sample answers 4."""
    return ScriptedPolicy(lambda question, i: ["\\boxed{4}"] * 8, token_prob=0.5, tokenizer=build_char_tokenizer())


def prompts_per_pass(player: ScriptedPolicy) -> list[int]:
    """How many prompts each decoded pass answered."""
    return [len(prompts) for prompts, _ in player.generated]


VAL = ValidationSet("toy", ["a"], ["What is 2 + 2?"], ["4"], ["\\boxed{4}"])
OOD = ValidationSet(
    "toy_ood", ["b", "c"], ["Compute 2 * 2.", "What is [3 - 7]?"], ["4", "-4"], ["\\boxed{4}", "\\boxed{-4}"]
)


def test_with_expected_accuracy_the_ood_set_is_scored_without_a_decoded_pass():
    player = scoring_player()
    result = measure_accuracy(player, VAL, ValidationSettings(metric="expected", ood_dataset="toy_ood"), ood_set=OOD)
    # "\boxed{4}" + <|im_end|>: 10 tokens at 1/2; "\boxed{-4}": 11 -> (2^-10 + 2^-11) / 2
    assert result.ood_accuracy == pytest.approx((0.5**10 + 0.5**11) / 2, rel=1e-5)
    assert prompts_per_pass(player) == [1] and result.ood_response_tokens == 0  # the validation set's greedy pass only
    decoded = scoring_player()
    result = measure_accuracy(decoded, VAL, ValidationSettings(ood_dataset="toy_ood"), ood_set=OOD)
    assert result.ood_accuracy == pytest.approx(0.5) and prompts_per_pass(decoded) == [1, 2]  # "4" is right once of two
    assert result.ood_response_tokens == 2 * 2  # one greedy response a problem, of the stand-in's 2 tokens


def test_a_baseline_logs_the_ood_accuracy_at_step_0_and_after_every_update(tmp_path):
    cfg = compose_config([f"trainer.default_local_dir={tmp_path}", "method=ttrl", "player.n=2", "method.votes=2"])
    loop = CoachPlayerLoop(cfg, load_settings(cfg), None, scoring_player(), val_set=VAL, ood_set=OOD)
    logged = []
    loop._log = lambda data, step: logged.append((step, data))
    loop.step = lambda: loop.validate()[1]  # validation only: the scripted Player cannot train
    cfg.trainer.total_training_steps, cfg.trainer.resume_mode, cfg.trainer.save_freq = 1, "disable", 0
    loop.save = lambda: None
    loop.fit()
    expected = (0.5**10 + 0.5**11) / 2
    assert [(step, data["val/ood_accuracy"]) for step, data in logged] == [
        (0, pytest.approx(expected, rel=1e-5)),
        (1, pytest.approx(expected, rel=1e-5)),
    ]
    assert json.dumps(logged[1][1]["val/ood_accuracy"])  # a plain float, for the metrics file
