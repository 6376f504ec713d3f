"""Every hint the training command prints works when followed as printed.

Each test makes the program print its hint (a refused command line, a start-up stop, the line of a failed save or
an interrupt), takes the overrides or the command out of that very text, applies them to the same command line,
and checks that the command line is then accepted (the checks of ``python -m cpmobius.main --cfg job``, in-process)
and that what the hint says changes did change. The hints of a misspelt key, a key to add with ``++`` and a key to
set without ``+`` are followed in `test_command_line`; those of the evaluation and model tools and of the install
script in `test_hints_followed_tools`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf
from test_scripts import handed_to_python

from cpmobius.config import ConfigError, compose_config
from cpmobius.config.known_keys import check_override_keys
from cpmobius.engine.config import build_policy_configs, check_kernel_packages
from cpmobius.main import print_validated_config
from cpmobius.settings import load_settings

REPO = Path(__file__).resolve().parents[1]


def validated(capsys, args: list[str]) -> tuple[int, str, str]:
    """``python -m cpmobius.main --cfg job ARGS`` in-process: (exit code, the resolved config, the error line)."""
    code = print_validated_config(["--cfg", "job", *args])
    out, err = capsys.readouterr()
    return code, out, err.strip()


def accepted(args: list[str]) -> tuple[DictConfig, dict[str, DictConfig]]:
    """The config of the command line ``args`` and its policies' verl configs, after the checks ``--cfg job`` makes
    (`print_validated_config`: every key, the method's settings, both policies); raises on a refused one."""
    check_override_keys(args)
    cfg = compose_config(args)
    load_settings(cfg)
    return cfg, build_policy_configs(cfg)


def printed_fix(message: str, marker: str) -> list[str]:
    """The override(s) a one-line hint prints after ``marker``: the ``key=value`` words up to the first other word,
    without the sentence's punctuation after them."""
    fixes = []
    for word in message.split(marker, 1)[1].split():
        if "=" not in word:
            break
        fixes.append(word.rstrip("?),;"))
    assert fixes, message
    return fixes


# --------------------------------------------------------------------------- refused command lines

# (command line, what the hint's override(s) follow in the message, instead of the refused override or beside it)
REFUSED = [
    ("validation.samples_per_problem=4", "or set ", "beside"),
    ("validation.greedy=false", "set ", "beside"),  # the toy's expected accuracy logs a greedy pass
    ("validation.metric=greedy validation.dataset=amc", "set ", "beside"),  # the toy Coach proposes world problems
    ("method=rent method.last_fraction=0.5", "exactly when ", "beside"),
    ("backend=cpux", "did you mean ", "instead"),  # a group option that does not exist
    ("trainer.logger=console", "e.g. ", "instead"),
]


@pytest.mark.parametrize(("typed", "marker", "where"), REFUSED)
def test_a_refused_command_line_is_accepted_with_the_printed_overrides_and_they_take_effect(
    capsys, typed, marker, where
):
    args = typed.split()
    code, _, message = validated(capsys, args)
    assert code == 2 and message.startswith("config error: ") and "\n" not in message, message
    fixes = printed_fix(message, marker)
    keys = {fix.lstrip("+").split("=")[0] for fix in fixes}
    kept = [] if where == "instead" else [arg for arg in args if arg.lstrip("+").split("=")[0] not in keys]
    code, resolved, error = validated(capsys, [*kept, *fixes])
    assert code == 0, error
    cfg = OmegaConf.create(resolved)
    for fix in fixes:
        key, value = fix.lstrip("+").split("=", 1)
        if key == "backend":  # a group option: its platform
            assert cfg.backend.platform == value, fix
        else:
            found = OmegaConf.select(cfg, key)
            assert (OmegaConf.to_object(found) if OmegaConf.is_config(found) else found) == yaml.safe_load(value)


def test_use_1_names_the_refused_key_and_makes_the_command_line_valid(capsys):
    """``validation.samples_per_problem: ... use 1, or set ...``: the first way out is the refused key set to 1."""
    code, _, message = validated(capsys, ["validation.samples_per_problem=4"])
    key, value = re.fullmatch(r"config error: ([\w.]+): .*: use (\S+), or set .*", message).groups()
    code, resolved, error = validated(capsys, [f"{key}={value}"])
    assert code == 0, error
    assert OmegaConf.create(resolved).validation.samples_per_problem == 1


def test_set_it_in_its_range_when_the_window_asks_for_it(capsys):
    """``method.last_fraction: set it (in (0, 1]) exactly when method.entropy_window=last_fraction``: the key the
    line names, set to a value of the printed range, is accepted."""
    code, _, message = validated(capsys, ["method=rent", "method.entropy_window=last_fraction"])
    key, low, high = re.fullmatch(
        r"config error: ([\w.]+): set it \(in \((\d+), (\d+)\]\) exactly when .*", message
    ).groups()
    for value in (high, (float(low) + float(high)) / 2):
        code, resolved, error = validated(
            capsys, ["method=rent", "method.entropy_window=last_fraction", f"{key}={value}"]
        )
        assert code == 0, error
        assert OmegaConf.select(OmegaConf.create(resolved), key) == float(value)


def test_a_misspelt_key_inside_a_typed_dict_is_named_as_the_key_to_write_there(capsys):
    typed = "+player.verl.rollout={temperature:0.5,top_kk:3}"
    code, _, message = validated(capsys, [typed])
    wrong, right = re.fullmatch(r"config error: ([\w.]+): unknown key \(did you mean ([\w.]+)\?\)", message).groups()
    fixed = typed.replace(f"{wrong.rsplit('.', 1)[1]}:", f"{right.rsplit('.', 1)[1]}:")
    code, resolved, error = validated(capsys, [fixed])
    assert code == 0, error
    assert OmegaConf.create(resolved).player.verl.rollout.top_k == 3


# --------------------------------------------------------------------------- a GPU launch script on a CPU machine


@pytest.fixture
def paper_launch(tmp_path, hub_offline) -> list[str]:
    """``bash scripts/train_qwen_1p5b.sh``'s command line (the paper preset on the vLLM backend), hub switched off."""
    return handed_to_python(tmp_path, "train_qwen_1p5b.sh")[0]


def test_the_liger_stop_of_a_launch_script_is_followed_as_printed(paper_launch, capsys, monkeypatch):
    """Liger and Triton missing (a CPU machine): the printed override, added to the script's own command line,
    composes (no Hydra "Could not override") and turns Liger off for both policies, so the run goes past the stop."""
    import importlib.util

    from cpmobius.engine import config as engine_config

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        engine_config.importlib.util,
        "find_spec",
        lambda name, *rest: None if name in ("liger_kernel", "triton") else real_find_spec(name, *rest),
    )
    cfg = compose_config(paper_launch)
    with pytest.raises(ConfigError) as stopped:
        check_kernel_packages(cfg, build_policy_configs(cfg))
    fixes = printed_fix(str(stopped.value), "without them pass ")
    code, resolved, error = validated(capsys, [*paper_launch, *fixes])
    assert code == 0, error
    cfg = compose_config([*paper_launch, *fixes])
    configs = build_policy_configs(cfg)
    check_kernel_packages(cfg, configs)
    assert [c.actor_rollout_ref.model.use_liger for c in configs.values()] == [False, False]
    assert OmegaConf.create(resolved).actor_rollout_ref.rollout.name == "vllm"  # nothing else changed


