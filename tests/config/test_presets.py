"""The released presets carry the released scripts' validation sampling and loss aggregation.

Values from the four released launch scripts: validation samples at
the Player's own temperature / top-p; the 7B-Instruct, Nemotron and OctoThinker scripts train with
micro-batches of one sequence, so their loss is a per-sequence mean (verl's seq-mean-token-mean),
while the 1.5B script's dynamic micro-batches give a token-mean.
"""

from __future__ import annotations

import pytest

from cpmobius.config import compose_config
from cpmobius.engine.config import policy_config

RELEASED = {
    # preset: (Player T, Player top-p, loss aggregation, greedy validation)
    "paper_qwen_1p5b": (0.6, 1.0, "token-mean", False),
    "released_qwen_1p5b": (0.6, 1.0, "token-mean", False),
    "released_openmath_nemotron_1p5b": (0.6, 0.9, "seq-mean-token-mean", False),
    "released_octothinker_3b": (0.7, 0.9, "seq-mean-token-mean", False),
    "released_qwen_7b_instruct": (0.7, 0.9, "seq-mean-token-mean", True),
}


@pytest.mark.parametrize("preset", sorted(RELEASED))
def test_preset_validates_at_the_players_sampling_values(preset):
    temperature, top_p, _, greedy = RELEASED[preset]
    cfg = compose_config([f"experiment={preset}"])
    player = policy_config(cfg, "player").actor_rollout_ref.rollout
    assert (player.temperature, player.top_p) == (temperature, top_p)
    assert (player.val_kwargs.temperature, player.val_kwargs.top_p) == (temperature, top_p)
    assert bool(cfg.validation.greedy) is greedy


@pytest.mark.parametrize("preset", sorted(RELEASED))
def test_preset_loss_aggregation_is_the_released_one_for_both_policies(preset):
    cfg = compose_config([f"experiment={preset}"])
    for name in ("coach", "player"):
        assert policy_config(cfg, name).actor_rollout_ref.actor.loss_agg_mode == RELEASED[preset][2], name


def test_a_player_temperature_override_moves_the_validation_temperature_with_it():
    cfg = compose_config(["experiment=paper_qwen_1p5b", "player.verl.rollout.temperature=0.8"])
    assert policy_config(cfg, "player").actor_rollout_ref.rollout.val_kwargs.temperature == 0.8


@pytest.mark.parametrize("preset", sorted(RELEASED))
def test_on_a_gpu_the_reference_is_stored_in_bf16_and_the_trained_weights_in_fp32(preset):
    """verl streams the reference from the host for every micro-batch: bf16 halves those bytes. The
    trained actor keeps fp32 master weights (its optimizer steps need them)."""
    cfg = compose_config([f"experiment={preset}"])
    for name in ("coach", "player"):
        arr = policy_config(cfg, name).actor_rollout_ref
        assert (arr.ref.fsdp_config.model_dtype, arr.actor.fsdp_config.model_dtype) == ("bf16", "fp32"), name


def test_on_the_cpu_the_reference_keeps_fp32():
    arr = policy_config(compose_config(["backend=cpu"]), "player").actor_rollout_ref
    assert arr.ref.fsdp_config.model_dtype == "fp32"


@pytest.mark.parametrize("preset", sorted(RELEASED))
def test_the_1p5b_qwen_presets_start_both_vllm_engines_at_once_the_others_profile_memory(preset):
    """A fixed KV cache (24 GiB: vLLM's own profile at 0.4 of an 80 GB device, for the 1.5B Qwen) lets both
    policies' engines start at once; the presets at 0.6 of the device, for other models, keep the profile."""
    from cpmobius.engine.policy import Policy

    cfg = compose_config([f"experiment={preset}"])
    fixed = preset in ("paper_qwen_1p5b", "released_qwen_1p5b")
    for name in ("coach", "player"):
        pcfg = policy_config(cfg, name)
        assert Policy(name, pcfg, None, None).profiles_memory_at_start is not fixed, name
        if fixed:
            rollout = pcfg.actor_rollout_ref.rollout
            assert (
                rollout.engine_kwargs.vllm.kv_cache_memory_bytes == 24 * 2**30 and rollout.gpu_memory_utilization == 0.4
            )


@pytest.mark.parametrize("backend", ["vllm", "cuda_hf"])
def test_the_gpu_backends_use_liger_and_the_cpu_backend_does_not(backend):
    for name in ("coach", "player"):
        assert policy_config(compose_config([f"backend={backend}"]), name).actor_rollout_ref.model.use_liger, name
        assert not policy_config(compose_config(["backend=cpu"]), name).actor_rollout_ref.model.use_liger, name


# --------------------------------------------------------------------------- run folders


@pytest.mark.parametrize(
    ("overrides", "folder"),
    [
        ([], "outputs/cpmobius/default"),  # the README's and docs' folder of the default run
        (["method=rent"], "outputs/cpmobius/default_rent"),
        (["method=ttrl"], "outputs/cpmobius/default_ttrl"),
        (["method=rzero"], "outputs/cpmobius/default_rzero"),
        (["method=cpmobius"], "outputs/cpmobius/default"),
        (["experiment=paper_qwen_1p5b"], "outputs/cpmobius/paper_qwen_1p5b"),
        (["experiment=paper_qwen_1p5b", "method=rent"], "outputs/cpmobius/paper_qwen_1p5b_rent"),
        (["experiment=released_qwen_7b_instruct"], "outputs/cpmobius/released_qwen_7b_instruct"),
        (["experiment=toy_gentle", "seed=2"], "outputs/cpmobius/toy_gentle_seed2"),
        (["seed=3", "method=ttrl"], "outputs/cpmobius/default_ttrl_seed3"),
        (["model=qwen2p5_coder_0p5b"], "outputs/cpmobius/qwen2p5_coder_0p5b"),  # never the toy run's folder
        # the user's own name or folder wins whole
        (["method=rent", "trainer.experiment_name=quota4"], "outputs/cpmobius/quota4"),
        (["method=rent", "trainer.default_local_dir=runs/mine"], "runs/mine"),
    ],
)
def test_a_run_is_foldered_by_what_makes_it_another_run(overrides, folder):
    cfg = compose_config(overrides)
    assert cfg.trainer.default_local_dir == folder
    if folder.startswith("outputs/"):
        assert cfg.trainer.experiment_name == folder.rsplit("/", 1)[1]  # the logger's run name is the folder's
