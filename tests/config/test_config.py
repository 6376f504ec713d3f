"""Config composition on verl's packaged config tree: per-policy deltas, validation, errors."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from cpmobius.config import ConfigError, compose_config
from cpmobius.engine.config import (
    build_policy_configs,
    policy_config,
    ray_init_kwargs,
    validate_policy_config,
    worker_env_vars,
)


def test_unsafe_verl_defaults_are_overridden():
    cfg = compose_config()
    assert cfg.algorithm.adv_estimator == "grpo"  # verl default: gae
    assert cfg.actor_rollout_ref.rollout.name == "hf"  # verl default: ??? (mandatory)
    assert cfg.actor_rollout_ref.rollout.tensor_model_parallel_size == 1  # verl default: 2
    assert cfg.actor_rollout_ref.rollout.load_format == "auto"  # verl default: dummy
    assert "wandb" not in cfg.trainer.logger  # verl default: [console, wandb]


def test_policy_deltas_do_not_leak_between_policies():
    cfg = compose_config(["coach.verl.actor.optim.lr=3e-5", "player.verl.rollout.temperature=0.25"])
    configs = build_policy_configs(cfg)
    coach, player = configs["coach"].actor_rollout_ref, configs["player"].actor_rollout_ref
    assert coach.actor.optim.lr == pytest.approx(3e-5)
    assert player.actor.optim.lr == pytest.approx(cfg.actor_rollout_ref.actor.optim.lr)  # the shared base value
    assert player.rollout.temperature == pytest.approx(0.25)
    assert coach.rollout.temperature == pytest.approx(0.9)
    assert coach.actor.entropy_coeff == pytest.approx(0.01) and player.actor.entropy_coeff == pytest.approx(-0.01)
    assert coach.model.path.endswith("tiny-coach") and player.model.path.endswith("tiny-player")
    assert coach.rollout.custom["policy_name"] == "coach" and player.rollout.custom["policy_name"] == "player"
    # verl's absolute interpolations resolve inside each policy's own tree
    assert player.actor.rollout_n == player.rollout.n
    assert "coach" not in configs["player"] and "player" not in configs["coach"]
    assert OmegaConf.is_missing(configs["player"], "trainer") is False


@pytest.mark.parametrize("backend", ["cpu", "cuda_hf", "vllm"])
def test_every_backend_composes_and_validates(backend):
    configs = build_policy_configs(compose_config([f"backend={backend}"]))
    assert configs["player"].actor_rollout_ref.rollout.name == ("vllm" if backend == "vllm" else "hf")


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null", "actor.ppo_micro_batch_size_per_gpu"),
        ("++player.verl.actor.ppo_micro_batch_size_per_gpu=0", "player.verl.actor.ppo_micro_batch_size_per_gpu"),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size=2", "rollout.tensor_model_parallel_size"),
        ("backend=vllm +coach.verl.rollout.free_cache_engine=false", "coach.verl.rollout.free_cache_engine"),
        ("player.verl.actor.loss_agg_mode=mean-of-nothing", "player.verl.actor"),
    ],
)
def test_wrong_values_fail_with_the_key_named(override, key):
    cfg = compose_config(override.split(" "))
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_policy_configs(cfg)


@pytest.mark.parametrize(
    ("model", "utilization", "param_offload"),
    [
        ("qwen2p5_math_1p5b", 0.5, False),
        ("openmath_nemotron_1p5b", 0.5, False),
        ("octothinker_3b", 0.5, True),
        ("qwen2p5_math_7b_instruct", 0.45, True),
    ],
)
def test_model_memory_defaults_for_two_vllm_engines(model, utilization, param_offload):
    configs = build_policy_configs(compose_config(["backend=vllm", f"model={model}"]))
    for pcfg in configs.values():
        rollout, fsdp = pcfg.actor_rollout_ref.rollout, pcfg.actor_rollout_ref.actor.fsdp_config
        assert rollout.gpu_memory_utilization == utilization and rollout.free_cache_engine
        assert fsdp.param_offload == param_offload and fsdp.optimizer_offload


def test_missing_policy_delta_is_a_clear_error():
    cfg = compose_config()
    with pytest.raises(ConfigError, match=r"critic\.verl"):
        policy_config(cfg, "critic")


def test_ray_init_carries_extensions_and_platform(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cfg = compose_config()
    env = worker_env_vars(cfg)
    assert env["VERL_USE_EXTERNAL_MODULES"] == "cpmobius.engine.extensions"
    assert env["VERL_PLATFORM"] == "cpu"
    kwargs = ray_init_kwargs(cfg)
    assert kwargs["num_gpus"] == 1  # logical GPUs for verl's resource pools on a CPU
    assert kwargs["address"] == "local"  # never a cluster another process left running
    assert kwargs["runtime_env"]["env_vars"]["VERL_USE_EXTERNAL_MODULES"] == "cpmobius.engine.extensions"
    gpu = compose_config(["backend=vllm"])
    assert "VERL_PLATFORM" in worker_env_vars(gpu) and worker_env_vars(gpu)["VERL_PLATFORM"] == "nvidia"
    assert "num_gpus" not in ray_init_kwargs(gpu)


def test_determinism_variables_reach_every_ray_worker(monkeypatch):
    # verl's main_ppo sets these before ray.init when a rollout asks for full determinism; its
    # runtime env alone would forward "0" for them (or the driver's own value: an earlier in-process
    # run's `apply_env_to_driver` must not decide this test).
    for key in ("VERL_FULL_DETERMINISM", "VLLM_BATCH_INVARIANT", "PYTHONHASHSEED"):
        monkeypatch.delenv(key, raising=False)
    cpu = ray_init_kwargs(compose_config())["runtime_env"]["env_vars"]  # backend=cpu: full_determinism on
    assert cpu["VERL_FULL_DETERMINISM"] == "1" and cpu["PYTHONHASHSEED"].isdigit()
    assert cpu.get("VLLM_BATCH_INVARIANT", "0") == "0"  # an HF rollout: no vLLM kernels to switch
    vllm = ray_init_kwargs(compose_config(["backend=vllm"]))["runtime_env"]["env_vars"]
    assert vllm.get("VERL_FULL_DETERMINISM", "0") == "0"
    one = ray_init_kwargs(compose_config(["backend=vllm", "+player.verl.rollout.full_determinism=true"]))
    assert one["runtime_env"]["env_vars"]["VERL_FULL_DETERMINISM"] == "1"
    assert one["runtime_env"]["env_vars"]["VLLM_BATCH_INVARIANT"] == "1"


def test_validate_rejects_hf_with_tensor_parallel():
    cfg = compose_config(["trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"])
    pcfg = policy_config(cfg, "player")
    with pytest.raises(ConfigError, match="rollout.name=hf"):
        validate_policy_config(pcfg, "player")


def test_a_wrong_value_that_verl_copies_into_another_key_names_the_key_the_user_set():
    """verl's ``actor.rollout_n`` copies ``rollout.n`` by interpolation: ``actor_rollout_ref.rollout.n=1.0`` was
    refused as ``actor.rollout_n`` alone, a key the user never wrote."""
    with pytest.raises(ConfigError) as refused:
        build_policy_configs(compose_config(["actor_rollout_ref.rollout.n=1.0"]))
    assert "rollout_n" in str(refused.value) and "expected int, got 1.0" in str(refused.value)
    assert str(refused.value).endswith("(copied from actor_rollout_ref.rollout.n: set that one)")
    with pytest.raises(ConfigError) as refused:  # a value set itself: no source to name
        build_policy_configs(compose_config(["actor_rollout_ref.actor.optim.lr=fast"]))
    assert "copied from" not in str(refused.value) and "expected float, got 'fast'" in str(refused.value)


@pytest.mark.parametrize(
    ("preset", "reward", "rollback"),
    [("paper_qwen_1p5b", "paper", False), ("released_qwen_1p5b", "released_uniform", True)],
)
def test_experiment_presets_compose_and_validate(preset, reward, rollback):
    from cpmobius.settings import load_settings

    cfg = compose_config([f"experiment={preset}"])
    settings = load_settings(cfg)
    configs = build_policy_configs(cfg)
    player, coach = configs["player"].actor_rollout_ref, configs["coach"].actor_rollout_ref
    assert settings.coach.reward == reward and settings.player.rollback.enabled is rollback
    assert (settings.player.n, settings.filter.quota) == (16, 16)  # n and m of the paper
    assert (settings.filter.band_low, settings.filter.band_high) == (0.2, 0.8)
    # the released fixed oversampling made 8-9 attempts a step at the 1.5B shape and fell short of the quota more often
    assert settings.filter.adaptive_oversample and settings.filter.coach_reserve == 1.0
    assert player.rollout.temperature == pytest.approx(0.6) and coach.rollout.temperature == pytest.approx(0.9)
    assert player.actor.entropy_coeff == pytest.approx(-0.01) and coach.actor.entropy_coeff == pytest.approx(0.01)
    assert player.actor.optim.lr == pytest.approx(1e-6) and coach.actor.optim.lr == pytest.approx(1e-6)
    assert player.actor.kl_loss_coef == pytest.approx(0.001) and player.actor.use_kl_loss
    assert player.rollout.name == "vllm" and player.rollout.prompt_length + player.rollout.response_length <= 4096
    assert settings.validation.dataset == "amc" and settings.validation.samples_per_problem == 10


def test_ray_address_joins_an_existing_cluster(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    kwargs = ray_init_kwargs(compose_config())
    assert kwargs["address"] == "auto" and "num_gpus" not in kwargs and "num_cpus" not in kwargs
    assert kwargs["runtime_env"]["env_vars"]["VERL_USE_EXTERNAL_MODULES"] == "cpmobius.engine.extensions"
