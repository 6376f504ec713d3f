"""Resume after SIGKILL: a run killed mid-step after a checkpoint, resumed with ``resume_mode=auto``,
ends in the same state as an uninterrupted run with the same seed (weights, loop state, cumulative counters,
each step once in the metrics files). Three real runs of
``python -m cpmobius.main`` (about 3 minutes on 2 cores)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def command(out_dir: Path, model_cache: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cpmobius.main",
        f"model.cache_dir={model_cache}",
        f"trainer.default_local_dir={out_dir}",
        "trainer.total_training_steps=3",
        "trainer.save_freq=1",
        "filter.quota=2",
        "player.n=4",
        "validation.size=8",
        "hydra.run.dir=" + str(out_dir / "hydra"),
    ]


def kill_tree(process: subprocess.Popen) -> None:
    import psutil

    parent = psutil.Process(process.pid)
    victims = parent.children(recursive=True) + [parent]
    for victim in victims:
        try:
            victim.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(victims, timeout=30)


def final_state(out_dir: Path) -> tuple[dict, dict]:
    import torch

    step_dir = out_dir / "global_step_3"
    state = json.loads((step_dir / "loop_state.json").read_text())
    weights = {
        name: torch.load(step_dir / name / "model_world_size_1_rank_0.pt", weights_only=False)
        for name in ("coach", "player")
    }
    return state, weights


def test_sigkill_mid_step_then_resume_matches_an_uninterrupted_run(tmp_path, model_cache):
    import torch

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    done = subprocess.run(
        command(straight, model_cache), cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]

    process = subprocess.Popen(
        command(killed, model_cache), cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    tracker = killed / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + 600
    while not (tracker.exists() and tracker.read_text().strip() == "1"):
        assert process.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within 10 minutes"
        time.sleep(0.05)
    kill_tree(process)  # during step 2, right after checkpoint 1
    assert tracker.read_text().strip() == "1"

    resumed = subprocess.run(
        command(killed, model_cache), cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout and "at step 1" in resumed.stdout

    state_a, weights_a = final_state(straight)
    state_b, weights_b = final_state(killed)
    for key in ("step", "delta_t_history", "problem_source", "policies", "delta_tracker", "engine_switches"):
        assert (
            state_a[key] == pytest.approx(state_b[key]) if key == "delta_t_history" else state_a[key] == state_b[key]
        ), key
    # every step once in the killed run's metrics files, its cumulative counters as the uninterrupted run's
    from cpmobius.run_log import metrics_files, read_metric_rows

    rows_a, rows_b = (
        [row for path in metrics_files(run) for row in read_metric_rows(path)] for run in (straight, killed)
    )
    assert [row["step"] for row in rows_b] == [row["step"] for row in rows_a] == [0, 1, 2, 3]
    for key in ("loop/engine_switches", "loop/filter_kept_total"):
        assert [row["data"].get(key) for row in rows_b] == [row["data"].get(key) for row in rows_a], key
    for name in ("coach", "player"):
        for param, tensor in weights_a[name].items():
            other = weights_b[name][param]
            tensor = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            other = other.full_tensor() if hasattr(other, "full_tensor") else other
            assert torch.allclose(tensor, other, atol=1e-6), f"{name}.{param} differs after resume"