def test_the_cpu_torch_stop_of_a_launch_script_is_followed_with_the_printed_backend(paper_launch, capsys, monkeypatch):
    """A CPU build of torch on a machine with an NVIDIA driver: ``run with backend=cpu`` on the script's command line
    is accepted and passes the driver and kernel checks (the other way out, the GPU install, is
    `test_hints_followed_tools`'s)."""
    from cpmobius.engine import gpu_driver

    monkeypatch.setattr(gpu_driver, "driver_version", lambda: "580.65.06")
    monkeypatch.setattr("torch.version.cuda", None)
    cfg = compose_config(paper_launch)
    with pytest.raises(gpu_driver.GpuDriverError) as stopped:
        gpu_driver.check_this_machine(str(cfg.backend.platform))
    fixes = printed_fix(str(stopped.value), "run with ")
    code, resolved, error = validated(capsys, [*paper_launch, *fixes])
    assert code == 0, error
    cfg = compose_config([*paper_launch, *fixes])
    assert cfg.backend.platform == "cpu"
    gpu_driver.check_this_machine(str(cfg.backend.platform))
    check_kernel_packages(cfg, build_policy_configs(cfg))


# --------------------------------------------------------------------------- a budget over the model's context


@pytest.mark.parametrize("fetched", [False, True], ids=["the preset's stated context", "a model folder"])
def test_the_printed_rope_override_makes_a_budget_over_the_context_fit(tmp_path, capsys, hub_offline, fetched):
    """Qwen2.5-Math-1.5B (4,096 positions) with 5,000 response tokens: the override the refusal prints extends
    RoPE far enough, whether the context comes from the model's ``config.json`` or, before the model is fetched,
    from the preset's ``model.context_tokens``."""
    args = ["model=qwen2p5_math_1p5b", "data.max_response_length=5000"]
    if fetched:
        (tmp_path / "model").mkdir()
        (tmp_path / "model" / "config.json").write_text('{"model_type": "qwen2", "max_position_embeddings": 4096}')
        args += [f"model.player_path={tmp_path / 'model'}", f"model.coach_path={tmp_path / 'model'}"]
    code, _, message = validated(capsys, args)
    assert code == 2 and "exceed the context" in message, message
    fixes = printed_fix(message, "extend RoPE: ")
    code, _, error = validated(capsys, [*args, *fixes])
    assert code == 0, error
    for policy in accepted([*args, *fixes])[1].values():  # both policies' models get it
        rope = policy.actor_rollout_ref.model.override_config.rope_scaling
        assert rope.rope_type == "yarn" and rope.factor * rope.original_max_position_embeddings >= 128 + 5000


