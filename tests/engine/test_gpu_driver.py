"""The NVIDIA driver check: torch 2.11 built for CUDA 13 (``scripts/install.sh gpu``) on an A800 cluster's
535 driver stops at start-up with one line and the ways out, not a CUDA stack trace."""

from __future__ import annotations

import pytest

from cpmobius.engine.gpu_driver import (
    GpuDriverError,
    check_gpu_driver,
    check_this_machine,
    driver_version,
    parse_proc_version,
)


@pytest.mark.parametrize(
    "torch_cuda, driver",
    [("13.0", "580.65.06"), ("13.0", "590.44.01"), ("12.8", "535.104.05"), ("12.4", "525.60.13"), ("13.0", None)],
)
def test_a_driver_new_enough_passes(torch_cuda, driver):
    check_gpu_driver(torch_cuda, driver, "2.11.0+cu130")


@pytest.mark.parametrize(
    "torch_cuda, driver, needed", [("13.0", "535.104.05", 580), ("13.0", "570.86.15", 580), ("12.1", "470.82", 525)]
)
def test_a_driver_too_old_for_the_cuda_build_is_one_line_with_the_ways_out(torch_cuda, driver, needed):
    with pytest.raises(GpuDriverError) as refused:
        check_gpu_driver(torch_cuda, driver, "2.11.0+cu130")
    message = str(refused.value)
    assert "\n" not in message
    assert f"CUDA {torch_cuda}" in message and f"driver {needed} or newer" in message and driver in message
    assert "forward-compatibility" in message and "upgrade the driver" in message


def test_a_cpu_torch_on_a_gpu_machine_names_the_gpu_install():
    with pytest.raises(GpuDriverError, match="CPU build.*scripts/install.sh gpu"):
        check_gpu_driver(None, "550.54.15", "2.13.0+cpu")


def test_the_cpu_platform_checks_nothing_and_this_machine_reads_cleanly():
    check_this_machine("cpu")
    found = driver_version()  # None here (no NVIDIA driver); a version string on a GPU machine
    assert found is None or found.split(".")[0].isdigit()


@pytest.mark.parametrize(
    "text, version",
    [
        # the open module, as an H200 machine printed it (driver 580.159.04)
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n",
            "580.159.04",
        ),
        ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n", "535.104.05"),
        ("something else entirely\n", None),
    ],
)
def test_the_driver_version_is_read_from_both_module_forms(text, version):
    assert parse_proc_version(text) == version
