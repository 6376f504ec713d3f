"""`cpmobius.cpu_kernels`: the line naming what a CPU run's exact figures depend on, and the portable kernels
that make those figures the same on any x86-64 CPU."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cpmobius.config import compose_config
from cpmobius.cpu_kernels import PORTABLE_KERNELS, cpu_kernels, cpu_vendor, hold_portable_kernels
from cpmobius.engine.config import worker_env_vars
from cpmobius.toy.world import PretrainSpec

REPO = Path(__file__).resolve().parents[1]


def test_vendor_is_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n")
    assert cpu_vendor(str(info)) == "GenuineIntel"
    assert cpu_vendor(str(tmp_path / "absent")) not in ("", "GenuineIntel")


def test_the_line_names_torch_its_kernels_mkls_branch_and_threads(monkeypatch):
    line = cpu_kernels({})
    assert f"torch {torch.__version__}" in line
    assert f"kernels {torch.backends.cpu.get_cpu_capability()}" in line
    if torch.backends.mkl.is_available():
        assert "BLAS mkl auto," in line and "BLAS mkl COMPATIBLE," in cpu_kernels({"MKL_CBWR": "COMPATIBLE"})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    assert cpu_kernels().endswith("3 threads")


def test_a_cpu_run_holds_every_process_to_the_portable_kernels_and_a_gpu_run_does_not():
    cpu = worker_env_vars(compose_config([]))  # Ray's workers and the warm-up's torchrun get these
    expected = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "2"}
    assert {k: cpu[k] for k in PORTABLE_KERNELS} == expected
    assert not PORTABLE_KERNELS.keys() & worker_env_vars(compose_config(["backend=vllm"])).keys()
    assert not PORTABLE_KERNELS.keys() & worker_env_vars(compose_config(["backend.portable_kernels=false"])).keys()
    environ = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX2", "OMP_NUM_THREADS": "16"}  # the user's: replaced
    assert hold_portable_kernels(environ) == environ == PORTABLE_KERNELS


# The toy models pretrained for a few steps, as `cpmobius.main` does it: the config's key decides
# (`hold_kernels`), the Coach pretrains in this process and the Player in a spawned child.
PRETRAIN = """
import hashlib, json, sys
from dataclasses import replace
from cpmobius.config import compose_config
from cpmobius.main import hold_kernels
from cpmobius.settings import load_settings
from cpmobius.toy.cache import materialize_toy_models
from cpmobius.toy.world import PretrainSpec
cfg = compose_config(sys.argv[2:])
hold_kernels(cfg)
spec = replace(PretrainSpec(**cfg.model.pretrain), player_steps=6, coach_steps=6, batch_size=16)
folders = materialize_toy_models(sys.argv[1] + "/coach", sys.argv[1] + "/player", "Write a problem.",
                                 dict(cfg.model.tiny_spec), spec)
import torch
digest = hashlib.sha256(b"".join((f / "model.safetensors").read_bytes() for f in folders)).hexdigest()[:16]
print(json.dumps({"weights": digest, "kernels": torch.backends.cpu.get_cpu_capability()}))
"""

# What another CPU would choose, emulated on this one: torch's kernels for AVX-512, AVX2 or none (an AVX2-only
# CPU, an old one), MKL's instructions limited to AVX2 (a stand-in for the path MKL's automatic dispatch takes on
# a CPU without AVX-512 or of another vendor), a user's own MKL branch and a machine's many cores.
OTHER_CPUS = {
    "torch AVX-512": {"ATEN_CPU_CAPABILITY": "avx512"},
    "torch AVX2, MKL AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "torch default, MKL_CBWR=AVX2, 16 threads": {
        "ATEN_CPU_CAPABILITY": "default",
        "MKL_CBWR": "AVX2",
        "OMP_NUM_THREADS": "16",
    },
}


def _pretrain(folder: Path, env: dict[str, str], *overrides: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ATEN_", "MKL_", "OMP_", "CPMOBIUS_"))}
    out = subprocess.run(
        [sys.executable, "-c", PRETRAIN, str(folder), *overrides],
        env={**clean, **env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="torch's x86-64 kernels and MKL")
def test_the_toy_models_get_the_same_weights_whichever_kernels_this_cpu_offers(tmp_path):
    """The run's figures split at the pretraining (each kernel choice pretrained other weights) and are
    deterministic from the same weights on: with the portable kernels every emulated CPU gets one set of
    weights, where without them (``backend.portable_kernels=false``) torch's choice alone gives another."""
    held = {name: _pretrain(tmp_path / f"held{i}", env) for i, (name, env) in enumerate(OTHER_CPUS.items())}
    assert {r["kernels"] for r in held.values()} == {"DEFAULT"}
    assert len({r["weights"] for r in held.values()}) == 1, held
    native = [
        _pretrain(tmp_path / f"native{i}", env, "backend.portable_kernels=false")
        for i, env in enumerate(({"ATEN_CPU_CAPABILITY": "default"}, {}))
    ]
    if native[1]["kernels"] != "DEFAULT":  # this CPU has vector kernels: they sum in another order
        assert native[0]["weights"] != native[1]["weights"], native


