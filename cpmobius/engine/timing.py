"""Wall-clock intervals of a policy's engine-side operations, for per-stage and overhead accounting.

Every `cpmobius.engine.policy.Policy` keeps one `OpLog` (`cpmobius.clock`, the stage clock). The loop reads the
seconds each operation took during a step (``timing_s/ops/<policy>/<op>``), and `benchmarks/bench_step_gpu.py`
splits a step into generation, model compute (log-probs and updates) and overhead (engine switches and weight syncs,
grading, data movement, Python), and attributes GPU-memory samples to operations by their intervals.

Operations (names used in the metrics):
    ``wake``: wake the rollout engine and sync the trainer's weights into it, including putting the
    other policy's engine to sleep first; ``sleep``: put the engine to sleep before training-side work;
    ``generate``: sampling through the agent loop (prompt rendering, rollout, decoding to a batch);
    ``log_prob``, ``ref_log_prob``, ``update``: the FSDP actor's forward / forward-backward passes;
    ``save``, ``load``: checkpoints; ``startup/<phase>``: `Policy.start`'s phases.
"""

from __future__ import annotations

from typing import Any

from cpmobius.clock import OpLog

GENERATION_OPS = ("generate",)
COMPUTE_OPS = ("log_prob", "ref_log_prob", "update")
SWITCH_OPS = ("wake", "sleep")


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
