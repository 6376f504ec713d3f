"""Operation timing (`cpmobius.engine.timing`) and the GPU step benchmark's bookkeeping, without Ray."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from cpmobius.clock import OpLog
from cpmobius.engine.timing import split_step


def test_op_log_sums_each_operation_after_a_mark_and_records_failures():
    log = OpLog()
    with log.timed("generate"):
        time.sleep(0.02)
    mark = log.mark()
    with log.timed("generate"):
        time.sleep(0.01)
    with pytest.raises(RuntimeError):
        with log.timed("update"):
            raise RuntimeError("worker died")
    since = log.seconds_since(mark)
    assert set(since) == {"generate", "update"}  # the failed update is still accounted for
    assert 0.01 <= since["generate"] < 0.02 + 0.05  # only the interval after the mark
    assert log.seconds_since()["generate"] > since["generate"]


def test_split_step_puts_everything_but_generation_and_compute_in_the_overhead():
    ops = {"generate": 6.0, "log_prob": 1.0, "ref_log_prob": 0.5, "update": 1.5, "wake": 0.7, "sleep": 0.3, "save": 2.0}
    split = split_step(10.0, ops)
    assert split["generation_s"] == 6.0 and split["compute_s"] == 3.0
    assert split["overhead_s"] == pytest.approx(1.0) and split["overhead_share"] == pytest.approx(0.1)
    assert split["switch_s"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="exceed"):
        split_step(5.0, ops)  # operations cannot take longer than the step they are part of
    assert split_step(0.0, {})["overhead_share"] == 0.0


def test_bench_attributes_operations_to_the_stage_that_contains_them(load_script):
    bench = load_script("benchmarks/bench_step_gpu.py")
    coach, player = SimpleNamespace(ops=OpLog()), SimpleNamespace(ops=OpLog())
    coach.ops.intervals += [("wake", 1.0, 1.5), ("generate", 1.5, 3.0)]
    player.ops.intervals += [
        ("wake", 3.0, 3.2),
        ("generate", 3.2, 5.0),
        ("generate", 8.0, 9.0),
        ("generate", 20.0, 21.0),
    ]
    loop = SimpleNamespace(
        stages=OpLog(
            intervals=[
                ("validation", 0.0, 0.5),
                ("coach", 1.0, 3.0),
                ("difficulty_filter", 3.0, 6.0),
                ("validation", 7.5, 9.5),
            ]
        )
    )
    split = bench.stage_op_seconds(loop, {"coach": coach, "player": player}, since=0.9)
    assert split["coach"] == {"wake": 0.5, "generate": 1.5}
    assert split["difficulty_filter"]["generate"] == pytest.approx(1.8)
    assert split["validation"] == {
        "generate": 1.0
    }  # the earlier validation (before `since`) and the stray call are out


def test_bench_phases_are_parsed_or_refused(load_script):
    bench = load_script("benchmarks/bench_step_gpu.py")
    assert bench.parse_phases("released:2,adaptive:1") == [("released", 2), ("adaptive", 1)]
    for bad in ("released", "fast:2", "adaptive:0"):
        with pytest.raises(ValueError, match="--phases"):
            bench.parse_phases(bad)


def test_memory_peaks_are_taken_inside_each_operation(load_script):
    bench = load_script("benchmarks/bench_step_gpu.py")
    memory = bench.MemorySampler.__new__(bench.MemorySampler)
    memory.samples = [(0.5, 1000.0), (1.2, 5000.0), (2.0, 9000.0), (3.5, 2000.0)]
    player = SimpleNamespace(
        ops=OpLog(intervals=[("generate", 1.0, 1.5), ("update", 1.8, 3.6), ("generate", 3.0, 4.0)])
    )
    assert bench.operation_peaks({"player": player}, memory) == {"player/generate": 5000.0, "player/update": 9000.0}
    assert memory.peak(3.6, 10.0) is None
