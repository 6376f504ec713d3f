"""The command line of ``python -m cpmobius.main``: a misspelt key anywhere is one line naming it and
the nearest valid key (exit 2, before anything starts), valid verl keys still pass, ``--help`` is short."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from cpmobius.config import ConfigError, compose_config
from cpmobius.config.known_keys import check_override_keys, config_groups, find_unknown_key
from cpmobius.engine.config import build_policy_configs
from cpmobius.usage import overrides_from_argv

REPO = Path(__file__).resolve().parents[2]


def run_main(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "cpmobius.main", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("override", "named", "nearest"),
    [
        ("+filtr.quota=4", "filtr.quota", "filter.quota"),
        ("filtr.quota=4", "filtr.quota", "filter.quota"),
        ("filter.quotaa=4", "filter.quotaa", "filter.quota"),
        ("player.verl.actor.optim.lrr=1", "player.verl.actor.optim.lrr", "player.verl.actor.optim.lr"),
        ("+player.verl.actor.optim.lrr=1", "player.verl.actor.optim.lrr", "player.verl.actor.optim.lr"),
        ("++coach.verl.rollout.temprature=0.5", "coach.verl.rollout.temprature", "coach.verl.rollout.temperature"),
        (
            "+actor_rollout_ref.actor.optim.lrr=1",
            "actor_rollout_ref.actor.optim.lrr",
            "actor_rollout_ref.actor.optim.lr",
        ),
        ("+player.verl.rollout={temperature:0.5,top_kk:3}", "player.verl.rollout.top_kk", "player.verl.rollout.top_k"),
        ("+trainer.total_trainig_steps=3", "trainer.total_trainig_steps", "trainer.total_training_steps"),
        # a field of verl's RolloutConfig dataclass that verl's YAML omits
        (
            "++player.verl.rollout.repetition_penaltyy=1.05",
            "player.verl.rollout.repetition_penaltyy",
            "player.verl.rollout.repetition_penalty",
        ),
    ],
)
def test_unknown_key_names_it_and_the_nearest_valid_one(override, named, nearest):
    with pytest.raises(ConfigError) as error:
        check_override_keys([override])
    message = str(error.value)
    assert message.startswith(f"{named}: unknown key (did you mean ")
    # the whole override, as it must be typed: ++ for a verl key the delta does not list
    typed = "" if "{" in override else f"={override.split('=', 1)[1]}"  # a dict's key: named, not typed
    assert message.endswith(f"{nearest}{typed}?)")


@pytest.mark.parametrize(
    ("section", "typo"), [("filter", "quotaa"), ("coach", "rewrd"), ("player.rollback", "patiense")]
)
def test_a_misspelt_key_in_a_config_file_reads_as_on_the_command_line(section, typo):
    """A preset YAML (composed, never typed) with a misspelt method key fails in `load_settings` with the
    line `check_override_keys` gives for the command line, naming the key alone: a file's value is not typed."""
    from omegaconf import OmegaConf, open_dict

    from cpmobius.config import compose_config
    from cpmobius.settings import load_settings

    with pytest.raises(ConfigError) as typed:
        check_override_keys([f"+{section}.{typo}=1"])
    cfg = compose_config([])
    if section == "player.rollback":
        with open_dict(cfg):
            cfg.player.rollback = {typo: 1}
    else:
        with open_dict(cfg):
            OmegaConf.update(cfg, f"{section}.{typo}", 1, force_add=True)
    with pytest.raises(ConfigError) as composed:
        load_settings(cfg)
    assert str(composed.value) == str(typed.value).replace("=1?)", "?)")  # the command line's adds the value


@pytest.mark.parametrize(
    ("override", "key", "value"),
    [
        ("player.verl.actor.optim.lr=1e-5", "player.actor_rollout_ref.actor.optim.lr", 1e-5),
        ("++player.verl.rollout.top_k=5", "player.actor_rollout_ref.rollout.top_k", 5),
        ("++coach.verl.actor.clip_ratio=0.3", "coach.actor_rollout_ref.actor.clip_ratio", 0.3),
        (
            "+actor_rollout_ref.model.override_config.rope_theta=10000",
            "player.actor_rollout_ref.model.override_config.rope_theta",
            10000,
        ),
        (
            "++player.verl.actor.fsdp_config.use_orig_params=true",
            "player.actor_rollout_ref.actor.fsdp_config.use_orig_params",
            True,
        ),
        ("++coach.verl.actor.fsdp_config.router_replay=null", None, None),  # a dataclass field, not in verl's YAML
        ("filter.quota=4", None, None),
        ("++model.pretrain.player_steps=10", None, None),
    ],
)
def test_valid_keys_pass_and_reach_the_policy(override, key, value):
    check_override_keys([override])  # no error
    if key is not None:
        configs = build_policy_configs(compose_config([override]))
        policy, path = key.split(".", 1)
        assert OmegaConf.select(configs[policy], path) == pytest.approx(value)


def test_key_of_another_group_option_is_checked_against_that_option():
    check_override_keys(["model=qwen2p5_math_1p5b", "model.player_path=/models/p"])
    with pytest.raises(ConfigError, match=r"model\.pretrain\.player_steps: unknown key"):
        check_override_keys(
            ["model=qwen2p5_math_1p5b", "++model.pretrain.player_steps=10"]
        )  # only model=tiny pretrains


def test_missing_group_option_lists_the_options():
    with pytest.raises(
        ConfigError, match=r"^backend=cpux: no such option \(did you mean backend=cpu\? options: cpu, cuda_hf, vllm\)$"
    ):
        check_override_keys(["backend=cpux", "filter.quota=4"])


