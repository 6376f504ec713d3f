"""verl's fast path changes how the log-prob and update passes are batched, never what they compute.

For each knob of the fast path (remove padding: the sequences of a micro-batch packed into one row,
attention kept inside each sequence from the position ids; dynamic batch size: micro-batches cut by a
token budget; larger micro-batches; gradient checkpointing; verl's fused output layer, which computes
log-probs and entropy from the hidden states in chunks; varlen attention over the packed rows), one pass over
the same rollouts with the knob on
and off must give the same old and reference log-probs, entropies and the same update: loss terms and
gradient norm within 1e-2 relative. Both policies train at learning rate 0, so the weights stay put and
every pass sees the same model (checked at the end).

The knobs that verl reads per call (``use_remove_padding``, ``use_dynamic_bsz``,
``max_token_len_per_gpu``, ``micro_batch_size_per_gpu``) are set per call, as verl's worker does from
its config; gradient checkpointing, the fused output layer and the attention are set when the model is
built, so the Coach here is built with all three (``sdpa_varlen``, which on a CPU runs each packed sequence's
own ``sdpa``) and the Player with none (``sdpa``), from the same weights. The model's output
layer is untied from its input embedding, as in Qwen2.5-Math-1.5B: verl then shards it as its own FSDP2
unit, which the fused layer cannot read without our fix. One Ray start and two verl workers for the
module (about 2 minutes on 2 cores, most of it start-up).

`benchmarks/bench_update_gpu.py` measures what the knobs are worth on a GPU; ``tests/engine/test_fast_path_gpu.py``
repeats these checks on CUDA.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

# Per-call knobs: the values a padded pass with fixed micro-batches of two sequences takes.
PLAIN = {"use_remove_padding": False, "use_dynamic_bsz": False, "micro_batch_size_per_gpu": 2}
# A token budget small enough that the rollouts below need several micro-batches (rows of 8-62 tokens).
BUDGET_TOKENS = 120
KNOBS = {
    "remove_padding": {"use_remove_padding": True},
    "dynamic_bsz": {"use_dynamic_bsz": True, "max_token_len_per_gpu": BUDGET_TOKENS},
    "dynamic_bsz_remove_padding": {
        "use_remove_padding": True,
        "use_dynamic_bsz": True,
        "max_token_len_per_gpu": BUDGET_TOKENS,
    },
    "micro_batch_8": {"micro_batch_size_per_gpu": 8},
}
UPDATE_METRICS = ("actor/pg_loss", "actor/kl_loss", "actor/loss", "actor/grad_norm")
RTOL = 1e-2


def knob_policy_class():
    """`Policy` with fixed per-call knobs (``policy.knobs``): the benchmark's, so both run the same path."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_update_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_update_gpu", path)
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))  # dataclasses look it up
    spec.loader.exec_module(module)
    return module.knob_policy_class()


def start_knob_policies(overrides: list[str], model_path: str) -> dict:
    """Ray and the two policies' verl workers (no rollout servers), both from ``model_path`` at LR 0.

    The Player is built as configured, the Coach with gradient checkpointing, verl's fused output
    layer and varlen attention; both with ``use_remove_padding`` on, so verl's monkey patch for it is applied as in a
    fast-path run.
    """
    import ray

    from cpmobius.config import compose_config
    from cpmobius.engine.config import apply_env_to_driver, build_policy_configs, ray_init_kwargs
    from cpmobius.engine.sharing import EngineGuard, make_resource_pool

    cfg = compose_config(
        [
            f"model.player_path={model_path}",
            f"model.coach_path={model_path}",
            "actor_rollout_ref.actor.optim.lr=0.0",
            "coach.verl.actor.optim.lr=0.0",
            "coach.verl.actor.entropy_coeff=-0.01",  # the Player's: the two updates must be the same loss
            "actor_rollout_ref.model.use_remove_padding=true",
            "++coach.verl.model.enable_gradient_checkpointing=true",
            "++coach.verl.model.use_fused_kernels=true",
            "++coach.verl.model.fused_kernel_options.impl_backend=torch",
            "++coach.verl.model.override_config.attn_implementation=sdpa_varlen",
            "++player.verl.model.enable_gradient_checkpointing=false",
            "++player.verl.model.use_fused_kernels=false",
            *overrides,
        ]
    )
    apply_env_to_driver(cfg)
    import cpmobius.engine.extensions  # noqa: F401  (the CPU platform in the driver)

    configs = build_policy_configs(cfg)
    if ray.is_initialized():
        ray.shutdown()
    ray.init(**{"address": "local", **ray_init_kwargs(cfg)})  # its own Ray, never a cluster already running here
    pool, guard, cls = make_resource_pool(cfg), EngineGuard(), knob_policy_class()
    policies = {name: cls(name, configs[name], pool, guard).start_models() for name in ("player", "coach")}
    for policy in policies.values():
        policy.wait_models()
    return policies


