"""Policy updates and best-Player saves without Ray: padding rows carry no loss; an interrupted save loses nothing."""

from __future__ import annotations

import signal
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


class FakeGate:
    """Stands in for the `ModelsBuilt` actor: `open.remote()` sets ``opened``; `start_gate` hands out one each."""

    def __init__(self):
        self.opened = threading.Event()
        self.open = SimpleNamespace(remote=self.opened.set)


class RecordingPolicy:
    """Records `start_policies`'s calls. Its server launch stands for verl's: it asks the workers for their
    devices, then its server actor exists (a name `ray.util.list_named_actors` lists, see `start_world`), then
    its engine waits for the policy's gate (2 s at most), then at ``gate`` (a barrier shared by the policies)."""

    def __init__(self, name, calls, profiles_memory_at_start=True, gate=None, world=None, creates_actor=True):
        self.name, self.calls, self.profiles_memory_at_start, self.gate = name, calls, profiles_memory_at_start, gate
        self.world, self.creates_actor = world, creates_actor
        self.config = OmegaConf.create(
            {"actor_rollout_ref": {"rollout": {"name": "hf", "custom": {"policy_name": name}}}}
        )
        self.building = threading.Event()
        self.launch_s = 0.1  # until the workers' answers are in

    def start_workers(self):
        self.calls.append(("start_workers", self.name))
        return self

    def begin_model_build(self):
        self.calls.append(("begin_model_build", self.name))
        self.building.set()
        return self

    def start_models(self):
        return self.start_workers().begin_model_build()

    def wait_models(self):
        self.calls.append(("wait_models", self.name))
        return self

    def launch_servers(self):
        self.calls.append(("query_workers", self.name))
        time.sleep(self.launch_s)
        if self.creates_actor and self.world is not None:
            self.world["names"].append(f"{self.name}_hf_server_0_0")
        engine_gate = self.world["gates"].get(self.name) if self.world is not None else None
        if engine_gate is not None:
            self.calls.append(("engine_waits", self.name))
            assert engine_gate.opened.wait(timeout=2), "the gate never opened"
        if self.gate is not None:
            try:
                self.gate.wait(timeout=2)
            except threading.BrokenBarrierError:
                self.calls.append(("started_alone", self.name))
        self.calls.append(("servers_up", self.name, self.building.is_set()))
        return self

    def finish_start(self):
        self.calls.append(("finish_start", self.name))
        return self

    def start_rollout(self):
        self.wait_models()
        self.launch_servers()
        return self.finish_start()


@pytest.fixture
def start_world(monkeypatch):
    """What `launch_while_models_build` sees of Ray: the actor names the recording launches created, one
    `FakeGate` per policy start (``world["gates"]``, by policy name), ``ray.get`` / ``ray.kill`` of those."""
    import ray
    import ray.util

    from cpmobius.engine import start_gate

    world = {"names": [], "gates": {}}

    def new_gate(policy_name):
        world["gates"][policy_name] = FakeGate()
        return f"{policy_name}_models_built", world["gates"][policy_name]

    monkeypatch.setattr(ray.util, "list_named_actors", lambda: list(world["names"]))
    monkeypatch.setattr(start_gate, "start_gate", new_gate)
    monkeypatch.setattr(ray, "get", lambda ref: ref)
    monkeypatch.setattr(ray, "kill", lambda actor: None)
    yield world
    # A start left running by a test (an error or an interrupt reached the caller first) ends against these
    # stand-ins, not against the real Ray of a later test.
    for thread in threading.enumerate():
        if thread.name.endswith(("_start", "_servers")):
            thread.join(timeout=10)


