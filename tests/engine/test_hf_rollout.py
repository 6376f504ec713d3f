"""The HF-transformers rollout and the CPU platform, in process (no Ray): registries, batching,
sampling parameters, stop tokens, log-probs, weight loading."""

from __future__ import annotations

import asyncio

import pytest
import torch

import cpmobius.engine.extensions  # noqa: F401  (registers the platform and the HF rollout)
from cpmobius.config import compose_config
from cpmobius.engine.config import policy_config
from cpmobius.engine.cpu_platform import PlatformCPU
from cpmobius.engine.hf_adapter import HFServerAdapter
from cpmobius.engine.hf_replica import HFRolloutReplica
from cpmobius.engine.hf_server import HFGenerationServer
from cpmobius.engine.naming import hf_server_name, server_name_prefix
from cpmobius.eval.data import default_data_dir
from cpmobius.toy.tiny_models import materialize_tiny_model


@pytest.fixture(scope="module")
def player_cfg(model_cache):
    cfg = compose_config([f"model.cache_dir={model_cache}", "data.max_response_length=24"])
    materialize_tiny_model(cfg.model.player_path, seed=2)
    materialize_tiny_model(cfg.model.coach_path, seed=1)
    return policy_config(cfg, "player")


@pytest.fixture(scope="module")
def server(player_cfg):
    from verl.workers.rollout.replica import RolloutMode

    arr = player_cfg.actor_rollout_ref
    srv = HFGenerationServer(arr.rollout, arr.model, RolloutMode.HYBRID, replica_rank=0)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(srv.launch_server())
    srv._test_loop = loop
    yield srv
    loop.run_until_complete(srv.shutdown())
    loop.close()


PROMPTS = [[257, 117, 10, 49, 43, 50], [257, 104, 105, 33], [257] + list(b"what is 7*8? answer:"), [257, 55]]


def greedy(srv, prompts, **extra):
    from cpmobius.engine.hf_sampling import SamplingKey  # noqa: F401

    key = srv._sampling_key(0, {"temperature": 0.0, **extra})
    return srv._generate_batch(prompts, key)


def test_registries_know_the_extensions():
    from verl.plugin.platform import PlatformRegistry
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import get_rollout_replica_class

    assert PlatformRegistry.get("cpu") is PlatformCPU
    assert get_rollout_replica_class("hf") is HFRolloutReplica
    assert get_rollout_class("hf", "async") is HFServerAdapter


def test_cpu_platform_is_never_auto_detected(monkeypatch):
    monkeypatch.delenv("VERL_PLATFORM", raising=False)
    assert not PlatformCPU().is_platform_available(use_smi_check=True)
    monkeypatch.setenv("VERL_PLATFORM", "cpu")
    assert PlatformCPU().is_platform_available(use_smi_check=True)
    platform = PlatformCPU()
    assert platform.communication_backend_name() == "gloo"
    assert platform.current_device() == torch.device("cpu")
    assert platform.device_module.mem_get_info() == (0, 0)


def test_server_names_differ_per_policy(model_cache):
    cfg = compose_config([f"model.cache_dir={model_cache}"])
    coach, player = (policy_config(cfg, n).actor_rollout_ref.rollout for n in ("coach", "player"))
    assert hf_server_name(coach, 0) == "coach_hf_server_0_0"
    assert hf_server_name(player, 0) == "player_hf_server_0_0"
    assert server_name_prefix("vllm_", coach) == "coach_vllm_"
    assert server_name_prefix("vllm_", cfg.actor_rollout_ref.rollout) == "vllm_"  # no policy: verl's name


def test_batched_greedy_equals_one_at_a_time(server):
    batched = greedy(server, PROMPTS)
    for prompt, (tokens, log_probs, _) in zip(PROMPTS, batched):
        alone_tokens, alone_log_probs, _ = greedy(server, [prompt])[0]
        assert tokens == alone_tokens
        assert log_probs == pytest.approx(alone_log_probs, abs=1e-4)