def rollouts(vocab_size: int, rows: int = 8, seed: int = 0):
    """``rows`` random rollouts: prompts of 3-20 tokens, responses of 5-42, padded to 24 + 48 columns."""
    from cpmobius.engine.batches import synthetic_rollouts

    rng = random.Random(seed)
    prompts = [rng.randint(3, 20) for _ in range(rows)]
    responses = [rng.randint(5, 42) for _ in range(rows)]
    return synthetic_rollouts(prompts, responses, vocab_size, prompt_width=24, response_width=48, seed=seed)


def one_update(policy, knobs: dict, vocab_size: int) -> dict:
    """Old and reference log-probs, then one update with ±1 sequence advantages, all with ``knobs``.

    Returns:
        ``{"log_probs", "entropy", "ref_log_prob"}`` as (B, response_length) tensors (0 on padding),
        plus the update's ``UPDATE_METRICS`` as floats.
    """
    import torch

    policy.knobs = {**PLAIN, **knobs}
    batch = rollouts(vocab_size)
    batch.meta_info["temperature"] = 1.0
    log_probs, entropy = policy.compute_log_probs(batch)
    batch.batch["old_log_probs"] = log_probs
    batch.batch["ref_log_prob"] = policy.compute_ref_log_probs(batch)
    signs = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(batch))])[:, None]
    batch.batch["advantages"] = signs * batch.batch["response_mask"].float()
    metrics = policy.update(batch)
    return {
        "log_probs": log_probs,
        "entropy": entropy,
        "ref_log_prob": batch.batch["ref_log_prob"],
        **{key: metrics[key] for key in UPDATE_METRICS},
    }


def assert_same_pass(got: dict, want: dict, rtol: float = RTOL, atol: float = 1e-5) -> None:
    """Per-token tensors within ``rtol`` of the largest magnitude (plus ``atol``), metrics within ``rtol``."""
    for key in ("log_probs", "entropy", "ref_log_prob"):
        scale = float(want[key].abs().max())
        error = float((got[key] - want[key]).abs().max())
        assert error <= rtol * scale + atol, f"{key}: max difference {error:.3g} vs scale {scale:.3g}"
    for key in UPDATE_METRICS:
        assert got[key] == pytest.approx(want[key], rel=rtol, abs=atol), f"{key}: {got[key]} vs {want[key]}"