def test_start_policies_builds_every_model_before_any_rollout_server_starts():
    """vLLM profiles device memory while its engine starts: no model build (which offloads) may run then,
    nor another engine's start (the first's sleep frees memory)."""
    from cpmobius.engine.sharing import start_policies

    calls = []

    player = RecordingPolicy("player", calls)
    coach = RecordingPolicy("coach", calls, profiles_memory_at_start=False)
    assert start_policies(player, coach) == (player, coach)
    first_rollout = min(i for i, (op, *_) in enumerate(calls) if op == "query_workers")
    assert calls[:first_rollout] == [
        ("start_workers", "player"),
        ("begin_model_build", "player"),
        ("start_workers", "coach"),
        ("begin_model_build", "coach"),
        ("wait_models", "player"),
        ("wait_models", "coach"),
        ("wait_models", "player"),  # start_rollout's own (the models are built by then)
    ]
    assert [c[:2] for c in calls[-7:]] == [
        ("query_workers", "player"),
        ("servers_up", "player"),
        ("finish_start", "player"),
        ("wait_models", "coach"),
        ("query_workers", "coach"),
        ("servers_up", "coach"),
        ("finish_start", "coach"),
    ]


def test_engines_with_a_fixed_kv_cache_start_while_the_models_build(start_world):
    """Neither engine profiles memory: each policy's build begins once verl has asked its workers for their
    devices (its server actor exists) and runs while its servers start; each engine waits for its gate, opened
    once that policy's models are built; both policies start at once (one barrier: one after the other, the
    first would wait out its 2 s alone)."""
    from cpmobius.engine.sharing import start_policies

    calls, gate = [], threading.Barrier(2)
    policies = [
        RecordingPolicy(name, calls, profiles_memory_at_start=False, gate=gate, world=start_world)
        for name in ("player", "coach")
    ]
    started = time.perf_counter()
    start_policies(*policies)
    assert time.perf_counter() - started < 1.5
    assert not [c for c in calls if c[0] == "started_alone"]
    for policy in policies:
        mine = [c for c in calls if c[1] == policy.name]
        steps = ["start_workers", "query_workers", "begin_model_build", "engine_waits", "wait_models", "servers_up"]
        assert sorted((c[0] for c in mine[:-1]), key=steps.index) == steps  # the engine waits during the build
        assert mine[-1][0] == "finish_start" and ("servers_up", policy.name, True) in mine
        assert mine.index(("query_workers", policy.name)) < mine.index(("begin_model_build", policy.name))
        assert mine.index(("wait_models", policy.name)) < mine.index(("servers_up", policy.name, True))
    # the gate's name went to the servers in the rollout config for the launch, and is gone after it
    assert all("engine_after_models" not in p.config.actor_rollout_ref.rollout.custom for p in policies)


def test_a_build_waits_for_the_server_launch_no_longer_than_its_limit(start_world, monkeypatch):
    """A launch whose server actors never appear (another backend's names, a slow query): the build begins
    after `SERVER_QUERY_WAIT_S` all the same, the gate opens after it, and the start ends."""
    from cpmobius.engine import sharing

    monkeypatch.setattr(sharing, "SERVER_QUERY_WAIT_S", 0.3)
    calls = []
    policy = RecordingPolicy("player", calls, profiles_memory_at_start=False, world=start_world, creates_actor=False)
    policy.launch_s = 0.6
    started = time.perf_counter()
    sharing.start_policies(policy)
    assert 0.25 < time.perf_counter() - started < 2.0
    order = [c[0] for c in calls]
    assert order.index("begin_model_build") < order.index("servers_up") and order[-1] == "finish_start"


def test_actors_of_an_earlier_start_do_not_send_the_build_before_the_query(start_world):
    """A server name of an earlier start in the same Ray session is already listed: the build still waits for
    this launch's own server actor (else the workers' device query would wait behind the build)."""
    from cpmobius.engine.sharing import start_policies

    start_world["names"].append("player_hf_server_0_0")  # left by an earlier start
    calls = []
    policy = RecordingPolicy("player", calls, profiles_memory_at_start=False, world=start_world, creates_actor=False)
    policy.launch_s = 0.3
    built_at = []
    policy.begin_model_build = lambda: (built_at.append(time.perf_counter()), policy.building.set())

    def this_launchs_actor():  # appears once the workers have answered
        time.sleep(0.3)
        start_world["names"].append("player_hf_server_1_0")

    started = time.perf_counter()
    threading.Thread(target=this_launchs_actor, daemon=True).start()
    start_policies(policy)
    assert built_at and built_at[0] - started > 0.25
    assert ("servers_up", "player", True) in calls


