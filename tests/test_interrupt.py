"""Ctrl-C and SIGTERM during ``python -m cpmobius.main``: one line saying where to resume, exit 130 / 143,
no traceback, Ray and every worker gone; running the same command again resumes and finishes.
Three launches of a small toy run (barely pretrained models, no warm-up): about 3 minutes on 2 cores."""

from __future__ import annotations

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
LINE = re.compile(
    r"\[cpmobius\] interrupted at step (\d+); the last checkpoint is step (\d+); run the same command to resume"
)


def command(out_dir: Path, model_cache: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "cpmobius.main",
        f"trainer.default_local_dir={out_dir}",
        f"hydra.run.dir={out_dir / 'hydra'}",
        f"model.cache_dir={model_cache / 'short_pretraining'}",
        "model.pretrain.player_steps=20",
        "model.pretrain.coach_steps=20",
        "warmup.enabled=false",
        "trainer.total_training_steps=6",
        "filter.quota=2",
        "player.n=4",
        "validation.size=8",
    ]


def interrupt_after_checkpoint(
    out_dir: Path, model_cache: Path, step: int, signum: int, whole_group: bool
) -> tuple[int, str, int]:
    """Start the run, send ``signum`` once checkpoint ``step`` exists (to the process group, as a
    terminal's Ctrl-C does, or to the driver alone, as a scheduler's SIGTERM does); wait for the run and
    every process it started. Returns (exit code, output, checkpoint step at exit)."""
    import psutil

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log_path = out_dir.parent / f"interrupted_{step}.log"
    with open(log_path, "w") as log:
        # SIGINT live in the driver, as in a terminal: a test suite started in the background of a
        # non-interactive shell inherits SIGINT ignored, and Python then keeps ignoring it.
        process = subprocess.Popen(
            command(out_dir, model_cache),
            cwd=REPO,
            env=env,
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
    if whole_group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    code = process.wait(timeout=120)
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, f"still running after the interrupt: {alive}"
    return code, log_path.read_text(), int(tracker.read_text())


def assert_one_line(output: str, checkpoint: int) -> None:
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output[-3000:]
    lines = [line for line in output.splitlines() if "interrupted" in line]
    assert len(lines) == 1, lines
    match = LINE.fullmatch(lines[0].strip())
    assert match, lines[0]
    assert int(match.group(2)) == checkpoint and int(match.group(1)) > checkpoint


def test_sigterm_then_ctrl_c_stop_cleanly_and_the_same_command_resumes(tmp_path, model_cache):
    out = tmp_path / "run"
    code, output, checkpoint = interrupt_after_checkpoint(out, model_cache, 1, signal.SIGTERM, whole_group=False)
    assert code == 143, output[-3000:]
    assert_one_line(output, checkpoint)

    code, output, checkpoint_2 = interrupt_after_checkpoint(
        out, model_cache, checkpoint + 1, signal.SIGINT, whole_group=True
    )
    assert code == 130, output[-3000:]
    assert f"resumed from {out / f'global_step_{checkpoint}'} at step {checkpoint}" in output
    assert_one_line(output, checkpoint_2)

    done = subprocess.run(
        command(out, model_cache),
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"at step {checkpoint_2}" in done.stdout and "done: 6 steps" in done.stdout
    assert (out / "global_step_6" / "loop_state.json").is_file()
