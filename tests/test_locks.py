"""The installs' locks (``scripts/locks/``, made by ``scripts/lock.sh``) and their use by ``scripts/install.sh``.

Each lock is one ``name==version`` line a package under a header comment, sorted by name case-insensitively,
each package once, cpmobius itself never. The GPU lock pins the stack ``verl[vllm]==0.9.1`` brings (vLLM 0.24.0,
torch 2.11); every pin satisfies what pyproject.toml asks of that package; ``install.sh gpu`` hands the lock to
pip as constraints (a stub ``python`` records them: nothing is installed), and none with ``CPMOBIUS_LOCK=off``.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
LOCKS = REPO / "scripts" / "locks"
CPU_LOCK = LOCKS / "cpu-py311.txt"
GPU_LOCK = LOCKS / "gpu-py312.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s=;]+)$")


def pins(lock: Path) -> dict[str, str]:
    """Canonical name → version, for the lock's lines after its header comment."""
    return {canonicalize_name(line.split("==")[0]): line.split("==")[1] for line in body(lock)}


def body(lock: Path) -> list[str]:
    return [line for line in lock.read_text().splitlines() if not line.startswith("#")]


@pytest.mark.parametrize("lock", [CPU_LOCK, GPU_LOCK], ids=lambda p: p.name)
def test_a_lock_is_a_header_then_sorted_unique_pins(lock):
    lines = lock.read_text().splitlines()
    assert lines[0].startswith("# ") and "scripts/lock.sh" in lines[0], "the header says what made the lock"
    assert any("refresh with: bash scripts/lock.sh" in line for line in lines if line.startswith("#"))
    names = []
    for line in body(lock):
        match = PIN.match(line)
        assert match, f"{lock.name}: not a name==version line: {line!r}"
        names.append(match.group(1))
    assert names == sorted(names, key=str.lower), f"{lock.name} is not sorted by name"
    canonical = [canonicalize_name(name) for name in names]
    assert len(set(canonical)) == len(canonical), f"{lock.name} pins a package twice"
    assert "cpmobius" not in canonical and "pip" not in canonical and len(canonical) > 100


def test_the_gpu_lock_pins_verls_vllm_stack_for_linux_x86_64_cp312():
    locked = pins(GPU_LOCK)
    assert locked["vllm"] == "0.24.0" and locked["verl"] == "0.9.1"
    assert locked["torch"].startswith("2.11."), "vLLM 0.24 is built against torch 2.11"
    assert locked["torchvision"] and locked["transformers"] and locked["ray"]
    assert any(name.endswith("-cu13") for name in locked), "torch 2.11's CUDA 13 libraries"
    header = " ".join(line for line in GPU_LOCK.read_text().splitlines() if line.startswith("#"))
    assert "not installed" in header and "Linux x86-64" in header and "cp312" in header


@pytest.mark.parametrize("lock, extras", [(CPU_LOCK, ["test"]), (GPU_LOCK, ["gpu", "test"])], ids=["cpu", "gpu"])
def test_every_pin_satisfies_pyproject(lock, extras):
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + [r for extra in extras for r in project["optional-dependencies"][extra]]
    wanted += project["optional-dependencies"]["models"]  # the test extra's cpmobius[models]
    locked = pins(lock)
    for requirement in map(Requirement, wanted):
        name = canonicalize_name(requirement.name)
        if name == "cpmobius" or (name == "torch" and lock == CPU_LOCK):  # the CPU lock leaves torch out
            continue
        assert name in locked, f"{lock.name} does not pin {requirement.name}"
        assert requirement.specifier.contains(locked[name], prereleases=True), f"{lock.name}: {name}"


def gpu_branch() -> str:
    script = (REPO / "scripts" / "install.sh").read_text()
    return script[script.index('if [ "$target" = gpu ]; then') :].split("\n  exit 0\n")[0]


def test_install_sh_gpu_passes_its_lock_as_constraints():
    branch = gpu_branch()
    assert "add_lock gpu" in branch
    assert 'PIP_CONSTRAINT="$constraints" python -m pip install -e ".[gpu,test]"' in branch
    assert "scripts/lock.sh gpu" in (REPO / "scripts" / "lock.sh").read_text().split("set -euo pipefail")[0]


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="the GPU lock's platform")
@pytest.mark.parametrize("switch", ["on", "off"])
def test_install_sh_gpu_hands_pip_the_lock_unless_switched_off(tmp_path, switch):
    """A stub ``python`` in front of PATH answers for Python 3.12 and records the constraints pip is given."""
    record = tmp_path / "constraints.txt"
    stub = tmp_path / "bin" / "python"
    stub.parent.mkdir()
    stub.write_text(
        "#!/usr/bin/env bash\n"
        'case "$*" in\n'
        '  "-m pip install --upgrade pip") exit 0 ;;\n'
        '  "-m pip install -e .[gpu,test]") cp "$PIP_CONSTRAINT" "$RECORD"; exit 0 ;;\n'
        "  *sys.version_info*) echo 3.12 ;;\n"
        "  *gpu_driver*) exit 0 ;;\n"
        '  *) echo "unexpected: python $*" >&2; exit 1 ;;\n'
        "esac\n"
    )
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stub.parent}:{os.environ['PATH']}", "RECORD": str(record), "CPMOBIUS_LOCK": switch}
    result = subprocess.run(
        ["bash", "scripts/install.sh", "gpu"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    if switch == "on":
        assert "versions pinned by scripts/locks/gpu-py312.txt" in result.stdout
        assert record.read_text().splitlines() == body(GPU_LOCK)
    else:
        assert "pinned" not in result.stdout and record.read_text() == ""
