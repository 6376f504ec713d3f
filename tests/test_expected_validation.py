"""``validation.metric=expected`` (the teacher-forced probability of the canonical correct response at the
Player's temperature), the toy default that uses it and the gentle world (``experiment=toy_gentle``) that
does not; fast, no Ray but one slow run."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from stand_ins import FAST_TOY

from cpmobius.config import ConfigError, compose_config
from cpmobius.engine.config import policy_config
from cpmobius.loop import CoachPlayerLoop
from cpmobius.prompts import PlayerPrompt
from cpmobius.settings import ValidationSettings, load_settings
from cpmobius.toy import world as tw
from cpmobius.toy.tiny_models import build_char_tokenizer, build_tiny_qwen2
from cpmobius.validation import ValidationSet, expected_accuracy, load_validation_set, measure_accuracy

TOY_SET = ValidationSet(
    "toy", ["toy-0", "toy-1"], ["What is 3 + 4?", "What is ((3 - 8))?"], ["7", "-5"], ["\\boxed{7}", "\\boxed{-5}"]
)


class StubPlayer:
    """A Player whose log-probs come from ``token_log_prob`` (one value per response token, 0 on padding) or,
    with ``model``, from a tiny Qwen2 scored the way verl's log-prob pass does (logits / temperature)."""

    def __init__(self, token_log_prob=None, model=None, temperature=0.6, texts=()):
        self.tokenizer = build_char_tokenizer()
        self.token_log_prob, self.model, self.temperature, self.texts = token_log_prob, model, temperature, texts
        self.scored = []

    def prompt_token_ids(self, prompts):
        kwargs = dict(add_generation_prompt=True, tokenize=True, return_dict=False)  # as `Policy.prompt_token_ids`
        return [list(self.tokenizer.apply_chat_template(p, **kwargs)) for p in prompts]

    def compute_log_probs(self, batch):
        self.scored.append(batch)
        mask = batch.batch["response_mask"].float()
        if self.model is None:
            return torch.full_like(mask, self.token_log_prob) * mask, torch.zeros_like(mask)
        width = batch.batch["responses"].shape[1]
        with torch.no_grad():
            logits = self.model(
                input_ids=batch.batch["input_ids"],
                attention_mask=batch.batch["attention_mask"],
                position_ids=batch.batch["position_ids"],
            ).logits[:, -width - 1 : -1]
        log_probs = torch.log_softmax(logits / self.logit_temperature(batch), dim=-1)
        picked = log_probs.gather(-1, batch.batch["responses"][..., None])[..., 0]
        return picked * mask, torch.zeros_like(mask)

    def logit_temperature(self, batch):
        """The temperature verl's log-prob pass divides the logits by: the worker input's, as `Policy` builds it."""
        from verl.utils import tensordict_utils as tu

        from cpmobius.engine.batches import worker_input

        return tu.get(worker_input(batch, self.temperature, calculate_entropy=True, compute_loss=False), "temperature")

    def activate(self):
        pass

    def generate(self, prompts, n=1, validate=False, greedy=False):
        return SimpleNamespace(batch={"response_mask": torch.ones(len(prompts) * n, 3)}, meta_info={})

    def decode_responses(self, batch):
        return list(self.texts), [False] * len(self.texts)


def test_expected_accuracy_is_the_product_of_the_canonical_responses_token_probabilities():
    player = StubPlayer(token_log_prob=math.log(0.5))
    # Byte tokenizer: "\boxed{7}" is 9 tokens, "\boxed{-5}" 10, each + <|im_end|>: 10 and 11 tokens at p = 1/2.
    assert expected_accuracy(player, TOY_SET) == pytest.approx([0.5**10, 0.5**11], rel=1e-6)  # float32 log-probs
    batch = player.scored[0]
    assert batch.batch["response_mask"].sum(-1).tolist() == [10, 11]
    tokenizer = player.tokenizer
    response = batch.batch["responses"][1].tolist()
    assert tokenizer.decode(response, skip_special_tokens=False) == "\\boxed{-5}<|im_end|>"
    # No temperature in the batch: verl's worker input then uses the Player's rollout.temperature.
    assert "temperature" not in batch.meta_info


