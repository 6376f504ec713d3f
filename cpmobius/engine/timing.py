"""Wall-clock intervals of a policy's engine-side operations, for per-stage and overhead accounting.

Every `cpmobius.engine.policy.Policy` keeps one `OpLog`. The loop reads the seconds each operation
took during a step (``timing_s/ops/<policy>/<op>``), and `benchmarks/bench_step_gpu.py` splits a step
into generation, model compute (log-probs and updates) and overhead (engine switches and weight syncs,
grading, data movement, Python), and attributes GPU-memory samples to operations by their intervals.

Operations (names used in the metrics):
    ``wake``: wake the rollout engine and sync the trainer's weights into it, including putting the
    other policy's engine to sleep first; ``sleep``: put the engine to sleep before training-side work;
    ``generate``: sampling through the agent loop (prompt rendering, rollout, decoding to a batch);
    ``log_prob``, ``ref_log_prob``, ``update``: the FSDP actor's forward / forward-backward passes;
    ``save``, ``load``: checkpoints; ``startup/<phase>``: `Policy.start`'s phases.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

GENERATION_OPS = ("generate",)
COMPUTE_OPS = ("log_prob", "ref_log_prob", "update")
SWITCH_OPS = ("wake", "sleep")


@dataclass
class OpLog:
    """Intervals ``(op, start, end)`` in `time.perf_counter` seconds, in the order they ended.

    Nested intervals are kept as they are (a ``wake`` contains the other policy's ``sleep`` only when
    that sleep was not timed on its own: `Policy.activate` puts the other engine to sleep untimed).
    """

    intervals: list[tuple[str, float, float]] = field(default_factory=list)

    @contextmanager
    def timed(self, op: str) -> Iterator[None]:
        """Record the wall-clock interval of the ``with`` body as ``op``, also when it raises."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.intervals.append((op, start, time.perf_counter()))

    def add(self, op: str, start: float) -> None:
        """Record ``op`` as the interval from ``start`` (a `time.perf_counter` reading) to now."""
        self.intervals.append((op, start, time.perf_counter()))

    def mark(self) -> int:
        """A position to pass to `seconds_since` (the number of intervals so far)."""
        return len(self.intervals)

    def seconds_since(self, mark: int = 0) -> dict[str, float]:
        """Seconds per operation over the intervals recorded after ``mark``; ``{op: seconds}``."""
        totals: dict[str, float] = defaultdict(float)
        for op, start, end in self.intervals[mark:]:
            totals[op] += end - start
        return dict(totals)


def op_marks(policies: dict[str, Any]) -> dict[str, int]:
    """`OpLog.mark` of each policy that keeps an `OpLog` (``{role: policy}`` in, ``{role: mark}`` out)."""
    return {role: p.ops.mark() for role, p in policies.items() if isinstance(getattr(p, "ops", None), OpLog)}


def op_metrics(policies: dict[str, Any], marks: dict[str, int]) -> dict[str, float]:
    """``timing_s/ops/<role>/<op>``: seconds per operation of each policy since its mark (`op_marks`)."""
    return {
        f"timing_s/ops/{role}/{op}": seconds
        for role, mark in marks.items()
        for op, seconds in policies[role].ops.seconds_since(mark).items()
    }


def split_step(step_seconds: float, op_seconds: dict[str, float]) -> dict[str, float]:
    """Split one loop step's wall-clock time into generation, model compute and overhead.

    Args:
        step_seconds: the step's wall-clock time (``timing_s/step``), s.
        op_seconds: seconds per operation during the step, summed over both policies
            (``{"generate": ..., "update": ..., "wake": ...}``).

    Returns:
        ``generation_s`` (every ``generate``: Coach, Player rollouts, validation), ``compute_s``
        (log-probs, reference log-probs, updates), ``overhead_s`` (the rest: engine switches and weight
        syncs, grading and voting, data movement, Python), ``switch_s`` (the wake/sleep part of the
        overhead) and ``overhead_share`` (overhead ÷ step, 0 for an empty step).

    Raises:
        ValueError: when the operations add up to more than the step (they must nest inside it).
    """
    generation = sum(op_seconds.get(op, 0.0) for op in GENERATION_OPS)
    compute = sum(op_seconds.get(op, 0.0) for op in COMPUTE_OPS)
    overhead = step_seconds - generation - compute
    if overhead < -1e-6 * max(1.0, step_seconds):
        raise ValueError(
            f"generation {generation:.3f} s + compute {compute:.3f} s exceed the step's {step_seconds:.3f} s"
        )
    overhead = max(overhead, 0.0)
    return {
        "generation_s": generation,
        "compute_s": compute,
        "overhead_s": overhead,
        "switch_s": sum(op_seconds.get(op, 0.0) for op in SWITCH_OPS),
        "overhead_share": overhead / step_seconds if step_seconds > 0 else 0.0,
    }