# --------------------------------------------------------------------------- lines of a running run, and usages


def test_the_agent_loop_line_names_the_key_that_gives_back_the_sampling_values(capsys):
    """verl's own agent loop (``single_turn_agent``) reports no sampling values: the printed override, beside that
    command line, is accepted and gives both policies the agent loop that reports them."""
    from types import SimpleNamespace

    from cpmobius.engine.batches import sampling_used

    args = ["actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent"]
    with pytest.raises(RuntimeError) as stopped:
        sampling_used(SimpleNamespace(non_tensor_batch={}), "coach")
    fixes = printed_fix(str(stopped.value), "set ")
    code, _, error = validated(capsys, [*args, *fixes])
    assert code == 0, error
    (key, value), configs = fixes[0].split("="), accepted([*args, *fixes])[1]
    assert [OmegaConf.select(c, key) for c in configs.values()] == [value, value]


def test_a_prompt_over_the_limit_fits_once_the_key_the_line_names_is_raised(capsys):
    """``... exceed rollout.prompt_length=4 tokens (data.max_prompt_length); prompt 0 has 9``: that key set to the
    prompt's length reaches both policies' limit, and the prompt then passes."""
    from types import SimpleNamespace

    from cpmobius.engine.prompt_tokens import PromptTokens

    tokenizer = SimpleNamespace(apply_chat_template=lambda messages, **options: list(messages[0]["content"]))
    prompt = [{"role": "user", "content": "123456789"}]
    with pytest.raises(Exception) as refused:
        PromptTokens("coach", tokenizer, {}, limit=4).check([prompt])
    key, tokens = re.search(r"tokens \(([\w.]+)\); prompt \d+ has (\d+)", str(refused.value)).groups()
    code, _, error = validated(capsys, [f"{key}={tokens}"])
    assert code == 0, error
    for config in accepted([f"{key}={tokens}"])[1].values():
        PromptTokens("coach", tokenizer, {}, limit=int(config.actor_rollout_ref.rollout.prompt_length)).check([prompt])


def test_the_commands_the_warmups_usage_names_run(capsys):
    """``python -m cpmobius.warmup --help``: its ``python -m cpmobius.main ...`` line is accepted, and the verl module
    it names for the SFT options is installed."""
    import importlib.util

    usage = subprocess.run(
        [sys.executable, "-m", "cpmobius.warmup", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60
    ).stdout
    (line,) = re.findall(r"python -m cpmobius\.main (warmup\.\S+=.*?) \.\.\.", usage)
    code, resolved, error = validated(capsys, line.split())
    assert code == 0, error
    assert OmegaConf.create(resolved).warmup.epochs == 2
    (module,) = re.findall(r"python -m (verl\.\S+) --help", usage)
    assert importlib.util.find_spec(module) is not None


def test_the_settings_the_short_help_shows_are_accepted_typed_as_shown(capsys):
    """``--help``'s keys with this command line's values, typed back as shown, are accepted and shown the same; the
    keys it names in passing exist."""
    from cpmobius.usage import short_help

    text = short_help(["filter.quota=4"])
    shown = re.findall(r"^  ([\w.]+=\S+)", text, re.M)
    assert "filter.quota=4" in shown and len(shown) > 10
    code, resolved, error = validated(capsys, shown)
    assert code == 0, error
    assert re.findall(r"^  ([\w.]+=\S+)", short_help(shown), re.M) == shown
    cfg = OmegaConf.create(resolved)
    for names in re.findall(r"\((?:one|ablations): ([\w.]+(?:, [\w.]+)*)\)", text):
        for name in names.split(", "):
            assert OmegaConf.select(cfg, name, default="missing") != "missing", name


def test_a_misspelt_key_in_a_config_file_is_fixed_by_the_key_the_line_names():
    """A preset whose ``filter.quotaa`` is misspelt: the key the line names, written there instead, is read."""
    from omegaconf import open_dict

    cfg = compose_config([])
    with open_dict(cfg):
        cfg.filter.quotaa = 4
    with pytest.raises(ConfigError) as refused:
        load_settings(cfg)
    wrong, right = re.fullmatch(r"([\w.]+): unknown key \(did you mean ([\w.]+)\?\)", str(refused.value)).groups()
    with open_dict(cfg):
        OmegaConf.update(cfg, right, OmegaConf.select(cfg, wrong))
        cfg.filter.pop(wrong.rsplit(".", 1)[1])
    assert load_settings(cfg).filter.quota == 4
