"""The line printed after Ctrl-C or SIGTERM names the phase the run was in (no Ray: a loop's state only)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from cpmobius.interrupts import describe_interrupt
from cpmobius.loop_state import LoopState


@pytest.mark.parametrize(
    ("loop", "where"),
    [
        (None, "while starting"),
        (SimpleNamespace(state=LoopState(step=0), validating_step_0=True), "during the validation before step 1"),
        (SimpleNamespace(state=LoopState(step=0), validating_step_0=False), "at step 1"),
        (SimpleNamespace(state=LoopState(step=2), validating_step_0=False), "at step 3"),
        (SimpleNamespace(state=LoopState(step=5), validating_step_0=False), "after the last step (5)"),
    ],
)
def test_the_interrupt_line_names_the_phase(tmp_path, loop, where):
    cfg = OmegaConf.create({"trainer": {"default_local_dir": str(tmp_path), "total_training_steps": 5}})
    line = describe_interrupt(cfg, loop)
    assert line == f"[cpmobius] interrupted {where}; no checkpoint yet; run the same command to start again"
