"""QA cases: truncated samples in Δt validation, run keys checked before start-up, prompt + response
within the model's context."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf
from stand_ins import ScriptedPolicy

from cpmobius.config import ConfigError, compose_config, validate_run_config
from cpmobius.engine.config import build_policy_configs
from cpmobius.engine.model_context import read_model_context
from cpmobius.settings import ValidationSettings, load_settings
from cpmobius.validation import ValidationSet, measure_accuracy

RETRACTED = "My first guess is \\boxed{5}. Let me recheck: 2 + 3 is not what was asked, so the answer is"

# =========================================================================== Δt validation (truncated samples)


def answering(samples: list[tuple[str, bool]]) -> ScriptedPolicy:
    """A Player answering every prompt with the given (text, truncated) samples, in order."""
    return ScriptedPolicy(lambda prompt, i: [text for text, _ in samples], truncated={t for t, cut in samples if cut})


@pytest.mark.parametrize(
    ("samples", "accuracy", "no_answer"),
    [
        ([(RETRACTED, True)], 0.0, 1),  # cut at the length limit: the earlier, retracted box is no answer
        ([(RETRACTED, False)], 1.0, 0),  # the same text finished: its last box, 5, is its answer
        ([("so \\boxed{5}", False), (RETRACTED, True)], 0.5, 1),  # k = 2: 1 correct of 2 → 0.5
    ],
)
def test_validation_gives_a_truncated_sample_no_answer(samples, accuracy, no_answer):
    k = len(samples)
    settings = ValidationSettings(greedy=k == 1, samples_per_problem=k)
    result = measure_accuracy(answering(samples), ValidationSet("v", ["v-0"], ["What is 2 + 3?"], ["5"]), settings)
    assert result.accuracy == accuracy
    assert result.grade_counts["no_answer"] == no_answer
    assert result.truncated == sum(cut for _, cut in samples)
    assert result.truncated_frac == result.truncated / k


# =========================================================================== run keys (no resume that skips work)


@pytest.fixture(scope="module")
def default_cfg():
    return compose_config()


def with_values(cfg, **values):
    cfg = OmegaConf.create(OmegaConf.to_container(cfg))
    for key, value in values.items():
        OmegaConf.update(cfg, key.replace("__", "."), value)
    return cfg


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("trainer.total_training_steps", "abc"),  # int() was first called inside fit, after Ray
        ("trainer.total_training_steps", 0),  # 0 steps run, exit 0
        ("trainer.total_training_steps", -3),
        ("trainer.total_training_steps", 2.5),
        ("trainer.total_training_steps", None),  # verl derives it from a dataloader; the loop has none
        ("trainer.save_freq", -5),
        ("trainer.logger", ["bogus"]),
        ("trainer.logger", "console"),  # a bare string would be read as letters
        ("trainer.nnodes", 0),
        ("trainer.n_gpus_per_node", "abc"),
        ("trainer.max_actor_ckpt_to_keep", 0),
        ("trainer.resume_mode", "sometimes"),
        ("trainer.resume_mode", "resume_path"),  # names trainer.resume_from_path, which is null
        ("data.max_response_length", -1),
        ("data.max_prompt_length", 0),
    ],
)
def test_bad_run_keys_are_rejected_by_load_settings(default_cfg, key, value):
    cfg = with_values(default_cfg, **{key: value})
    named = "^" + key.replace(".", r"\.") + ("|^trainer\\.resume_from_path" if value == "resume_path" else "")
    with pytest.raises(ConfigError, match=named):
        load_settings(cfg)
    with pytest.raises(ConfigError, match=named):
        build_policy_configs(cfg)  # the policy path checks them too


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("trainer.save_freq", -1),  # verl's "never" (the last step is still saved)
        ("trainer.save_freq", 0),  # also never in verl (it saves when save_freq > 0)
        ("trainer.save_freq", 3),
        ("trainer.logger", []),
        ("trainer.logger", ["console", "file", "tensorboard", "wandb"]),
        ("trainer.total_training_steps", 1),
        ("trainer.max_actor_ckpt_to_keep", None),
        ("trainer.max_actor_ckpt_to_keep", 1),
    ],
)
def test_valid_verl_run_values_stay_valid(default_cfg, key, value):
    validate_run_config(with_values(default_cfg, **{key: value}))


def test_partial_configs_without_trainer_or_data_pass():
    validate_run_config(OmegaConf.create({"coach": {}, "player": {}}))


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("trainer.total_training_steps=abc", "trainer.total_training_steps"),
        ("coach.verl.rollout.response_length=0", "coach.verl.rollout.response_length"),
    ],
)
def test_cfg_job_rejects_bad_run_keys(override, key, capsys):
    # the `--cfg job` path end to end (the other keys: test_bad_run_keys_are_rejected_by_load_settings)
    from cpmobius.main import print_validated_config

    assert print_validated_config(["--cfg", "job", override]) == 2
    assert f"config error: {key}:" in capsys.readouterr().err


# =========================================================================== model context


def model_folder(tmp_path, name="m", **config):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", **config}))
    return str(folder)


def qwen_cfg(path, *overrides):
    # Qwen2.5-Math-1.5B's shape: max_position_embeddings 4096
    return compose_config(
        [
            "model=qwen2p5_math_1p5b",
            f"model.player_path={path}",
            f"model.coach_path={path}",
            "data.max_prompt_length=1024",
            *overrides,
        ]
    )


def test_prompt_plus_response_over_the_context_is_rejected(tmp_path):
    path = model_folder(tmp_path, max_position_embeddings=4096)
    with pytest.raises(ConfigError, match=r"1024 \+ 4096 = 5120 tokens exceed .* 4096 tokens"):
        build_policy_configs(qwen_cfg(path, "data.max_response_length=4096"))
    build_policy_configs(qwen_cfg(path, "data.max_response_length=3072"))  # 1024 + 3072 = 4096 fits exactly


def test_a_policys_own_response_length_is_checked(tmp_path):
    path = model_folder(tmp_path, max_position_embeddings=4096)
    cfg = qwen_cfg(path, "data.max_response_length=2048", "coach.verl.rollout.response_length=3500")
    with pytest.raises(ConfigError, match=r"coach\.verl\.rollout\.response_length.*1024 \+ 3500 = 4524"):
        build_policy_configs(cfg)


def test_cfg_job_rejects_a_context_overrun(tmp_path, capsys):
    from cpmobius.main import print_validated_config

    path = model_folder(tmp_path, max_position_embeddings=4096)
    argv = [
        "--cfg",
        "job",
        "model=qwen2p5_math_1p5b",
        f"model.player_path={path}",
        f"model.coach_path={path}",
        "data.max_prompt_length=1024",
        "data.max_response_length=4096",
    ]
    assert print_validated_config(argv) == 2
    assert "exceed the context" in capsys.readouterr().err


def test_context_check_is_skipped_without_a_model_folder_or_a_stated_context(tmp_path):
    build_policy_configs(
        qwen_cfg(str(tmp_path / "not-fetched-yet"), "data.max_response_length=4096", "model.context_tokens=null")
    )


@pytest.mark.parametrize("model", ["qwen2p5_math_1p5b", "qwen2p5_math_7b_instruct"])
def test_the_presets_stated_context_applies_before_the_fetch(tmp_path, model):
    # both models' config.json say max_position_embeddings 4096; the preset states it, so an overrun fails
    # at start-up even before `models fetch`
    cfg = compose_config(
        [
            f"model={model}",
            f"model.player_path={tmp_path / 'p'}",
            f"model.coach_path={tmp_path / 'c'}",
            "data.max_prompt_length=1024",
            "data.max_response_length=4096",
        ]
    )
    assert cfg.model.context_tokens == 4096
    with pytest.raises(ConfigError, match=r"5120 tokens exceed .* 4096 tokens \(model\.context_tokens\)"):
        build_policy_configs(cfg)


def test_coach_warmup_length_is_checked_against_the_context(tmp_path):
    path = model_folder(tmp_path, max_position_embeddings=4096)
    with pytest.raises(ConfigError, match=r"^warmup\.max_length"):
        build_policy_configs(
            qwen_cfg(path, "data.max_response_length=2048", "warmup.enabled=true", "warmup.max_length=8192")
        )


@pytest.mark.parametrize(
    ("config", "override", "context"),
    [
        ({"max_position_embeddings": 4096}, None, 4096),
        ({"text_config": {"max_position_embeddings": 8192}}, None, 8192),  # nested (multimodal) config
        # YaRN: original_max_position_embeddings × factor = 4096 × 4 (as vLLM derives it)
        (
            {
                "max_position_embeddings": 4096,
                "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
            },
            None,
            16384,
        ),
        # llama3 scaling: max_position_embeddings already states the scaled length
        ({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 32.0}}, None, 131072),
        ({"max_position_embeddings": 4096}, {"max_position_embeddings": 8192}, 8192),  # override_config wins
        ({"max_position_embeddings": 4096}, {"rope_scaling": {"type": "linear", "factor": 2.0}}, 8192),
    ],
)
def test_read_model_context(tmp_path, config, override, context):
    path = model_folder(tmp_path, **config)
    assert read_model_context(path, override) == (context, f"{path}/config.json")


def test_read_model_context_without_a_config(tmp_path):
    assert read_model_context(str(tmp_path)) is None  # a folder without config.json
    assert read_model_context("no-such-org/no-such-model-for-cpmobius") is None  # a hub id not in the cache


# =========================================================================== packages a preset needs


@pytest.mark.parametrize("backend", ["vllm", "cuda_hf"])
def test_a_gpu_preset_without_liger_installed_is_refused_at_a_runs_start(tmp_path, monkeypatch, backend):
    import importlib.util

    from cpmobius.engine import config as engine_config
    from cpmobius.engine.config import check_kernel_packages

    path = model_folder(tmp_path, max_position_embeddings=4096)
    cfg = qwen_cfg(path, f"backend={backend}")
    configs = build_policy_configs(cfg)  # composing and validating need neither package
    assert cfg.actor_rollout_ref.model.use_liger  # the GPU presets' update and log-prob passes use Liger's kernels
    real_find_spec = importlib.util.find_spec

    def installed(*present):  # Liger and Triton as if only ``present`` were installed
        return lambda name, *rest: (
            (object() if name in present else None) if name in ("liger_kernel", "triton") else real_find_spec(name)
        )

    monkeypatch.setattr(engine_config.importlib.util, "find_spec", installed("triton"))
    with pytest.raises(ConfigError, match=r"coach\.verl\.model\.use_liger: .* need liger_kernel, not installed"):
        check_kernel_packages(cfg, configs)
    monkeypatch.setattr(engine_config.importlib.util, "find_spec", installed())
    with pytest.raises(ConfigError, match=r"need liger_kernel and triton, not installed") as refused:
        check_kernel_packages(cfg, configs)
    monkeypatch.setattr(engine_config.importlib.util, "find_spec", installed("liger_kernel", "triton"))
    check_kernel_packages(cfg, configs)  # both installed: accepted
    monkeypatch.setattr(engine_config.importlib.util, "find_spec", installed())
    # the printed overrides, typed as printed, compose (no Hydra "Could not override") and turn Liger off
    fixes = str(refused.value).rsplit("without them pass ", 1)[1].rstrip(")").split()
    assert fixes == ["actor_rollout_ref.model.use_liger=false"]  # the key the GPU backends set, for both policies
    fixed = qwen_cfg(path, f"backend={backend}", *fixes)
    check_kernel_packages(fixed, build_policy_configs(fixed))
    # a policy's own delta that turns Liger on is named as that key, beside the shared one
    own = qwen_cfg(path, f"backend={backend}", "++player.verl.model.use_liger=true", *fixes)
    with pytest.raises(ConfigError, match=r"without them pass player\.verl\.model\.use_liger=false\)$"):
        check_kernel_packages(own, build_policy_configs(own))
    fixed = qwen_cfg(
        path, f"backend={backend}", "++player.verl.model.use_liger=true", *fixes, "player.verl.model.use_liger=false"
    )
    check_kernel_packages(fixed, build_policy_configs(fixed))
