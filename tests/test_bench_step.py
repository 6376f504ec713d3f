"""`benchmarks/bench_step_gpu.py` end to end on the toy world (CPU): the yardstick, the loop's phases, the
table and its figures (the GPU run itself is recorded in results/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from stand_ins import FAST_TOY

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_step_gpu.py"


def test_bench_measures_the_yardstick_and_each_phase(tmp_path, model_cache):
    out = tmp_path / "bench"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--toy",
            "--out",
            str(out),
            "--phases",
            "released:1,reserve:1",
            "--yardstick-steps",
            "2",
            "--checkpoint",
            # The bench's process computes on this CPU's own kernels, as the in-process loop tests do: it takes
            # (or leaves) their quick toy world's models.
            f"model.cache_dir={model_cache / 'fast_toy'}",
            *FAST_TOY,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads((out / "bench_step_gpu.json").read_text())
    table = (out / "bench_step_gpu.md").read_text()
    assert [s["phase"] for s in figures["steps"]] == ["released", "reserve"]
    for step in figures["steps"]:
        split = step["split"]
        assert split["generation_s"] > 0 and split["compute_s"] > 0 and 0 <= split["overhead_share"] < 1
        assert split["generation_s"] + split["compute_s"] + split["overhead_s"] == pytest.approx(step["timing_s/step"])
        assert step["tokens"]["coach"] > 0 and step["tokens"]["validation"] > 0
        # every step wakes the Coach, then the Player (rollouts), then the Player again for validation
        assert step["engine_switches"] >= 3
    yardstick = figures["yardstick"]
    assert len(yardstick) == 2 and all(y["tokens"] > 0 and y["ops"]["update"] > 0 for y in yardstick)
    assert all(y["engine_switches"] == 1 for y in yardstick)  # each plain step wakes the Player once, after its update
    assert all(y["grading_timeouts"] == 0 for y in yardstick) and "| grading (timeouts) |" in table  # toy answers
    assert figures["plain_grpo_step_s"] == pytest.approx(yardstick[1]["timing_s/step"])
    assert figures["checkpoint_s"] > 0
    startup = figures["startup_s"]
    assert {"player/model_init", "player/rollout_servers", "coach/model_init", "coach/rollout_servers"} <= set(startup)
    # the wall clock holds every phase once: the overlapping model builds are not counted twice
    assert 0 <= startup["driver (config, data, Ray start)"] < startup["total (wall clock)"]
    phases = sum(v for k, v in startup.items() if "/" in k)
    assert startup["total (wall clock)"] - startup["driver (config, data, Ray start)"] < phases  # the builds overlapped
    for line in ("**overhead share**", "engine switches per step", "CPMöbius step ÷ plain GRPO step", "## Start-up"):
        assert line in table, line