def test_overrides_are_told_from_hydra_flags():
    argv = ["--cfg", "job", "filter.quota=4", "-m", "+x=1", "--info", "backend=cpu", "-cn", "cpmobius"]
    assert overrides_from_argv(argv) == ["filter.quota=4", "+x=1", "backend=cpu"]
    assert overrides_from_argv(["--cfg=job", "player.n=4"]) == ["player.n=4"]


def _leaf_paths(node: DictConfig, prefix: str = "") -> list[str]:
    paths = []
    for key in node:
        child = node._get_node(key)
        path = f"{prefix}{key}"
        paths += _leaf_paths(node[key], path + ".") if isinstance(child, DictConfig) and len(child) else [path]
    return paths


@pytest.fixture(scope="module")
def verl_tree() -> DictConfig:
    """verl 0.9.1's own ``ppo_trainer`` config, as the installed wheel composes it."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer")


@pytest.mark.parametrize("experiment", [None, *config_groups()["experiment"]])
def test_every_preset_sets_only_keys_verl_knows(experiment, verl_tree):
    """The config files themselves: what the main config, a backend, a model or a preset sets under
    ``actor_rollout_ref`` or a policy delta is a key of verl's own ``actor_rollout_ref`` tree."""
    cfg = compose_config([f"experiment={experiment}"] if experiment else [])
    keys = [f"actor_rollout_ref.{path}" for path in _leaf_paths(cfg.actor_rollout_ref)]
    keys += [f"actor_rollout_ref.{path}" for policy in ("coach", "player") for path in _leaf_paths(cfg[policy].verl)]
    unknown = [reason for key in keys if (reason := find_unknown_key(verl_tree, key)) is not None]
    assert not unknown, unknown


@pytest.mark.parametrize(
    "args", [["+filtr.quota=4"], ["filtr.quota=4"], ["--cfg", "job", "filtr.quota=4"], ["--cfg=job", "+filtr.quota=4"]]
)
def test_misspelt_key_exits_2_with_one_line_before_anything_starts(tmp_path, args):
    out = tmp_path / "run"
    done = run_main(f"trainer.default_local_dir={out}", *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == "config error: filtr.quota: unknown key (did you mean filter.quota=4?)"
    assert not out.exists()  # no Hydra folder, no toy models, no Ray


def test_help_is_short_and_points_at_the_full_config():
    done = run_main("--help")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert 20 < len(lines) < 60
    for needle in (
        "backend=",
        "model=",
        "experiment=",
        "cpu*",
        "tiny*",
        "paper_qwen_1p5b",
        "--cfg job",
        "filter.quota=8",
        "player.n=8",
        "trainer.default_local_dir=",
        "exit 130",
    ):
        assert needle in done.stdout, needle


def test_cfg_job_prints_the_config_with_valid_verl_keys_set():
    done = run_main("--cfg", "job", "player.verl.actor.optim.lr=1e-5", "++player.verl.rollout.top_k=5")
    assert done.returncode == 0, done.stderr[-2000:]
    cfg = OmegaConf.create(done.stdout)
    assert cfg.player.verl.actor.optim.lr == pytest.approx(1e-5) and cfg.player.verl.rollout.top_k == 5


# --------------------------------------------------------------------------- hints that work as printed

# Each command line is refused with a hint; the hint's override(s), typed as printed (in place of the refused
# override, or beside the command line), make the same command line valid.
HINTED = [
    ("filtr.quota=4", "did you mean ", "instead"),
    ("+filtr.quota=4", "did you mean ", "instead"),
    ("player.verl.rollout.topk=5", "did you mean ", "instead"),  # a verl key the Player's delta lacks: ++
    ("player.verl.rollout.top_k=5", "add it with ++: ", "instead"),  # Hydra's bare "Could not override" before
    ("player.verl.model.use_liger=false", "add it with ++: ", "instead"),
    ("+filter.quota=4", "without +: ", "instead"),  # Hydra's "Could not append ... already at" before
    ("validation.samples_per_problem=4", "or set ", "beside"),  # the toy's expected accuracy needs greedy
    ("validation.dataset=amc", "add ", "beside"),  # likewise, and the toy Coach's world-only check
    ("method=rent warmup.enabled=true", "set ", "beside"),
]


def printed_fix(message: str, marker: str) -> list[str]:
    """The override(s) a one-line hint prints after ``marker``: ``key=value`` words up to the first other word."""
    fixes = []
    for word in message.split(marker, 1)[1].replace("?)", " ").split():
        if "=" not in word:
            break
        fixes.append(word.rstrip(")"))
    assert fixes, message
    return fixes


@pytest.mark.parametrize(("typed", "marker", "where"), HINTED)
def test_a_hint_followed_as_printed_makes_the_command_line_valid(capsys, typed, marker, where):
    from cpmobius.main import print_validated_config

    args = typed.split()
    assert print_validated_config(["--cfg", "job", *args]) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("config error: ") and "\n" not in message
    fixes = printed_fix(message, marker)
    if where == "instead":
        args = []
    else:  # a later override of the same key wins, as on the command line
        keys = {fix.lstrip("+").split("=")[0] for fix in fixes}
        args = [arg for arg in args if arg.lstrip("+").split("=")[0] not in keys]
    assert print_validated_config(["--cfg", "job", *args, *fixes]) == 0, capsys.readouterr().err
