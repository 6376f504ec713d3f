"""How a run stops on Ctrl-C or SIGTERM: one line naming the step and the last checkpoint, Ray shut down, exit 130
or 143 (`stop_after_interrupt`, called by `cpmobius.main.run`)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from omegaconf import DictConfig


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cluster's preemption, ``kill``), raised in the main thread as Ctrl-C raises
    KeyboardInterrupt, so that both stop the run the same way (`stop_after_interrupt`)."""


def raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def describe_interrupt(cfg: DictConfig, loop: Any) -> str:
    """The one line printed after an interrupt: the step in progress, the last checkpoint, what to do."""
    from cpmobius.checkpoint import find_latest_checkpoint
    from cpmobius.checkpoint_failures import resume_command

    try:
        latest = find_latest_checkpoint(cfg.trainer.default_local_dir)
    except (OSError, ValueError):
        latest = None
    if loop is None:
        where = "while starting"
    elif loop.validating_step_0:
        where = "during the validation before step 1"
    elif loop.state.step >= int(cfg.trainer.total_training_steps):
        where = f"after the last step ({loop.state.step})"
    else:
        where = f"at step {loop.state.step + 1}"
    if latest is None:
        return f"[cpmobius] interrupted {where}; no checkpoint yet; run the same command to start again"
    step = latest.name.rsplit("_", 1)[1]
    return f"[cpmobius] interrupted {where}; the last checkpoint is step {step}; {resume_command(cfg)} to resume"


def stop_after_interrupt(cfg: DictConfig, loop: Any, interrupt: BaseException) -> None:
    """Print `describe_interrupt`'s line, shut Ray and every worker down, exit.

    What is on disk needs nothing: a checkpoint is renamed into place whole (`cpmobius.checkpoint`),
    so the next run resumes from the last complete one. A second Ctrl-C while shutting down exits at once.

    Raises:
        SystemExit: 143 after SIGTERM (`Terminated`), 130 after Ctrl-C (128 + the signal's number).
    """
    code = 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: os._exit(code))
    print(describe_interrupt(cfg, loop), file=sys.stderr, flush=True)
    import ray

    if ray.is_initialized():
        ray.shutdown()
    sys.stdout.flush()
    raise SystemExit(code)
