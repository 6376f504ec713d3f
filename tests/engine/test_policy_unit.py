"""Policy updates and best-Player saves without Ray: padding rows carry no loss; an interrupted save loses nothing."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf

from cpmobius.engine.agent_loop import PromptTooLongError
from cpmobius.engine.policy import Policy


class RecordingWorkers:
    """Stands in for the verl worker group: records what `update_actor` receives."""

    world_size = 1

    def __init__(self) -> None:
        self.received = None

    def update_actor(self, td):
        self.received = td
        return {"metrics": {"pg_loss": [0.5]}}


def make_batch(rows: int, prompt: int = 3, response: int = 4):
    from verl import DataProto

    ids = torch.randint(5, 50, (rows, prompt + response))
    mask = torch.ones(rows, prompt + response, dtype=torch.long)
    return DataProto.from_dict(
        tensors={
            "input_ids": ids,
            "attention_mask": mask,
            "position_ids": torch.arange(prompt + response).repeat(rows, 1),
            "prompts": ids[:, :prompt],
            "responses": ids[:, prompt:],
            "response_mask": torch.ones(rows, response),
            "old_log_probs": torch.zeros(rows, response),
            "advantages": torch.ones(rows, response),
        },
        meta_info={"temperature": 1.0},
    )


def test_padding_rows_carry_no_loss_and_do_not_count_as_sequences(monkeypatch):
    from verl.utils import tensordict_utils as tu

    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "actor": {
                    "ppo_micro_batch_size_per_gpu": 4,
                    "use_kl_loss": False,
                    "calculate_entropy": False,
                    "entropy_coeff": 0.0,
                    "ppo_epochs": 1,
                    "data_loader_seed": 0,
                },
                "rollout": {"log_prob_micro_batch_size_per_gpu": 4, "temperature": 1.0},
                "ref": {"log_prob_micro_batch_size_per_gpu": 4},
            }
        }
    )
    policy = Policy.__new__(Policy)
    policy.name, policy.config, policy.global_steps = "coach", config, 0
    policy.worker_group = RecordingWorkers()
    monkeypatch.setattr(Policy, "_release_engine", lambda self: None)
    monkeypatch.setattr(tu, "get", lambda output, key: {"pg_loss": [0.5]} if key == "metrics" else output[key])
    metrics = policy.update(make_batch(3))
    td = policy.worker_group.received
    assert metrics["actor/pg_loss"] == 0.5 and policy.global_steps == 1
    assert td["global_batch_size"] == 3  # the real sequences: seq-mean losses divide by this
    assert td["mini_batch_size"] == 4  # all four rows (one padding row) go through one optimizer step
    assert td.batch_size[0] == 4
    loss_mask = td["loss_mask"] if "loss_mask" in td.keys() else td["response_mask"]
    per_row = [float(row.sum()) for row in loss_mask.unbind(0)]
    assert per_row[:3] == [4.0, 4.0, 4.0] and per_row[3] == 0.0


class FolderPolicy:
    """Stands in for a Policy: `save` writes a weights file, optionally dying half-way."""

    def __init__(self, weights: str, die: bool = False) -> None:
        self.weights, self.die = weights, die

    def save(self, path: str) -> None:
        from pathlib import Path

        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "weights.txt").write_text(self.weights[: len(self.weights) // 2] if self.die else self.weights)
        if self.die:
            raise KeyboardInterrupt("killed mid-save")


def test_best_player_save_is_atomic_and_carries_its_score(tmp_path):
    import pytest

    from cpmobius.checkpoint import read_best_record, save_best_policy

    best = tmp_path / "best_player"
    assert read_best_record(best) is None
    save_best_policy(best, FolderPolicy("weights-of-step-3"), 0.25, 3)
    assert read_best_record(best) == {"score": 0.25, "step": 3}
    with pytest.raises(KeyboardInterrupt):
        save_best_policy(best, FolderPolicy("weights-of-step-7", die=True), 0.5, 7)
    # the interrupted save left the earlier best whole, with its own score
    assert (best / "weights.txt").read_text() == "weights-of-step-3" and read_best_record(best)["score"] == 0.25
    save_best_policy(best, FolderPolicy("weights-of-step-9"), 0.75, 9)
    assert (best / "weights.txt").read_text() == "weights-of-step-9" and read_best_record(best) == {
        "score": 0.75,
        "step": 9,
    }
    # killed between the two renames: the previous copy is put back
    best.rename(tmp_path / ".best_player.previous")
    assert read_best_record(best) == {"score": 0.75, "step": 9} and (best / "weights.txt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best_player"]


class RecordingPolicy:
    """Records `start_policies`'s calls; its rollout start waits at ``gate`` (a barrier) for 2 s at most."""

    def __init__(self, name, calls, profiles_memory_at_start=True, gate=None):
        self.name, self.calls, self.profiles_memory_at_start, self.gate = name, calls, profiles_memory_at_start, gate

    def start_models(self):
        self.calls.append(("start_models", self.name))

    def wait_models(self):
        self.calls.append(("wait_models", self.name))

    def start_rollout(self):
        self.calls.append(("start_rollout", self.name))
        if self.gate is not None:
            try:
                self.gate.wait(timeout=2)
            except threading.BrokenBarrierError:
                self.calls.append(("started_alone", self.name))
        self.calls.append(("rollout_started", self.name))


