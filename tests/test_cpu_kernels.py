"""`cpmobius.cpu_kernels`: the line naming what a CPU run's exact figures depend on."""

import torch

from cpmobius.cpu_kernels import cpu_kernels, cpu_vendor


def test_vendor_is_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n")
    assert cpu_vendor(str(info)) == "GenuineIntel"
    assert cpu_vendor(str(tmp_path / "absent")) not in ("", "GenuineIntel")


def test_the_line_names_torch_its_kernels_and_threads(monkeypatch):
    line = cpu_kernels()
    assert f"torch {torch.__version__}" in line
    assert f"kernels {torch.backends.cpu.get_cpu_capability()}" in line
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    assert cpu_kernels().endswith("3 threads")
