"""Stopping a run and running the same command again, as users do: SIGTERM (a scheduler), Ctrl-C (a terminal)
and SIGKILL (a dead node) in turn, one run of ``python -m cpmobius.main`` stopped three times after a checkpoint,
ends in the state of an uninterrupted run with the same seed (weights, loop state, cumulative counters, each
step once in the metrics files). SIGTERM and Ctrl-C print one line saying where to resume and exit 143 / 130 with
no traceback, Ray and every worker gone; after SIGKILL the last checkpoint is whole and ``resume_mode=auto``
finds it. Five launches (about 4 minutes on 2 cores)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
STEPS = 5
LINE = re.compile(
    r"\[cpmobius\] interrupted at step (\d+); the last checkpoint is step (\d+); run the same command to resume"
)


def command(out_dir: Path, model_cache: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cpmobius.main",
        f"model.cache_dir={model_cache}",
        f"trainer.default_local_dir={out_dir}",
        f"trainer.total_training_steps={STEPS}",
        "trainer.save_freq=1",
        "filter.quota=2",
        "player.n=4",
        "validation.size=8",
        "hydra.run.dir=" + str(out_dir / "hydra"),
    ]


def stop_after_checkpoint(out_dir: Path, model_cache: Path, step: int, how: str) -> tuple[int, str, int]:
    """Start the run and, once checkpoint ``step`` exists, stop it ``how``: "sigterm" to the driver alone (as a
    scheduler does), "ctrl-c" (SIGINT to the process group, as a terminal does) or "sigkill" to every process
    of the run at once; wait for the run and every process it started. Returns (exit code, output, the
    checkpoint step at exit)."""
    import psutil

    log_path = out_dir.parent / f"stopped_{how}_{step}.log"
    with open(log_path, "w") as log:
        # SIGINT live in the driver, as in a terminal: a test suite started in the background of a
        # non-interactive shell inherits SIGINT ignored, and Python then keeps ignoring it.
        process = subprocess.Popen(
            command(out_dir, model_cache),
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    tracker = out_dir / "latest_checkpointed_iteration.txt"
    deadline = time.monotonic() + 600
    while not (tracker.exists() and int(tracker.read_text().strip() or 0) >= step):
        assert process.poll() is None, "the run ended before the checkpoint:\n" + log_path.read_text()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint within 10 minutes"
        time.sleep(0.05)
    started = psutil.Process(process.pid).children(recursive=True)
    if how == "sigterm":
        process.send_signal(signal.SIGTERM)
    elif how == "ctrl-c":
        os.killpg(process.pid, signal.SIGINT)
    else:
        for victim in [psutil.Process(process.pid), *started]:
            try:
                victim.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
    code = process.wait(timeout=120)
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, f"still running after {how}: {alive}"
    return code, log_path.read_text(), int(tracker.read_text())


def assert_one_line(output: str, checkpoint: int) -> None:
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    lines = [line for line in output.splitlines() if "interrupted" in line]
    assert len(lines) == 1, lines
    match = LINE.fullmatch(lines[0].strip())
    assert match, lines[0]
    assert int(match.group(2)) == checkpoint and int(match.group(1)) > checkpoint


def final_state(out_dir: Path) -> tuple[dict, dict]:
    import torch

    step_dir = out_dir / f"global_step_{STEPS}"
    state = json.loads((step_dir / "loop_state.json").read_text())
    weights = {
        name: torch.load(step_dir / name / "model_world_size_1_rank_0.pt", weights_only=False)
        for name in ("coach", "player")
    }
    return state, weights


def test_sigterm_ctrl_c_and_sigkill_each_stop_a_run_that_the_same_command_resumes_to_the_uninterrupted_end(
    tmp_path, model_cache
):
    import torch

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    done = subprocess.run(
        command(straight, model_cache), cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]

    code, output, first = stop_after_checkpoint(stopped, model_cache, 1, "sigterm")
    assert code == 143, output[-3000:]
    assert_one_line(output, first)

    code, output, second = stop_after_checkpoint(stopped, model_cache, first + 1, "ctrl-c")
    assert code == 130, output[-3000:]
    assert f"resumed from {stopped / f'global_step_{first}'} at step {first}" in output
    assert_one_line(output, second)

    code, output, third = stop_after_checkpoint(stopped, model_cache, second + 1, "sigkill")
    assert code == -signal.SIGKILL and f"at step {second}" in output
    assert third < STEPS, "killed after the last step: nothing left to resume"

    resumed = subprocess.run(
        command(stopped, model_cache), cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {stopped / f'global_step_{third}'} at step {third}" in resumed.stdout
    assert f"done: {STEPS} steps" in resumed.stdout

    state_a, weights_a = final_state(straight)
    state_b, weights_b = final_state(stopped)
    for key in ("step", "delta_t_history", "problem_source", "policies", "delta_tracker", "engine_switches"):
        assert (
            state_a[key] == pytest.approx(state_b[key]) if key == "delta_t_history" else state_a[key] == state_b[key]
        ), key
    # every step once in the stopped run's metrics files, its cumulative counters as the uninterrupted run's
    from cpmobius.run_log import metrics_files, read_metric_rows

    rows_a, rows_b = (
        [row for path in metrics_files(run) for row in read_metric_rows(path)] for run in (straight, stopped)
    )
    assert [row["step"] for row in rows_b] == [row["step"] for row in rows_a] == list(range(STEPS + 1))
    for key in ("loop/engine_switches", "loop/filter_kept_total"):
        assert [row["data"].get(key) for row in rows_b] == [row["data"].get(key) for row in rows_a], key
    for name in ("coach", "player"):
        for param, tensor in weights_a[name].items():
            other = weights_b[name][param]
            tensor = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            other = other.full_tensor() if hasattr(other, "full_tensor") else other
            assert torch.allclose(tensor, other, atol=1e-6), f"{name}.{param} differs after resume"
