"""Shared fixtures. The test folder is deliberately not a package (verl's wheel installs `tests`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def load_script():
    """Import one of the repository's scripts by its path: ``load_script("benchmarks/bench_step_gpu.py")``."""

    def load(relative: str):
        path = REPO_ROOT / relative
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def scripted_coach():
    """``scripted_coach(texts)``: a Coach (`stand_ins.ScriptedPolicy`) whose batch rows are the given responses,
    in order, each finished (not cut at the length limit)."""
    from stand_ins import ScriptedPolicy

    return lambda texts: ScriptedPolicy(lambda prompt, i: [texts[i]])


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch missing
        has_cuda = False
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if item.fspath.basename.endswith("_gpu.py"):
            item.add_marker(pytest.mark.gpu)
            if not has_cuda:
                item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    """A per-session cache folder for locally built tiny models, shared by the runs of the default toy world
    (seed 0). A run asking for other pretraining settings replaces the models of its folder, so each other
    setting takes a subfolder of its own (``model_cache / "fast_toy"``): alternating settings in one folder
    pretrained the default world three times over in one run of the suite."""
    return tmp_path_factory.mktemp("cpmobius_models")


@pytest.fixture
def hub_offline(monkeypatch) -> None:
    """The Hugging Face hub switched off in this process, as ``HF_HUB_OFFLINE=1`` does for a fresh one: the
    variable alone is read once, when huggingface_hub is first imported, so a test that only sets it would try the
    unreachable hub five times over 25 s before each hub id fails."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.fixture
def benchmark_dir(tmp_path):
    """Factory: ``benchmark_dir({bench: [gold, ...]})`` writes ``tmp_path/data/<bench>/<bench>.jsonl``
    (problem i of ``bench`` has id ``<bench>-i`` and answer ``golds[bench][i]``) and returns ``tmp_path/data``."""
    from cpmobius.jsonl import write_jsonl

    def make(golds: dict[str, list[str]]) -> Path:
        root = tmp_path / "data"
        for bench, answers in golds.items():
            write_jsonl(
                root / bench / f"{bench}.jsonl",
                [
                    {"id": f"{bench}-{i}", "problem": f"Problem {i}?", "answer": a, "alt_answers": []}
                    for i, a in enumerate(answers)
                ],
            )
        return root

    return make


# --------------------------------------------------------------------------- two policies on verl


def start_two_policies(overrides: list[str], tiny_spec: dict | None = None):
    """Ray + the Coach and the Player on one resource pool (verl workers, HF rollout servers).

    Returns ``(policies, guard, timings_s)``; the caller shuts Ray down.
    """
    import time

    import ray

    from cpmobius.config import compose_config
    from cpmobius.engine.config import apply_env_to_driver, build_policy_configs, ray_init_kwargs
    from cpmobius.engine.policy import Policy
    from cpmobius.engine.sharing import EngineGuard, make_resource_pool
    from cpmobius.toy.tiny_models import materialize_tiny_model

    timings = {}
    start = time.perf_counter()
    cfg = compose_config(overrides)
    apply_env_to_driver(cfg)
    import cpmobius.engine.extensions  # noqa: F401  (registers the platform and the HF rollout in the driver)

    materialize_tiny_model(cfg.model.coach_path, spec=tiny_spec, seed=1)
    materialize_tiny_model(cfg.model.player_path, spec=tiny_spec, seed=2)
    configs = build_policy_configs(cfg)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(**ray_init_kwargs(cfg))
    pool = make_resource_pool(cfg)
    guard = EngineGuard()
    policies = {}
    for name in ("coach", "player"):
        t = time.perf_counter()
        policies[name] = Policy(name, configs[name], pool, guard).start()
        timings[f"start_{name}"] = time.perf_counter() - t
    timings["start_total"] = time.perf_counter() - start
    return policies, guard, timings


def unpad_row(batch, row: int) -> tuple[list[int], list[int]]:
    """(prompt ids, response ids) of one row of a generated batch, padding removed."""
    prompt_len = batch.batch["prompts"].shape[1]
    mask = batch.batch["attention_mask"][row]
    prompt = batch.batch["prompts"][row][mask[:prompt_len].bool()].tolist()
    response = batch.batch["responses"][row][batch.batch["response_mask"][row].bool()].tolist()
    return prompt, response


def served_log_probs(policy, prompt, response) -> "torch.Tensor":
    """Log-probs of ``response`` under the policy's rollout server, woken (synced) first.

    The HF server scores a sequence directly; a vLLM server returns prompt log-probs of
    ``prompt + response`` (raw logits: temperature 1, no repetition penalty).
    """
    import uuid

    import ray
    import torch

    policy.activate()
    server = policy.server_handles()[0]
    if policy.config.actor_rollout_ref.rollout.name != "vllm":
        return torch.tensor(ray.get(server.compute_log_probs.remote(prompt, response)))
    params = {"max_tokens": 1, "temperature": 1.0, "top_p": 1.0, "repetition_penalty": 1.0, "prompt_logprobs": 0}
    output = ray.get(
        server.generate.remote(prompt_ids=prompt + response, sampling_params=params, request_id=uuid.uuid4().hex)
    )
    scored = output.extra_fields["prompt_logprobs"]  # entry j: the log-prob of token j + 1
    return torch.tensor([scored[len(prompt) - 1 + i][0] for i in range(len(response))])


def trained_log_probs(policy, batch, row: int) -> "torch.Tensor":
    """The trainer's log-probs of one row's response at logit temperature 1 (raw, like the server)."""
    batch.meta_info["temperature"] = 1.0
    log_probs, _ = policy.compute_log_probs(batch)
    return log_probs[row][batch.batch["response_mask"][row].bool()]


def take_update(policy, batch) -> dict:
    """One update with fixed ±1 sequence advantages (rows alternate), through verl's update_actor."""
    import torch

    batch.meta_info["temperature"] = 1.0
    old, _ = policy.compute_log_probs(batch)
    batch.batch["old_log_probs"] = old
    if policy.uses_reference:
        batch.batch["ref_log_prob"] = policy.compute_ref_log_probs(batch)
    signs = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(batch))])[:, None]
    batch.batch["advantages"] = signs * batch.batch["response_mask"].float()
    return policy.update(batch)