def test_concurrent_requests_are_batched(server):
    async def many():
        calls = [server.generate(p, {"temperature": 0.0}, request_id=str(i)) for i, p in enumerate(PROMPTS * 4)]
        return await asyncio.gather(*calls)

    before = server.get_stats()["batches"]
    outputs = server._test_loop.run_until_complete(many())
    batches = server.get_stats()["batches"] - before
    assert batches <= 2, f"16 concurrent requests took {batches} generate calls"
    expected = greedy(server, PROMPTS)
    for i, output in enumerate(outputs):
        assert output.token_ids == expected[i % len(PROMPTS)][0]


def test_requests_trickling_in_share_one_generate_call(server, monkeypatch):
    """The agent loop's workers submit one stage's requests over tens of milliseconds: with a fixed
    window after the first they split into several full-length generate() calls; the quiet window
    (restarted by each arrival, capped at MAX_BATCH_WAIT_S) keeps them in one. Scaled up 20x here
    (100 ms window, 20 ms gaps, 240 ms in all) so a loaded CI machine's late wake-ups do not matter."""
    from cpmobius.engine import hf_server

    monkeypatch.setattr(hf_server, "MAX_BATCH_WAIT_S", 2.0)
    monkeypatch.setattr(server, "batch_window_s", 0.1)

    async def trickle():
        calls = []
        for i, prompt in enumerate(PROMPTS * 3):
            calls.append(asyncio.ensure_future(server.generate(prompt, {"temperature": 0.0}, request_id=f"t{i}")))
            await asyncio.sleep(0.02)
        return await asyncio.gather(*calls)

    before = server.get_stats()["batches"]
    server._test_loop.run_until_complete(trickle())
    assert server.get_stats()["batches"] - before == 1


def test_stop_token_and_max_tokens_are_honoured(server):
    tokens, _, reason = greedy(server, [PROMPTS[0]])[0]
    assert reason == "length" and len(tokens) == 24  # random model never emits <|im_end|> here
    stop = tokens[5]
    first = tokens.index(stop)
    cut, _, reason = greedy(server, [PROMPTS[0]], stop_token_ids=[stop])[0]
    assert cut == tokens[: first + 1] and reason == "completed"
    short, _, reason = greedy(server, [PROMPTS[0]], max_tokens=5)[0]
    assert short == tokens[:5] and reason == "length"


def test_top_k_one_sampling_is_greedy_and_temperature_samples(server):
    top1 = server._generate_batch([PROMPTS[1]], server._sampling_key(0, {"temperature": 1.0, "top_k": 1}))
    assert top1[0][0] == greedy(server, [PROMPTS[1]])[0][0]
    torch.manual_seed(0)
    hot = server._generate_batch([PROMPTS[1]] * 6, server._sampling_key(0, {"temperature": 1.5}))
    assert len({tuple(t) for t, _, _ in hot}) > 1


def test_log_probs_are_the_served_models_raw_log_probs(server):
    torch.manual_seed(1)
    key = server._sampling_key(0, {"temperature": 0.7, "top_p": 0.9})
    for prompt, (tokens, log_probs, _) in zip(PROMPTS, server._generate_batch(PROMPTS, key)):
        assert len(log_probs) == len(tokens)
        assert log_probs == pytest.approx(server.compute_log_probs(prompt, tokens), abs=1e-4)
        assert all(lp <= 0 for lp in log_probs)


def test_weight_loading_checks_completeness(server):
    params = dict(server.model.named_parameters())
    before = server.get_state_digest()
    original = {k: v.detach().clone() for k, v in params.items()}
    try:
        server.load_weights([(k, v + 0.01) for k, v in original.items()], last=True)
        assert server.get_state_digest() != pytest.approx(before)
        assert server.get_stats()["weight_syncs"] >= 1
        with pytest.raises(RuntimeError, match="incomplete"):
            server.load_weights(list(original.items())[:2], last=True)
        with pytest.raises(KeyError, match="no parameter"):
            server.load_weights([("model.not_a_layer.weight", torch.zeros(1))], last=False)
    finally:
        server._received = set()
        server.load_weights(list(original.items()), last=True)
    assert server.get_state_digest() == pytest.approx(before)


