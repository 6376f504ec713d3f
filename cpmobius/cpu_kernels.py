"""Which CPU kernels this machine's torch runs: what a CPU run's exact figures depend on.

Two runs of the embedded default with the same seed, code and package versions give the same table on
machines whose torch picks the same kernels, and different figures elsewhere (the README says how much): torch
chooses its vectorised kernels by the CPU's instruction set (AVX2, AVX-512, ...), MKL its matrix products by
the CPU's vendor and instruction set, and both sum in an order that depends on the thread count. Measured on
2026-12-05: the same commit, seed and packages gave step-0 validation accuracy 0.330 on an AMD EPYC with
AVX-512 and 0.326 on the same machine with torch held to AVX2 (``ATEN_CPU_CAPABILITY=avx2``).

`cpu_kernels()` names those choices in one line; the default run prints it first, and the README's table says
which line made it.
"""

from __future__ import annotations

import platform


def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's vendor id as the kernel reports it (``GenuineIntel``, ``AuthenticAMD``), else the machine's
    processor string (macOS, Windows), else ``unknown``."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_kernels() -> str:
    """One line naming what decides a CPU run's exact figures, e.g.
    ``x86_64 AuthenticAMD, torch 2.13.0+cpu kernels AVX512, BLAS mkl, 2 threads``.

    The parts: the machine's architecture and CPU vendor (MKL's dispatch), torch's version and the
    instruction set of the kernels it chose (``torch.backends.cpu.get_cpu_capability()``; set by the
    ``ATEN_CPU_CAPABILITY`` environment variable), its BLAS, and its intra-op thread count.
    """
    import torch

    blas = "mkl" if torch.backends.mkl.is_available() else "other"
    return (
        f"{platform.machine()} {cpu_vendor()}, torch {torch.__version__} kernels "
        f"{torch.backends.cpu.get_cpu_capability()}, BLAS {blas}, {torch.get_num_threads()} threads"
    )