def test_expected_accuracy_matches_an_independent_forward_of_the_tiny_model():
    """The padded, left-aligned batch scores each canonical response as one unpadded sequence would."""
    tokenizer = build_char_tokenizer()
    model = build_tiny_qwen2(tokenizer, seed=3).eval()
    prompt = PlayerPrompt()
    got = expected_accuracy(StubPlayer(model=model, temperature=0.6), TOY_SET, prompt)
    want = []
    for problem, response in zip(TOY_SET.problems, TOY_SET.canonical_responses):
        text = tokenizer.apply_chat_template(prompt.render([problem])[0], add_generation_prompt=True, tokenize=False)
        prompt_ids = tokenizer.encode(text, add_special_tokens=False)
        response_ids = tokenizer.encode(response + "<|im_end|>", add_special_tokens=False)
        ids = torch.tensor([prompt_ids + response_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1] / 0.6
        log_p = torch.log_softmax(logits.double(), -1).gather(-1, torch.tensor(response_ids)[:, None]).sum()
        want.append(math.exp(float(log_p)))
    assert got == pytest.approx(want, rel=1e-4)
    assert 0.0 < min(got) and max(got) < 1e-3  # an untrained model: some mass, far from certain


def test_expected_accuracy_scores_every_method_at_the_validation_temperature():
    """A baseline sampling at T = 1.0 (RENT, TTRL, R-Zero's released value) is scored at the toy's validation
    temperature, as CPMöbius's Player at 0.6 is; without one, at its own rollout temperature."""
    model = build_tiny_qwen2(build_char_tokenizer(), seed=3).eval()
    at_06 = expected_accuracy(StubPlayer(model=model, temperature=0.6), TOY_SET)
    hot = StubPlayer(model=model, temperature=1.0, texts=["\\boxed{7}", "\\boxed{-5}"])
    assert expected_accuracy(hot, TOY_SET, temperature=0.6) == pytest.approx(at_06, rel=1e-6, abs=0)
    assert expected_accuracy(hot, TOY_SET) != pytest.approx(at_06, rel=1e-2, abs=0)
    result = measure_accuracy(hot, TOY_SET, ValidationSettings(metric="expected", temperature=0.6))
    assert result.correct_per_problem == pytest.approx(at_06, rel=1e-6, abs=0)
    for method in ("rent", "ttrl", "rzero"):
        cfg = compose_config([f"method={method}"])
        assert (cfg.player.verl.rollout.temperature, cfg.validation.temperature) == (1.0, 0.6)
    with pytest.raises(ConfigError, match="validation.temperature"):
        load_settings(compose_config(["validation.temperature=0"]))


def test_the_worker_input_of_a_teacher_forced_batch_runs_at_the_players_temperature():
    from verl.utils import tensordict_utils as tu

    from cpmobius.engine.batches import token_rollouts, worker_input

    batch = token_rollouts([[5, 6, 7], [8]], [[1, 2], [3, 4, 9]], pad_token_id=0)
    assert batch.batch["input_ids"].tolist() == [[5, 6, 7, 1, 2, 0], [0, 0, 8, 3, 4, 9]]
    assert batch.batch["position_ids"].tolist() == [[0, 1, 2, 3, 4, 4], [0, 0, 0, 1, 2, 3]]
    assert batch.batch["response_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    td = worker_input(batch, 0.6, calculate_entropy=True, compute_loss=False)
    assert tu.get(td, "temperature") == pytest.approx(0.6)


def test_measure_accuracy_feeds_delta_t_the_expected_accuracy_and_keeps_the_greedy_one():
    player = StubPlayer(token_log_prob=math.log(0.5), texts=["\\boxed{7}", "The answer is -5."])
    settings = ValidationSettings(metric="expected")
    result = measure_accuracy(player, TOY_SET, settings)
    assert result.correct_per_problem == pytest.approx([0.5**10, 0.5**11])
    assert result.accuracy == pytest.approx((0.5**10 + 0.5**11) / 2)
    assert (result.greedy_accuracy, result.greedy_per_problem) == (0.5, [1.0, 0.0])  # one of two boxed right
    greedy = measure_accuracy(player, TOY_SET, ValidationSettings())
    assert (greedy.accuracy, greedy.greedy_accuracy) == (0.5, None)


def test_the_loop_logs_expected_and_greedy_accuracy_per_level():
    result = SimpleNamespace(
        accuracy=0.25,
        correct_per_problem=[0.5, 0.0],
        greedy_accuracy=0.5,
        greedy_per_problem=[1.0, 0.0],
        ood_accuracy=None,  # no out-of-distribution set: no val/ood_accuracy
    )
    loop = SimpleNamespace(difficulty_of=tw.problem_difficulty, val_set=TOY_SET)
    assert CoachPlayerLoop._accuracy_metrics(loop, result) == {
        "val/accuracy": 0.25,
        "val/accuracy_greedy": 0.5,
        "val/accuracy/d0": 0.5,
        "val/accuracy/d2": 0.0,
        "val/accuracy_greedy/d0": 1.0,
        "val/accuracy_greedy/d2": 0.0,
    }
    plain = SimpleNamespace(
        accuracy=0.5, correct_per_problem=[1.0, 0.0], greedy_accuracy=None, greedy_per_problem=None, ood_accuracy=None
    )
    assert "val/accuracy_greedy" not in CoachPlayerLoop._accuracy_metrics(loop, plain)


def test_the_toy_set_carries_the_toy_players_correct_responses():
    val_set = load_validation_set(ValidationSettings(size=10))
    assert val_set.canonical_responses == [f"\\boxed{{{answer}}}" for answer in val_set.answers]
    assert val_set.canonical_responses[3] == tw.player_target(tw.validation_problems(10, 1234)[3])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["validation.metric=sampled"], "must be one of"),
        (["validation.metric=expected", "validation.dataset=amc"], "validation.dataset=toy"),
        (["validation.metric=expected", "validation.greedy=false"], "validation.greedy=true"),
    ],
)
def test_a_bad_validation_metric_is_a_config_error_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=r"^validation\.metric: .*" + message):
        load_settings(compose_config(overrides))