def check_two_policies(
    policies, guard, tmp_path, atol: float = 1e-4, repeat_atol: float = 1e-6, min_change: float | None = None
) -> dict:
    """The two-policy acceptance checks; returns per-phase timings in seconds.

    1. each policy generates (the guard keeps one engine awake);
    2. each takes an update; the served log-prob of a fixed response changes for the updated
       policy only, and matches the trainer's (the weights really synced);
    3. save → more training → load restores identical greedy outputs and log-probs.

    ``atol``: served vs trained log-probs; ``repeat_atol``: the same weights served twice;
    ``min_change``: how far one update must move a served log-prob (default ``10 * atol``).
    """
    import time

    import pytest
    import torch

    coach, player = policies["coach"], policies["player"]
    min_change = 10 * atol if min_change is None else min_change
    timings = {}
    prompts = [[{"role": "user", "content": "What is 12 + 30?"}], [{"role": "user", "content": "Solve 2x = 8."}]]

    t = time.perf_counter()
    player.activate()
    timings["activate_player"] = time.perf_counter() - t
    t = time.perf_counter()
    player_batch = player.generate(prompts, n=2)
    timings["generate_player_4"] = time.perf_counter() - t
    assert player_batch.batch["responses"].shape[0] == 4
    assert len(set(player_batch.non_tensor_batch["uid"])) == 2  # one uid per group of n
    prompt, response = unpad_row(player_batch, 0)
    assert len(response) > 0

    coach.activate()
    assert guard.awake is coach and not player.is_active
    with pytest.raises(RuntimeError, match="activate"):
        player.generate(prompts, n=1)
    coach_batch = coach.generate([[{"role": "user", "content": "Generate a valid math problem."}]], n=2)
    assert coach_batch.batch["responses"].shape[0] == 2

    # The same token sequence, scored by each policy's served model and trainer.
    served_player_0 = served_log_probs(player, prompt, response)
    served_coach_0 = served_log_probs(coach, prompt, response)
    assert torch.allclose(served_player_0, trained_log_probs(player, player_batch, 0), atol=atol)

    t = time.perf_counter()
    metrics = take_update(player, player_batch)
    timings["update_player"] = time.perf_counter() - t
    assert {"actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/lr"} <= set(metrics)
    t = time.perf_counter()
    player.activate()
    timings["activate_player_sync"] = time.perf_counter() - t
    served_player_1 = served_log_probs(player, prompt, response)
    assert (served_player_1 - served_player_0).abs().max() > min_change, "the update did not reach the server"
    assert torch.allclose(served_player_1, trained_log_probs(player, player_batch, 0), atol=atol)
    coach.activate()
    assert torch.allclose(served_log_probs(coach, prompt, response), served_coach_0, atol=repeat_atol)

    take_update(coach, coach_batch)
    coach.activate()
    assert (served_log_probs(coach, prompt, response) - served_coach_0).abs().max() > min_change
    assert torch.allclose(served_log_probs(player, prompt, response), served_player_1, atol=repeat_atol)

    # save → load restores identical outputs
    player.activate()
    greedy_before = player.generate(prompts, n=1, greedy=True)
    t = time.perf_counter()
    player.save(str(tmp_path / "player"))
    timings["save_player"] = time.perf_counter() - t
    saved_log_probs = trained_log_probs(player, player_batch, 0)
    take_update(player, player_batch)
    assert not torch.allclose(trained_log_probs(player, player_batch, 0), saved_log_probs, atol=atol)
    t = time.perf_counter()
    player.load(str(tmp_path / "player"))
    timings["load_player"] = time.perf_counter() - t
    assert torch.allclose(trained_log_probs(player, player_batch, 0), saved_log_probs, atol=1e-6)
    player.activate()
    greedy_after = player.generate(prompts, n=1, greedy=True)
    assert torch.equal(greedy_after.batch["responses"], greedy_before.batch["responses"])
    timings["engine_switches"] = guard.switches
    return timings


