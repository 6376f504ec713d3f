"""The cluster launch scripts (CPMöbius's four, the baselines' three): each composes and validates its preset with ``--cfg job``
without starting Ray or touching a GPU, and a wrong value fails naming the key.

One script runs whole (bash, then ``python -m cpmobius.main --cfg job``); for the others the command line and
environment their bash hands to Python are taken as they are (a ``python`` first on PATH that records them) and
given to the same ``--cfg job`` in this process: a Python start with verl's import costs 8-12 s of the suite each."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = {
    "train_qwen_1p5b.sh": "paper_qwen_1p5b",
    "train_qwen_7b_instruct.sh": "released_qwen_7b_instruct",
    "train_openmath_nemotron_1p5b.sh": "released_openmath_nemotron_1p5b",
    "train_octothinker_3b.sh": "released_octothinker_3b",
    "train_qwen_1p5b_ttrl.sh": "ttrl_qwen_1p5b",
    "train_qwen_1p5b_rent.sh": "rent_qwen_1p5b",
    "train_qwen_1p5b_rzero.sh": "rzero_qwen_1p5b",
}
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
# What the launcher exports for Python (scripts/launch.sh): the rest of the environment is the test's own.
EXPORTED = ("CPMOBIUS_DATA_DIR", "PLAYER_MODEL_PATH", "COACH_MODEL_PATH")


def run_script(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / name), *args], capture_output=True, text=True, timeout=300, env=env or ENV
    )


def handed_to_python(tmp_path: Path, name: str, *args: str, env: dict[str, str] | None = None):
    """The arguments after ``python -m cpmobius.main`` and the launcher's exported variables with which script
    ``name`` starts Python, recorded by a ``python`` first on PATH in place of the interpreter."""
    recorder = tmp_path / "bin" / "python"
    recorder.parent.mkdir(exist_ok=True)
    recorder.write_text('#!/bin/sh\nprintf \'%s\\0\' "$@" > "$0.args"\nenv -0 > "$0.env"\n')
    recorder.chmod(0o755)
    base = env or ENV
    done = run_script(name, *args, env={**base, "PATH": f"{recorder.parent}{os.pathsep}{base['PATH']}"})
    assert done.returncode == 0, done.stderr[-2000:]
    argv = Path(f"{recorder}.args").read_bytes().decode().split("\0")[:-1]
    assert argv[:2] == ["-m", "cpmobius.main"], argv
    pairs = (item.split("=", 1) for item in Path(f"{recorder}.env").read_bytes().decode().split("\0") if "=" in item)
    return argv[2:], {key: value for key, value in pairs if key in EXPORTED}


def cfg_job(argv: list[str], exported: dict[str, str], monkeypatch) -> tuple[int, str, str]:
    """``python -m cpmobius.main <argv>`` with ``--cfg job``, in this process, from the repository root as the
    launcher runs it: (exit code, stdout, stderr)."""
    from cpmobius.main import print_validated_config

    assert "--cfg" in argv
    monkeypatch.chdir(REPO)
    for key in EXPORTED:
        monkeypatch.delenv(key, raising=False)
    for key, value in exported.items():
        monkeypatch.setenv(key, value)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = print_validated_config(argv)
    return code, out.getvalue(), err.getvalue()


def script_config(tmp_path, monkeypatch, name: str, *args: str, env: dict[str, str] | None = None) -> str:
    """The config script ``name`` prints with ``--cfg job`` (``train_qwen_1p5b.sh`` run whole, the others' command
    lines given to the same ``--cfg job`` here)."""
    if name == "train_qwen_1p5b.sh":
        done = run_script(name, *args, "--cfg", "job", env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout
    code, out, err = cfg_job(*handed_to_python(tmp_path, name, *args, "--cfg", "job", env=env), monkeypatch)
    assert code == 0, err[-2000:]
    return out


@pytest.mark.parametrize(("script", "experiment"), sorted(SCRIPTS.items()))
def test_script_prints_a_resolved_validated_config(script, experiment, tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    printed = script_config(tmp_path, monkeypatch, script)
    cfg = OmegaConf.create(printed)
    assert cfg.trainer.experiment_name == experiment
    assert cfg.trainer.default_local_dir == f"checkpoints/{experiment}"  # each script its own folder
    assert cfg.actor_rollout_ref.rollout.name == "vllm" and cfg.trainer.n_gpus_per_node == 8
    assert "${" not in printed  # fully resolved
    prompt, response = cfg.data.max_prompt_length, cfg.data.max_response_length
    assert prompt + response <= (4096 if "qwen" in script else 131072)  # Qwen2.5-Math has 4,096 positions
    if "octothinker" in script or "nemotron" in script:
        assert cfg.player.verl.model.custom_chat_template.startswith("A conversation between User and Assistant")


def test_script_rejects_a_wrong_value_naming_the_key():
    done = run_script("train_qwen_1p5b.sh", "--cfg", "job", "filter.band_high=1.5")
    assert done.returncode == 2 and "filter.band_high" in done.stderr


def test_zero_template_renders_the_released_player_prompt(model_cache):
    from cpmobius.config import compose_config
    from cpmobius.engine.config import policy_config
    from cpmobius.toy.tiny_models import build_char_tokenizer

    cfg = compose_config(["experiment=released_octothinker_3b"])
    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = policy_config(cfg, "player").actor_rollout_ref.model.custom_chat_template
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 2?"}], add_generation_prompt=True, tokenize=False
    )
    assert text.endswith("\\boxed{}.\n\nUser: What is 2 + 2?.\nAssistant: Let me solve this step by step.")


def test_rzero_script_runs_the_released_schedule_and_sizes_without_a_warm_up(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(script_config(tmp_path, monkeypatch, "train_qwen_1p5b_rzero.sh"))
    method = cfg.method
    assert (method.name, method.challenger_steps, method.solver_steps) == ("rzero", 5, 15)
    assert (method.challenger_prompts, method.challenger_n, method.reward_votes) == (512, 4, 10)
    assert (method.solver_questions, method.solver_votes, method.prompts_per_step) == (8000, 9, 512)
    assert method.challenger_format == "tags" and cfg.player.n == 5 and not cfg.warmup.enabled
    assert cfg.data.max_response_length == 3072 and cfg.trainer.total_training_steps == 60  # 3 iterations of 20


def test_the_launcher_folders_a_method_on_a_preset_apart_and_ckpt_dir_wins(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    printed = script_config(tmp_path, monkeypatch, "launch.sh", "paper_qwen_1p5b", "method=rent")
    assert OmegaConf.create(printed).trainer.default_local_dir == "checkpoints/paper_qwen_1p5b_rent"
    printed = script_config(
        tmp_path, monkeypatch, "train_qwen_1p5b_rent.sh", env={**ENV, "CKPT_DIR": "checkpoints/mine"}
    )
    assert OmegaConf.create(printed).trainer.default_local_dir == "checkpoints/mine"


@pytest.mark.parametrize("method", ["rent", "ttrl", "rzero"])
def test_a_baselines_preset_is_one_line_and_refuses_another_method(method, tmp_path, monkeypatch):
    """The released values live in configs/experiment/<method>_qwen_1p5b.yaml (the script adds only the method);
    the preset without its method would run CPMöbius under the baseline's name: refused, naming the fix."""
    script = (REPO / "scripts" / f"train_qwen_1p5b_{method}.sh").read_text()
    command = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert command == [f'exec bash "$(dirname "$0")/launch.sh" {method}_qwen_1p5b method={method} "$@"']
    code, _, err = cfg_job(*handed_to_python(tmp_path, "launch.sh", f"{method}_qwen_1p5b", "--cfg", "job"), monkeypatch)
    assert code == 2, err[-2000:]
    assert f"add method={method}" in err and "Traceback" not in err