def test_expected_accuracy_refuses_a_set_without_canonical_responses():
    with pytest.raises(ConfigError, match=r"validation\.metric"):
        expected_accuracy(StubPlayer(0.0), ValidationSet("amc", ["a"], ["What is 1?"], ["1"]))


def test_the_toy_default_measures_expected_accuracy_and_a_real_model_the_greedy_pass():
    assert load_settings(compose_config()).validation.metric == "expected"
    real = load_settings(compose_config(["model=qwen2p5_math_1p5b"]))
    assert real.validation.metric == "greedy" and real.filter.label_from == "all"
    assert not real.coach.world_problems_only


def test_the_toy_default_and_the_gentle_world_compose_with_their_values_and_their_own_model_folders():
    from cpmobius.toy.cache import _toy_record

    default, gentle = compose_config(), compose_config(["experiment=toy_gentle"])
    settings = load_settings(default)
    assert list(default.model.pretrain.player_unboxed) == [0.03, 0.55, 0.80, 0.92, 0.97]
    assert settings.filter.label_from == "answered" and settings.validation.metric == "expected"
    assert settings.coach.world_problems_only and settings.validation.dataset == "toy"
    assert policy_config(default, "coach").actor_rollout_ref.actor.optim.lr == pytest.approx(1.5e-4)
    old = load_settings(gentle)
    assert list(gentle.model.pretrain.player_unboxed) == [0.3, 0.6, 0.64, 0.68, 0.72]
    assert old.filter.label_from == "all" and old.validation.metric == "greedy"
    assert not old.coach.world_problems_only
    assert policy_config(gentle, "coach").actor_rollout_ref.actor.optim.lr == pytest.approx(5e-5)
    # the rest of the toy method is shared: the Player's LR, temperature, validation set
    for cfg in (default, gentle):
        assert policy_config(cfg, "player").actor_rollout_ref.actor.optim.lr == pytest.approx(1.5e-4)
        assert policy_config(cfg, "player").actor_rollout_ref.rollout.temperature == pytest.approx(0.6)
        assert load_settings(cfg).validation.size == 64 and load_settings(cfg).validation.greedy
    # Each prior pretrains its own models (another cache record) in its own folders: neither replaces the other's.
    records = [
        _toy_record(settings.coach.instruction, dict(c.model.tiny_spec), tw.PretrainSpec(**c.model.pretrain))
        for c in (default, gentle)
    ]
    assert records[0] != records[1]
    assert {gentle.model.player_path, gentle.model.coach_path}.isdisjoint(
        {default.model.player_path, default.model.coach_path}
    )
    assert gentle.trainer.default_local_dir != default.trainer.default_local_dir


@pytest.mark.slow
def test_the_gentle_world_runs_two_steps_on_the_greedy_pass(tmp_path, model_cache):
    """``experiment=toy_gentle`` end to end (the greedy Δt and the paper's filter rule, which the default's run
    does not take), shrunk: the quick toy world's models in place of the gentle prior's (`stand_ins.FAST_TOY`, on
    this CPU's own kernels, so the in-process loop tests' cached models serve and nothing is pretrained here), no
    warm-up, 10 validation problems, m = 2, n = 4."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "run"
    command = [
        *(sys.executable, "-m", "cpmobius.main", "experiment=toy_gentle"),
        *(
            f"model.cache_dir={model_cache / 'fast_toy'}",
            f"trainer.default_local_dir={out}",
            f"hydra.run.dir={out / 'hydra'}",
        ),
        *FAST_TOY,
        # the quick world's own folders (the gentle preset keeps its prior's models apart), on the loop tests' kernels
        *(
            "model.coach_path=${model.cache_dir}/seed${seed}/tiny-coach",
            "model.player_path=${model.cache_dir}/seed${seed}/tiny-player",
        ),
        "backend.portable_kernels=false",
        *("validation.size=10", "filter.quota=2", "player.n=4"),
        "trainer.total_training_steps=2",
    ]
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    header = next(line for line in done.stdout.splitlines() if line.split()[:2] == ["step", "val_acc"])
    assert "greedy" not in header.split() and "c_level" in header.split()
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    by_step = {entry["step"]: entry["data"] for entry in logged if "step" in entry}
    for step in (0, 1, 2):
        data = by_step[step]
        # the greedy pass counts whole problems: a multiple of 1/10, and no second accuracy beside it
        assert data["val/accuracy"] * 10 == pytest.approx(round(data["val/accuracy"] * 10))
        assert "val/accuracy_greedy" not in data and "val/accuracy/d0" in data
    assert all("val/delta_t" in by_step[step] for step in (1, 2))