def test_vllm_name_mixins_give_each_policy_its_own_server_and_socket(model_cache, monkeypatch):
    import os
    from importlib.util import find_spec
    from pathlib import Path
    from types import SimpleNamespace

    import ray
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY

    from cpmobius.engine.vllm_rollout import (
        JOB_ID_ENV,
        PolicyNamedAdapterMixin,
        PolicyNamedReplicaMixin,
        PolicyNamedServerMixin,
    )

    # The engine side: verl's vLLM worker extension rebuilds the socket path from the server's
    # environment. Read the formula from the installed verl (vLLM itself is not importable here).
    verl_dir = Path(find_spec("verl").submodule_search_locations[0])
    receiver_src = (verl_dir / "workers/rollout/vllm_rollout/utils.py").read_text()
    assert "rl-colocate-zmq-{job_id}-replica-{replica_rank}-rank-{trainer_rank}.sock" in receiver_src
    assert f'os.environ.get("{JOB_ID_ENV}"' in receiver_src

    def receiver_path():
        return f"ipc:///tmp/rl-colocate-zmq-{os.environ[JOB_ID_ENV]}-replica-0-rank-0.sock"

    job = "02000000"
    monkeypatch.setattr(ray, "get_runtime_context", lambda: SimpleNamespace(get_job_id=lambda: job))

    class VerlLike:  # the hooks verl's vLLMReplica / vLLMHttpServer / ServerAdapter expose
        def __init__(self, config):
            self.config = config
            self.server_class = "verl's vLLMHttpServer"
            self.zmq_handle = f"ipc:///tmp/rl-colocate-zmq-{job}-replica-0-rank-0.sock"

        def _get_server_name_prefix(self):
            return "vllm_"

        def _post_init(self, cuda_visible_devices):
            pass

    class Server(PolicyNamedServerMixin, VerlLike):
        def __init__(self, config):  # verl's vLLMHttpServer.__init__: job id into the env, then _post_init
            super().__init__(config)
            os.environ[JOB_ID_ENV] = job
            self._post_init("0")

    import cpmobius.engine.vllm_rollout as vllm_rollout

    monkeypatch.setattr(vllm_rollout, "_policy_class", lambda name: {"PolicyvLLMHttpServer": Server}[name])
    monkeypatch.setattr(ray, "remote", lambda cls: ("ray actor", cls))
    Replica = type("R", (PolicyNamedReplicaMixin, VerlLike), {})
    Adapter = type("A", (PolicyNamedAdapterMixin, VerlLike), {})
    cfg = compose_config([f"model.cache_dir={model_cache}", "backend=vllm"])
    coach, player = (policy_config(cfg, n).actor_rollout_ref.rollout for n in ("coach", "player"))
    assert Replica(coach).server_class == ("ray actor", Server)  # named policies run the named server
    assert Replica(coach)._get_server_name_prefix() == Adapter(coach)._get_server_name_prefix() == "coach_vllm_"
    assert Replica(player)._get_server_name_prefix() == "player_vllm_"
    unnamed = cfg.actor_rollout_ref.rollout
    assert Replica(unnamed)._get_server_name_prefix() == "vllm_"  # unnamed: verl's own
    assert Replica(unnamed).server_class == "verl's vLLMHttpServer"
    monkeypatch.setenv(JOB_ID_ENV, job)
    sockets = {}
    for name, rollout in (("coach", coach), ("player", player), ("unnamed", unnamed)):
        Server(rollout)
        sockets[name] = receiver_path()
        assert Adapter(rollout).zmq_handle == sockets[name], "the trainer would send to a socket no engine listens on"
    assert len(set(sockets.values())) == 3
    assert _ROLLOUT_REGISTRY[("vllm", "async")].endswith("PolicyvLLMServerAdapter")


