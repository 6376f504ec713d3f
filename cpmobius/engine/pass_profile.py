"""Where a worker's model passes spend their time: one call of each pass under ``torch.profiler``.

With ``CPMOBIUS_PROFILE_PASSES=<dir>`` set (`benchmarks/bench_update_gpu.py --profile` sets it), a policy worker
runs the second call of each pass — the update (``train_mini_batch``), the log-prob pass and the reference
pass (``infer_batch``) — under the PyTorch profiler; the first call is left alone as the warm-up. The
report goes to ``<dir>/<pass>_<pid>.txt``: the call's wall time, the device's busy share (kernel time over
wall time), kernel time by kind (matrix products, attention, the output layer's softmax, communication,
copies, the rest), then the costliest kernels and the costliest host operations. Profiling slows the call
it measures: take the seconds from an unprofiled run and the shares from this one.
"""

from __future__ import annotations

import functools
import os
import time
from collections import defaultdict
from typing import Any, Callable

ENV = "CPMOBIUS_PROFILE_PASSES"

# Kernel kinds, matched against lower-cased kernel names in this order (the first match wins).
KERNEL_KINDS = (
    ("communication", ("nccl", "allgather", "reducescatter", "all_reduce")),
    ("copies", ("memcpy", "memset")),
    ("attention", ("flash", "fmha", "attention", "attn", "triton_tem_fused")),
    ("matrix products", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul", "splitk")),
    ("softmax / log-softmax", ("softmax", "logsumexp")),
)


def kernel_kind(name: str) -> str:
    """The kind of a device kernel by its name (``KERNEL_KINDS``), ``"elementwise and other"`` otherwise."""
    lowered = name.lower()
    for kind, needles in KERNEL_KINDS:
        if any(needle in lowered for needle in needles):
            return kind
    return "elementwise and other"


def report(profiler: Any, wall_s: float, name: str) -> str:
    """The text report of one profiled call (see the module docstring)."""
    by_kind: dict[str, float] = defaultdict(float)
    for event in profiler.events():  # device kernels hang off the host operation that launched them
        for kernel in getattr(event, "kernels", ()):
            by_kind[kernel_kind(kernel.name)] += kernel.duration
    total_us = sum(by_kind.values())
    lines = [
        f"pass {name}: wall {wall_s:.2f} s, kernels {total_us / 1e6:.2f} s, "
        f"device busy {100 * total_us / 1e6 / max(wall_s, 1e-9):.1f} %",
        "",
        "kernel time by kind:",
    ]
    for kind, us in sorted(by_kind.items(), key=lambda item: -item[1]):
        lines.append(f"  {kind:<24} {us / 1e6:8.2f} s  {100 * us / max(total_us, 1e-9):5.1f} %")
    averages = profiler.key_averages()
    lines += ["", averages.table(sort_by="self_device_time_total", row_limit=30, max_name_column_width=90)]
    lines += ["", averages.table(sort_by="cpu_time_total", row_limit=30, max_name_column_width=90)]
    return "\n".join(lines)


def profiled(call: Callable, name: str, out_dir: str) -> Callable:
    """``call`` with its second invocation run under the PyTorch profiler, reported to ``out_dir``."""
    calls = 0

    @functools.wraps(call)
    def wrapper(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls != 2:
            return call(*args, **kwargs)
        import torch
        from torch.profiler import ProfilerActivity, profile

        cuda = torch.cuda.is_available()
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        sync()
        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as profiler:
            result = call(*args, **kwargs)
            sync()
        wall_s = time.perf_counter() - start
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, f"{name}_{os.getpid()}.txt"), "w") as f:
            f.write(report(profiler, wall_s, name) + "\n")
        return result

    return wrapper


def profile_passes(worker: Any) -> None:
    """Wrap a built worker's update, log-prob and reference passes when ``CPMOBIUS_PROFILE_PASSES`` is set."""
    out_dir = os.environ.get(ENV)
    if not out_dir:
        return
    actor = getattr(worker, "actor", None)
    if actor is not None:
        actor.train_mini_batch = profiled(actor.train_mini_batch, "update", out_dir)
        actor.infer_batch = profiled(actor.infer_batch, "log_prob", out_dir)
    ref = getattr(worker, "ref", None)
    if ref is not None and ref is not actor:
        ref.infer_batch = profiled(ref.infer_batch, "ref_log_prob", out_dir)