def test_a_launch_that_fails_at_once_sends_no_build_and_its_error_comes_at_once(start_world):
    from cpmobius.engine.sharing import start_policies

    class Failing(RecordingPolicy):
        def launch_servers(self):
            raise ValueError("Free memory on device is less than desired GPU memory utilization")

    calls = []
    slow = RecordingPolicy("player", calls, False, world=start_world)
    slow.launch_s = 2.0  # its start would take 2 s
    started = time.perf_counter()
    with pytest.raises(ValueError, match="Free memory"):
        start_policies(slow, Failing("coach", calls, False, world=start_world))
    assert time.perf_counter() - started < 1.5  # not after the other policy's whole start
    assert ("begin_model_build", "coach") not in calls


def test_when_ray_cannot_list_its_actors_the_build_goes_first_and_the_start_ends(start_world, monkeypatch):
    import ray.util

    from cpmobius.engine.sharing import start_policies

    def broken():
        raise ConnectionError("GCS unreachable")

    monkeypatch.setattr(ray.util, "list_named_actors", broken)
    calls = []
    policy = RecordingPolicy("player", calls, profiles_memory_at_start=False, world=start_world)
    started = time.perf_counter()
    start_policies(policy)
    assert time.perf_counter() - started < 1.5 and calls[-1][0] == "finish_start"
    assert ("servers_up", "player", True) in calls


def test_an_interrupt_during_start_up_is_not_held_up_by_a_server_start(start_world):
    """Ctrl-C or SIGTERM (the driver turns it into KeyboardInterrupt) while a server starts: the caller gets it
    at once; the start, in a daemon thread, is left to Ray's shutdown."""
    import _thread

    from cpmobius.engine.sharing import start_policies

    policy = RecordingPolicy("player", [], profiles_memory_at_start=False, world=start_world)
    policy.launch_s = 2.5
    # Python's own Ctrl-C handler, whatever an earlier test in this process left installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, _thread.interrupt_main).start()
        started = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            start_policies(policy)
        assert time.perf_counter() - started < 1.5
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_gate_holds_a_servers_engine_until_it_opens(monkeypatch):
    """`ModelsBuiltGate.wait_for_models`: returns at once without a gate named in the config; with one, only
    after the gate's `open`."""
    import asyncio

    import ray

    from cpmobius.engine import start_gate

    class Server(start_gate.ModelsBuiltGate):
        def __init__(self, custom):
            self.config = OmegaConf.create({"custom": custom})

    async def scenario():
        gate = start_gate.ModelsBuilt()
        monkeypatch.setattr(ray, "get_actor", lambda name: SimpleNamespace(wait=SimpleNamespace(remote=gate.wait)))
        await asyncio.wait_for(Server({}).wait_for_models(), 1)  # no gate named: no wait
        waiting = asyncio.ensure_future(Server({start_gate.GATE_KEY: "player_models_built"}).wait_for_models())
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await gate.open()
        await asyncio.wait_for(waiting, 1)

    asyncio.run(scenario())


def test_server_actor_names_as_verl_and_the_hf_rollout_write_them():
    from cpmobius.engine.naming import hf_server_name, server_actor_prefix

    hf = OmegaConf.create({"name": "hf", "custom": {"policy_name": "coach"}})
    assert hf_server_name(hf, 3).startswith(server_actor_prefix(hf)) and server_actor_prefix(hf) == "coach_hf_server_"
    vllm = OmegaConf.create({"name": "vllm", "custom": {"policy_name": "player"}})
    assert server_actor_prefix(vllm) == "player_vllm_server_"  # verl: f"{prefix}server_{replica}_{node}"
    assert server_actor_prefix(OmegaConf.create({"name": "vllm", "custom": {}})) == "vllm_server_"


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
    with pytest.raises(RuntimeError, match="start_workers"):
        policy.wait_models()
    with pytest.raises(RuntimeError, match="start_workers"):
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
