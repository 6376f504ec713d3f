"""The cluster launch scripts (CPMöbius's four, the baselines' three): each composes and validates its preset with ``--cfg job``
without starting Ray or touching a GPU, and a wrong value fails naming the key."""

from __future__ import annotations

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


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / name), *args], capture_output=True, text=True, timeout=300, env=ENV
    )


@pytest.mark.parametrize(("script", "experiment"), sorted(SCRIPTS.items()))
def test_script_prints_a_resolved_validated_config(script, experiment):
    from omegaconf import OmegaConf

    done = run_script(script, "--cfg", "job")
    assert done.returncode == 0, done.stderr[-2000:]
    cfg = OmegaConf.create(done.stdout)
    assert cfg.trainer.experiment_name == experiment
    assert cfg.trainer.default_local_dir == f"checkpoints/{experiment}"  # each script its own folder
    assert cfg.actor_rollout_ref.rollout.name == "vllm" and cfg.trainer.n_gpus_per_node == 8
    assert "${" not in done.stdout  # fully resolved
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


def test_rzero_script_runs_the_released_schedule_and_sizes_without_a_warm_up():
    from omegaconf import OmegaConf

    done = run_script("train_qwen_1p5b_rzero.sh", "--cfg", "job")
    assert done.returncode == 0, done.stderr[-2000:]
    cfg = OmegaConf.create(done.stdout)
    method = cfg.method
    assert (method.name, method.challenger_steps, method.solver_steps) == ("rzero", 5, 15)
    assert (method.challenger_prompts, method.challenger_n, method.reward_votes) == (512, 4, 10)
    assert (method.solver_questions, method.solver_votes, method.prompts_per_step) == (8000, 9, 512)
    assert method.challenger_format == "tags" and cfg.player.n == 5 and not cfg.warmup.enabled
    assert cfg.data.max_response_length == 3072 and cfg.trainer.total_training_steps == 60  # 3 iterations of 20


def test_the_launcher_folders_a_method_on_a_preset_apart_and_ckpt_dir_wins():
    from omegaconf import OmegaConf

    done = run_script("launch.sh", "paper_qwen_1p5b", "method=rent", "--cfg", "job")
    assert done.returncode == 0, done.stderr[-2000:]
    assert OmegaConf.create(done.stdout).trainer.default_local_dir == "checkpoints/paper_qwen_1p5b_rent"
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_qwen_1p5b_rent.sh"), "--cfg", "job"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**ENV, "CKPT_DIR": "checkpoints/mine"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert OmegaConf.create(done.stdout).trainer.default_local_dir == "checkpoints/mine"


@pytest.mark.parametrize("method", ["rent", "ttrl", "rzero"])
def test_a_baselines_preset_is_one_line_and_refuses_another_method(method):
    """The released values live in configs/experiment/<method>_qwen_1p5b.yaml (the script adds only the method);
    the preset without its method would run CPMöbius under the baseline's name: refused, naming the fix."""
    script = (REPO / "scripts" / f"train_qwen_1p5b_{method}.sh").read_text()
    command = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert command == [f'exec bash "$(dirname "$0")/launch.sh" {method}_qwen_1p5b method={method} "$@"']
    done = run_script("launch.sh", f"{method}_qwen_1p5b", "--cfg", "job")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"add method={method}" in done.stderr and "Traceback" not in done.stderr
