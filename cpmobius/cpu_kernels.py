"""Which CPU kernels this machine's torch runs, and the portable ones a CPU run holds them to.

A CPU run's exact figures depend on the kernels that compute them: torch chooses its vectorised kernels by the
CPU's instruction set (AVX2, AVX-512, ...), MKL its matrix products by the CPU's vendor and instruction set, and
both sum in orders that differ between those choices and between thread counts. Measured on an Intel Xeon
(2 cores): pretraining the toy Coach gave other weights under each of torch's AVX-512, AVX2 and default kernels
and each of MKL's automatic, AVX2 and SSE2 (``MKL_CBWR=COMPATIBLE``) paths, and the README's earlier table,
made on an AMD EPYC, differed from the Xeon's from step 0 on.

CPMöbius: a CPU run (``backend.portable_kernels``, on in ``backend=cpu``) holds every process of the run (the
driver, the toy pretraining, Ray's workers, the warm-up's torchrun) to `PORTABLE_KERNELS`: torch's ``default``
kernels, which every x86-64 CPU runs; MKL's ``COMPATIBLE`` branch (SSE2 without the approximate ``rcpps`` and
``rsqrtps``), the one fixed branch Intel's oneMKL documents for non-Intel CPUs as well as its own; and 2 threads
whatever the number of cores (the toy pretrains on one). Each is read when torch, MKL or OpenMP starts, so
`hold_portable_kernels` runs before the driver computes anything, and the processes it starts inherit them. On
the Xeon they gave one set of weights under every torch capability, MKL instruction limit and thread count tried
(tests/test_cpu_kernels.py); that an AMD CPU gives the same rests on Intel's documentation of ``COMPATIBLE`` and
on x86-64's exact IEEE arithmetic, not on a measurement.

`cpu_kernels()` names the kernels in one line; the default run prints it first, and the README's table says
which line made it.
"""

from __future__ import annotations

import os
import platform
from typing import Mapping

# torch reads ATEN_CPU_CAPABILITY when it first dispatches a kernel, MKL reads MKL_CBWR when it is first called,
# OpenMP reads OMP_NUM_THREADS when a process starts: sums split over threads are summed in another order with
# another thread count (Ray's workers would otherwise take one thread per core of the machine).
PORTABLE_KERNELS = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "2"}


def hold_portable_kernels(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> dict[str, str]:
    """Set `PORTABLE_KERNELS` in ``environ`` (replacing any value there), and this process's torch to their
    thread count when ``environ`` is this process's (its OpenMP read the variable when torch was imported);
    returns what was set."""
    environ.update(PORTABLE_KERNELS)
    if environ is os.environ:
        import torch

        torch.set_num_threads(int(PORTABLE_KERNELS["OMP_NUM_THREADS"]))
    return dict(PORTABLE_KERNELS)


def kernels_in_force(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process's torch computes on the kernels ``ATEN_CPU_CAPABILITY`` in ``environ`` asks for (True
    when it asks for none). A process that computed before the variable was set runs on others."""
    import torch

    asked = environ.get("ATEN_CPU_CAPABILITY")
    return not asked or asked.upper() == torch.backends.cpu.get_cpu_capability().upper()


def check_kernels_in_force(environ: Mapping[str, str] = os.environ) -> None:
    """Raise when this process's torch computes on other kernels than ``ATEN_CPU_CAPABILITY`` in ``environ`` asks
    for: torch fixed its choice at its first kernel, before the variable was set (`hold_portable_kernels` came
    too late). What a process records as made on its kernels (the toy cache's key) must be what made it.

    Raises:
        RuntimeError: naming both; the fix is to hold the kernels before anything computes (``python -m
            cpmobius.main`` does; a script calls ``cpmobius.main.hold_kernels(cfg)`` first).
    """
    import torch

    asked, running = environ.get("ATEN_CPU_CAPABILITY"), torch.backends.cpu.get_cpu_capability()
    if not kernels_in_force(environ):
        raise RuntimeError(
            f"this process computes on torch's {running} kernels, but ATEN_CPU_CAPABILITY={asked}: torch chose its "
            "kernels at its first computation, before the variable was set, so what it makes now would be "
            "recorded as made on kernels it was not. Hold the kernels first (cpmobius.main.hold_kernels(cfg) "
            "before anything computes), or run it in a fresh process."
        )


def kernel_settings(environ: Mapping[str, str] = os.environ) -> dict[str, "str | None"]:
    """The values of `PORTABLE_KERNELS`' variables in ``environ`` (None when unset): part of the toy cache's
    keys, so that models or a warm-up made on other kernels are never reused."""
    return {name: environ.get(name) for name in PORTABLE_KERNELS}


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


def cpu_kernels(environ: Mapping[str, str] = os.environ) -> str:
    """One line naming what decides a CPU run's exact figures, e.g.
    ``x86_64 GenuineIntel, torch 2.13.0+cpu kernels DEFAULT, BLAS mkl COMPATIBLE, 2 threads``.

    The parts: the machine's architecture and CPU vendor, torch's version and the instruction set of the
    kernels it chose (``torch.backends.cpu.get_cpu_capability()``; set by ``ATEN_CPU_CAPABILITY``), its BLAS
    with MKL's code branch (``MKL_CBWR``; ``auto`` when unset: by vendor and instruction set), and its
    intra-op thread count. The vendor belongs to the line: on the same portable kernels an AMD EPYC gives the
    default run another table than an Intel Xeon does (measured 2026-12-06, from step 0: the pretrained models
    differ), so a table holds for the vendor that made it.
    """
    import torch

    blas = f"mkl {environ.get('MKL_CBWR') or 'auto'}" if torch.backends.mkl.is_available() else "other"
    return (
        f"{platform.machine()} {cpu_vendor()}, torch {torch.__version__} kernels "
        f"{torch.backends.cpu.get_cpu_capability()}, BLAS {blas}, {torch.get_num_threads()} threads"
    )
