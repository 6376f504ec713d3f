"""The NVIDIA driver a GPU run needs, checked before anything touches CUDA.

``bash scripts/install.sh gpu`` installs ``verl[vllm]==0.9.1``, which pins torch 2.11 built for CUDA 13.0 (and
vLLM built against it). CUDA 13 needs a Linux driver of branch 580 or newer; many A800 clusters run 535 or
550. On such a driver torch reports no GPU and the run fails later with a CUDA stack trace; here it stops
with one line and the ways out instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Optional

# The oldest Linux driver branch each CUDA major release runs on (NVIDIA's CUDA toolkit release notes,
# "CUDA Toolkit and Minimum Required Driver Version": minor-version compatibility within a major release).
MIN_DRIVER_BY_CUDA_MAJOR = {11: 450, 12: 525, 13: 580}


class GpuDriverError(RuntimeError):
    """The machine's NVIDIA driver is older than the CUDA build of torch needs; nothing has run."""


def parse_proc_version(text: str) -> Optional[str]:
    """The version in ``/proc/driver/nvidia/version``'s first line, for the proprietary module ("NVIDIA UNIX
    x86_64 Kernel Module  535.104.05  ...") and the open one ("NVIDIA UNIX Open Kernel Module for x86_64
    580.159.04  Release Build ..."); None when neither form is there."""
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


def driver_version() -> Optional[str]:
    """The NVIDIA kernel driver's version (``"535.104.05"``), or None on a machine without one.

    Read from ``/proc/driver/nvidia/version``, else from ``nvidia-smi``; CUDA is never initialised.
    """
    proc = Path("/proc/driver/nvidia/version")
    found = parse_proc_version(proc.read_text()) if proc.is_file() else None
    if found:
        return found
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def check_gpu_driver(torch_cuda: Optional[str], driver: Optional[str], torch_version: str = "") -> None:
    """Refuse a torch CUDA build that the installed driver cannot run.

    Args:
        torch_cuda: ``torch.version.cuda`` ("13.0"), None for a CPU build of torch.
        driver: `driver_version` ("535.104.05"), None when this machine has no NVIDIA driver (a driver
            node without GPUs: the workers' nodes are not checked from here).
        torch_version: ``torch.__version__``, for the message.

    Raises:
        GpuDriverError: one line naming both versions and the ways out.
    """
    if driver is None:
        return
    if torch_cuda is None:
        raise GpuDriverError(
            f"this torch ({torch_version or 'installed'}) is a CPU build, but the run asks for GPUs: install the GPU "
            "stack (bash scripts/install.sh gpu) or run with backend=cpu"
        )
    major = int(torch_cuda.split(".")[0])
    needed = MIN_DRIVER_BY_CUDA_MAJOR.get(major)
    found = int(driver.split(".")[0])
    if needed is None or found >= needed:
        return
    raise GpuDriverError(
        f"torch {torch_version} is built for CUDA {torch_cuda}, which needs an NVIDIA driver {needed} or newer; this "
        f"machine has {driver}. Ways out: upgrade the driver to {needed}+, or install NVIDIA's CUDA forward-"
        f"compatibility package for CUDA {major} (cuda-compat-{major}-0; data-centre GPUs such as A800/A100/H100) "
        "and put its lib folder first on LD_LIBRARY_PATH, or install a torch and vLLM built for the CUDA your "
        "driver supports (nvidia-smi shows it) instead of scripts/install.sh gpu's pins"
    )


def check_this_machine(platform: str) -> None:
    """`check_gpu_driver` for this process's torch and driver; nothing to check on the CPU platform.

    Raises:
        GpuDriverError: see `check_gpu_driver`.
    """
    if platform == "cpu":
        return
    import torch

    check_gpu_driver(torch.version.cuda, driver_version(), torch.__version__)