def untied_tiny_model(folder: Path) -> Path:
    """The toy's tiny Qwen2 with an output layer of its own (a perturbed copy of the input embedding)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cpmobius.toy.tiny_models import materialize_tiny_model

    tied = materialize_tiny_model(folder / "tied", seed=3)
    model = AutoModelForCausalLM.from_pretrained(tied)
    embedding = model.get_input_embeddings().weight.detach()
    torch.manual_seed(0)
    model.config.tie_word_embeddings = False
    model.lm_head = torch.nn.Linear(embedding.shape[1], embedding.shape[0], bias=False)
    model.lm_head.weight = torch.nn.Parameter(embedding.clone() + 0.05 * torch.randn_like(embedding))
    model.save_pretrained(folder / "untied")
    AutoTokenizer.from_pretrained(tied).save_pretrained(folder / "untied")
    reloaded = AutoModelForCausalLM.from_pretrained(folder / "untied")
    assert reloaded.lm_head.weight.data_ptr() != reloaded.get_input_embeddings().weight.data_ptr()
    return folder / "untied"


@pytest.fixture(scope="module")
def knob_policies(tmp_path_factory):
    import ray

    path = untied_tiny_model(tmp_path_factory.mktemp("models"))
    policies = start_knob_policies(["backend=cpu", "data.max_response_length=48"], str(path))
    vocab = len(policies["player"].tokenizer)
    baseline = one_update(policies["player"], {}, vocab)
    yield policies, baseline, vocab
    ray.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("knob", sorted(KNOBS))
def test_a_per_call_knob_computes_the_same_pass(knob_policies, knob):
    policies, baseline, vocab = knob_policies
    assert_same_pass(one_update(policies["player"], KNOBS[knob], vocab), baseline)


@pytest.mark.slow
def test_gradient_checkpointing_the_fused_output_layer_and_varlen_attention_compute_the_same_update(knob_policies):
    policies, baseline, vocab = knob_policies
    assert_same_pass(one_update(policies["coach"], {}, vocab), baseline)
    assert_same_pass(one_update(policies["coach"], KNOBS["dynamic_bsz_remove_padding"], vocab), baseline)


@pytest.mark.slow
def test_the_weights_did_not_move_and_the_rows_differ(knob_policies):
    policies, baseline, vocab = knob_policies
    again = one_update(policies["player"], {}, vocab)
    assert_same_pass(again, baseline, rtol=0.0, atol=1e-6)  # LR 0: every pass above saw the same model
    # The comparisons above would not notice attention leaking between packed sequences if every row
    # were alike: the rows' log-probs differ.
    sums = baseline["log_probs"].sum(-1)
    assert float(sums.max() - sums.min()) > 1.0


@pytest.mark.slow
def test_a_checkpoint_of_a_varlen_attention_model_merges_in_a_fresh_process(knob_policies, tmp_path):
    """verl's model merger knows transformers' attention names only: the checkpoint's HF config names ``sdpa``.

    Before, the saved config named ``sdpa_varlen`` and the merger stopped with "Specified
    `attn_implementation="sdpa_varlen"` is not supported" (met on a 1.5B run on one H100).
    """
    import json
    import subprocess

    policies, _, _ = knob_policies
    policies["coach"].save(str(tmp_path / "coach"))  # built with attn_implementation=sdpa_varlen
    config = json.loads((tmp_path / "coach" / "huggingface" / "config.json").read_text())
    assert config.get("attn_implementation", config.get("_attn_implementation")) == "sdpa"
    merge = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    merge += ["--local_dir", str(tmp_path / "coach"), "--target_dir", str(tmp_path / "hf")]
    done = subprocess.run(merge, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert any((tmp_path / "hf").glob("*.safetensors"))


GPU_PRESETS = [
    [f"experiment={path.stem}", *(f"method={m}" for m in path.stem.split("_")[:1] if m in ("rent", "ttrl", "rzero"))]
    for path in sorted((Path(__file__).resolve().parents[2] / "configs" / "experiment").glob("*.yaml"))
    if path.stem not in ("zero_template", "toy", "toy_gentle", "toy_paper_noise")
]  # zero_template: a fragment the released presets include; toy, toy_gentle, toy_paper_noise: the CPU toy world's;
# a baseline's preset (rent_qwen_1p5b) runs with its method
GPU_PRESETS += [["model=qwen2p5_coder_1p5b", "backend=vllm"], ["model=qwen2p5_math_1p5b", "backend=cuda_hf"]]


@pytest.mark.parametrize("overrides", GPU_PRESETS, ids=lambda o: ",".join(o))
def test_the_gpu_presets_turn_the_fast_path_on_and_validate(overrides):
    from cpmobius.config import compose_config
    from cpmobius.engine.config import build_policy_configs

    configs = build_policy_configs(compose_config(overrides))  # verl's dataclasses check the knobs
    for name, pcfg in configs.items():
        arr = pcfg.actor_rollout_ref
        assert arr.model.use_remove_padding and arr.actor.use_dynamic_bsz and arr.model.enable_gradient_checkpointing, (
            name
        )
        assert arr.rollout.log_prob_use_dynamic_bsz and arr.ref.log_prob_use_dynamic_bsz, name
        assert arr.model.use_fused_kernels and arr.model.fused_kernel_options.impl_backend == "torch", name
        assert arr.model.override_config.attn_implementation == "sdpa_varlen", name
        longest = int(arr.rollout.prompt_length) + int(arr.rollout.response_length)
        for budget in (
            arr.actor.ppo_max_token_len_per_gpu,
            arr.rollout.log_prob_max_token_len_per_gpu,
            arr.ref.log_prob_max_token_len_per_gpu,
        ):
            assert int(budget) >= longest, (name, budget, longest)  # verl refuses a rollout longer than a micro-batch


@pytest.mark.parametrize(
    "dynamic, expected", [(False, 2 * 6), (True, 2)]
)  # lcm(2, 3, 6) = 6 rows per micro-batch cycle
def test_rows_are_padded_to_micro_batches_only_without_dynamic_batch_size(dynamic, expected):
    from omegaconf import OmegaConf

    from cpmobius.engine.batches import row_divisor

    arr = OmegaConf.create(
        {
            "actor": {"ppo_micro_batch_size_per_gpu": 2, "use_dynamic_bsz": dynamic},
            "rollout": {"log_prob_micro_batch_size_per_gpu": 3},
            "ref": {"log_prob_micro_batch_size_per_gpu": 6},
        }
    )
    assert row_divisor(arr, world_size=2) == expected


def test_the_cpu_backend_keeps_the_plain_path():
    from cpmobius.config import compose_config
    from cpmobius.engine.config import build_policy_configs

    for pcfg in build_policy_configs(compose_config(["backend=cpu"])).values():
        arr = pcfg.actor_rollout_ref
        assert not arr.model.use_remove_padding and not arr.actor.use_dynamic_bsz and not arr.model.use_fused_kernels


@pytest.mark.parametrize("fused", [True, False])
def test_an_untied_output_layer_stays_in_the_root_unit_only_under_the_fused_forward(monkeypatch, fused):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from verl.utils import fsdp_utils

    from cpmobius.engine.worker import keep_fused_output_layer_in_root_unit

    monkeypatch.setattr(fsdp_utils, "_select_fsdp2_wrap_targets", fsdp_utils._select_fsdp2_wrap_targets)
    keep_fused_output_layer_in_root_unit()
    keep_fused_output_layer_in_root_unit()  # idempotent: one wrapper, not two
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=1,
            vocab_size=64,
            tie_word_embeddings=False,
        )
    )
    if fused:
        model._verl_fused_kernels_backend = "torch"  # what verl's patch of the forward marks
    targets = fsdp_utils._select_fsdp2_wrap_targets(model, ["Qwen2DecoderLayer"])
    assert sum(type(module).__name__ == "Qwen2DecoderLayer" for module in targets) == 2
    assert model.get_input_embeddings() in targets
    assert (model.get_output_embeddings() in targets) is not fused