def test_models_pretrained_on_other_kernels_are_not_reused(monkeypatch):
    from cpmobius.toy.cache import _toy_record

    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    portable = _toy_record("Write a problem.", None, PretrainSpec())
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    portable = _toy_record("Write a problem.", None, PretrainSpec())
    assert portable["kernels"] == PORTABLE_KERNELS
    monkeypatch.delenv("MKL_CBWR")
    assert _toy_record("Write a problem.", None, PretrainSpec()) != portable


def test_a_process_already_on_other_kernels_refuses_to_record_them_as_held(monkeypatch):
    """torch fixes its kernels at its first computation: a variable set later changes nothing, so what the
    process makes must not be recorded as made on the variable's kernels."""
    from cpmobius.cpu_kernels import check_kernels_in_force

    torch.ones(2).sum()  # this process has chosen its kernels
    running = torch.backends.cpu.get_cpu_capability()
    check_kernels_in_force({"ATEN_CPU_CAPABILITY": running.lower()})
    check_kernels_in_force({})
    other = "avx2" if running.upper() != "AVX2" else "default"
    with pytest.raises(RuntimeError, match=f"computes on torch's {running} kernels, but ATEN_CPU_CAPABILITY={other}"):
        check_kernels_in_force({"ATEN_CPU_CAPABILITY": other})


def test_the_learning_benchmark_pretrains_on_the_kernels_its_runs_hold(tmp_path, load_script, monkeypatch):
    """The benchmark pretrains each seed before its runs; on other kernels than the runs', every run would find
    the models made on the wrong kernels and pretrain again (two at a time into one folder)."""
    bench = load_script("benchmarks/bench_toy_learning.py")
    for name in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    short = ["model.pretrain.player_steps=4", "model.pretrain.coach_steps=4", "model.pretrain.batch_size=8"]
    bench.prepare_seed(3, [f"model.cache_dir={tmp_path}", *short])
    records = [
        json.loads((tmp_path / "seed3" / f"tiny-{role}" / "cpmobius_toy.json").read_text())
        for role in ("coach", "player")
    ]
    assert [r["kernels"] for r in records] == [PORTABLE_KERNELS, PORTABLE_KERNELS]


def test_a_process_on_other_kernels_pretrains_in_fresh_processes_on_the_held_ones(tmp_path, monkeypatch):
    """A process that computed before the portable kernels were held (a test, a notebook) still gets the models the
    held kernels make, recorded as such: both models are pretrained in spawned processes, not in this one."""
    import hashlib
    from dataclasses import replace

    from cpmobius.toy.cache import materialize_toy_models

    torch.ones(2).sum()  # this process has chosen its kernels (the machine's own)
    for name, value in PORTABLE_KERNELS.items():
        monkeypatch.setenv(name, value)
    cfg = compose_config([])
    spec = replace(PretrainSpec(**cfg.model.pretrain), player_steps=6, coach_steps=6, batch_size=16)
    ready = []
    folders = materialize_toy_models(
        tmp_path / "here" / "coach",
        tmp_path / "here" / "player",
        "Write a problem.",
        dict(cfg.model.tiny_spec),
        spec,
        coach_ready=lambda: ready.append((tmp_path / "here" / "coach" / "model.safetensors").is_file()),
    )
    assert ready == [True]  # the Coach's folder was in place when the warm-up could start
    digest = hashlib.sha256(b"".join((f / "model.safetensors").read_bytes() for f in folders)).hexdigest()[:16]
    held = _pretrain(tmp_path / "held", OTHER_CPUS["torch AVX2, MKL AVX2"])
    assert digest == held["weights"]
    assert json.loads((folders[0] / "cpmobius_toy.json").read_text())["kernels"] == PORTABLE_KERNELS