def response_ids(batch) -> list[list[int]]:
    """Each row's response token ids, padding removed."""
    return [
        batch.batch["responses"][row][batch.batch["response_mask"][row].bool()].tolist() for row in range(len(batch))
    ]


def check_greedy_validation(player) -> None:
    """Greedy validation is greedy, the reported sampling values are the ones used, and a prompt over
    ``rollout.prompt_length`` is refused. The policy's ``val_kwargs`` must be a sampled setting (T = 1).

    verl 0.9.1 ignores the per-row greedy flag when ``validate=True``: before the fix the "greedy"
    passes below were sampled at T = 1.0 and differed.
    """
    from cpmobius.engine.agent_loop import PromptTooLongError

    player.activate()
    prompts = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(3)]
    first = player.generate(prompts, n=2, validate=True, greedy=True)
    second = player.generate(prompts, n=2, validate=True, greedy=True)
    assert response_ids(first) == response_ids(second)
    assert response_ids(first)[0::2] == response_ids(first)[1::2]  # the two rollouts of a group agree
    assert first.meta_info["sampling"] == {"temperature": 0.0, "top_p": 1.0, "top_k": -1.0}
    assert first.meta_info["temperature"] == 0.0
    sampled = player.generate(prompts, n=2, validate=True)
    assert sampled.meta_info["sampling"]["temperature"] == 1.0  # val_kwargs, as reported by the rollout
    assert response_ids(sampled) != response_ids(player.generate(prompts, n=2, validate=True))
    limit = player.max_prompt_tokens
    with pytest.raises(PromptTooLongError, match=rf"1 of 2 prompts exceed rollout.prompt_length={limit}.*prompt 1 has"):
        player.generate([prompts[0], [{"role": "user", "content": "x" * (limit + 10)}]], n=1, validate=True)


@pytest.fixture(scope="session")
def harness():
    """The two-policy helpers above, for test modules (the test folder is not importable)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        start_two_policies=start_two_policies,
        check_two_policies=check_two_policies,
        unpad_row=unpad_row,
        served_log_probs=served_log_probs,
        trained_log_probs=trained_log_probs,
        take_update=take_update,
        check_greedy_validation=check_greedy_validation,
    )


# --------------------------------------------------------------------------- real models


def check_one_eos_story(folder) -> tuple[int, int]:
    """Tokenizer, config.json and generation_config.json of a converted folder agree; returns (eos, pad) ids."""
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    from cpmobius.engine.stop_tokens import stop_token_ids

    tokenizer = AutoTokenizer.from_pretrained(folder)
    config, generation = AutoConfig.from_pretrained(folder), GenerationConfig.from_pretrained(folder)
    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert (tokenizer.eos_token_id, tokenizer.pad_token_id) == (eos, pad) and eos != pad
    assert (config.eos_token_id, config.pad_token_id) == (eos, pad)
    assert (generation.eos_token_id, generation.pad_token_id) == ([eos, pad], pad)
    for key in ("repetition_penalty", "temperature", "top_p", "top_k"):  # no sampling defaults hidden in the folder
        assert getattr(generation, key) in (None, 1.0, 50), key
    assert stop_token_ids(tokenizer, generation) == tuple(sorted({eos, pad}))
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 3 + 4?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.rstrip().endswith("<|im_start|>assistant") and "<|im_end|>" in prompt  # turns end with the EOS
    return eos, pad


@pytest.fixture
def one_eos_story():
    """`check_one_eos_story`, for test modules (the test folder is not importable)."""
    return check_one_eos_story