def test_start_policies_builds_every_model_before_any_rollout_server_starts():
    """vLLM profiles device memory while its engine starts: no model build (which offloads) may run then,
    nor another engine's start (the first's sleep frees memory)."""
    from cpmobius.engine.sharing import start_policies

    calls = []

    player = RecordingPolicy("player", calls)
    coach = RecordingPolicy("coach", calls, profiles_memory_at_start=False)
    assert start_policies(player, coach) == (player, coach)
    first_rollout = min(i for i, (op, _) in enumerate(calls) if op == "start_rollout")
    last_build = max(i for i, (op, _) in enumerate(calls) if op in ("start_models", "wait_models"))
    assert last_build < first_rollout
    assert [c for c in calls if c[0] == "start_models"] == [("start_models", "player"), ("start_models", "coach")]
    assert calls[-4:] == [
        ("start_rollout", "player"),
        ("rollout_started", "player"),
        ("start_rollout", "coach"),
        ("rollout_started", "coach"),
    ]


def test_engines_with_a_fixed_kv_cache_start_at_once():
    """Neither engine profiles memory: the second starts while the first is still starting (both wait at one
    barrier; one after the other, the first would wait out its 2 s alone)."""
    from cpmobius.engine.sharing import start_policies

    calls, gate = [], threading.Barrier(2)
    policies = [RecordingPolicy(name, calls, profiles_memory_at_start=False, gate=gate) for name in ("player", "coach")]
    started = time.perf_counter()
    start_policies(*policies)
    assert time.perf_counter() - started < 1.5
    assert [op for op, _ in calls[4:6]] == ["start_rollout", "start_rollout"]
    assert not [c for c in calls if c[0] == "started_alone"]


def test_a_policys_start_up_error_reaches_the_caller_when_engines_start_at_once():
    import pytest

    from cpmobius.engine.sharing import start_policies

    class Failing(RecordingPolicy):
        def start_rollout(self):
            raise ValueError("Free memory on device is less than desired GPU memory utilization")

    calls = []
    with pytest.raises(ValueError, match="Free memory"):
        start_policies(RecordingPolicy("player", calls, False), Failing("coach", calls, False))


def test_a_vllm_engine_profiles_memory_unless_its_kv_cache_is_fixed():
    def policy(rollout):
        return Policy("player", OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}}), None, None)

    assert policy({"name": "vllm"}).profiles_memory_at_start
    assert policy({"name": "vllm", "engine_kwargs": {"vllm": {"kv_cache_memory_bytes": None}}}).profiles_memory_at_start
    assert not policy(
        {"name": "vllm", "engine_kwargs": {"vllm": {"kv_cache_memory_bytes": 2**34}}}
    ).profiles_memory_at_start
    assert not policy({"name": "hf"}).profiles_memory_at_start


def test_waiting_for_models_never_started_is_an_error():
    import pytest

    policy = Policy("coach", OmegaConf.create({}), None, None)
    with pytest.raises(RuntimeError, match="start_models"):
        policy.wait_models()
    with pytest.raises(RuntimeError, match="start_models"):
        policy.start_rollout()


def test_each_distinct_prompt_is_tokenised_once():
    """The filter counts a candidate's prompt and `generate` checks it again: one tokenisation, same counts."""

    class CountingTokenizer:
        calls = 0

        def apply_chat_template(self, messages, **kwargs):
            CountingTokenizer.calls += 1
            return list(range(sum(len(m["content"]) for m in messages) + 3))

    config = {"data": {}, "actor_rollout_ref": {"rollout": {"prompt_length": 7}}}
    policy = Policy("player", OmegaConf.create(config), None, None)
    policy._model_config = SimpleNamespace(tokenizer=CountingTokenizer())
    prompts = [[{"role": "user", "content": "1+1"}], [{"role": "user", "content": "2*3+4"}]]
    assert policy.count_prompt_tokens(prompts) == [6, 8]
    same_text_other_role = [{"role": "system", "content": "1+1"}]
    assert policy.count_prompt_tokens([*prompts, prompts[0], same_text_other_role]) == [6, 8, 6, 6]
    assert CountingTokenizer.calls == 3
    with pytest.raises(
        PromptTooLongError, match="1 of 2 prompts exceed rollout.prompt_length=7 tokens.*prompt 1 has 8"
    ):
        policy.prompt_tokens.check(prompts)
    assert CountingTokenizer.calls == 3