async def test_agent_loop_sends_the_configured_repetition_penalty_and_stop_tokens(monkeypatch, model_cache):
    from types import SimpleNamespace

    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

    from cpmobius.engine.agent_loop import ConfiguredSingleTurnAgentLoop
    from cpmobius.toy.tiny_models import materialize_tiny_model

    path = materialize_tiny_model(model_cache / "agent-loop-model")
    tokenizer = AutoTokenizer.from_pretrained(path)
    captured = {}

    async def fake_run(self, sampling_params, **kwargs):
        captured.clear()
        captured.update(sampling_params, forwarded=sorted(kwargs))
        return SimpleNamespace(extra_fields={})

    monkeypatch.setattr(SingleTurnAgentLoop, "run", fake_run)
    loop = ConfiguredSingleTurnAgentLoop.__new__(ConfiguredSingleTurnAgentLoop)
    loop.rollout_config = SimpleNamespace(repetition_penalty=1.05)
    loop.config = SimpleNamespace(actor_rollout_ref=SimpleNamespace(model=SimpleNamespace(path=str(path))))
    loop.tokenizer = tokenizer
    params = {"repetition_penalty": 1.0, "temperature": 0.7, "top_p": 0.9, "top_k": -1}  # verl always sends 1.0
    output = await loop.run(params, raw_prompt=[])
    assert captured["repetition_penalty"] == 1.05 and captured["temperature"] == 0.7
    assert params == {
        "repetition_penalty": 1.0,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": -1,
    }  # caller's dict untouched
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in captured["stop_token_ids"]
    # every row reports the sampling values it was generated with
    assert output.extra_fields == {"sampling_temperature": 0.7, "sampling_top_p": 0.9, "sampling_top_k": -1.0}
    # the per-row greedy flag wins over validation's val_kwargs and is not forwarded to verl's loop
    output = await loop.run(params, raw_prompt=[], cpmobius_greedy=True)
    assert (captured["temperature"], captured["top_p"], captured["top_k"]) == (0.0, 1.0, -1)
    assert captured["forwarded"] == ["raw_prompt"]
    assert output.extra_fields["sampling_temperature"] == 0.0


QWEN_TOKENIZER = default_data_dir().parent / "tokenizers" / "qwen2.5-instruct"


@pytest.mark.skipif(not (QWEN_TOKENIZER / "tokenizer.json").exists(), reason="no Qwen2.5 tokenizer in ../shared/data")
def test_stop_tokens_of_qwen2p5_base_and_instruct_models():
    from transformers import AutoTokenizer, GenerationConfig

    from cpmobius.engine.stop_tokens import stop_token_ids

    tokenizer = AutoTokenizer.from_pretrained(QWEN_TOKENIZER)
    im_end, end_of_text = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert (im_end, end_of_text) == (151645, 151643)
    # Qwen2.5-*-Instruct: eos <|im_end|>, generation config eos [<|im_end|>, <|endoftext|>]
    assert stop_token_ids(tokenizer, GenerationConfig(eos_token_id=[im_end, end_of_text])) == (end_of_text, im_end)
    assert stop_token_ids(tokenizer, None) == (im_end,)
    # Qwen2.5-Math-1.5B (base): eos <|endoftext|> everywhere, but its chat template ends turns with <|im_end|>
    tokenizer.eos_token = "<|endoftext|>"
    assert stop_token_ids(tokenizer, GenerationConfig(eos_token_id=end_of_text)) == (end_of_text, im_end)
    # No chat template (the zero template): only the EOS ids
    tokenizer.chat_template = None
    assert stop_token_ids(tokenizer, GenerationConfig(eos_token_id=end_of_text)) == (end_of_text,)
