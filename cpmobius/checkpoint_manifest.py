"""Checkpoint integrity: the manifest each checkpoint ends with, durable writes, and the check before a resume.

`cpmobius.checkpoint.save_checkpoint` writes every file of a checkpoint (verl's shards of both policies,
the loop state, the RNG state, the config) into a partial folder, then ``manifest.json`` last: each
file's path, size in bytes and SHA-256. Every file and folder is fsynced before the folder is renamed
into place, so a host crash or power loss after the rename cannot leave a truncated file behind a
tracker that names it.

A resume checks the checkpoint against its manifest before Ray starts (`verify_checkpoint`): a file
missing, of another size, with another hash, or a file the manifest does not list, makes the checkpoint
broken. verl loads its shards with ``torch.load`` with weights_only off (pickles run code), so that
load is reached only for files that match what this run wrote.

Cost, measured on the 2-core Xeon (SHA-NI) of the development machine: SHA-256 of a 2 GiB file read
in 8 MiB chunks runs at 1.3-1.4 GB/s with the file out of the page cache or in it (1.58 GB/s in memory),
and two threads hash two files at 2.5 GB/s together (hashlib releases the GIL). A 1.5B-shape checkpoint
(42.7 GB: per policy a 7.1 GB weight shard and a 14.2 GB AdamW shard) costs ~32 s on one core, ~17 s on
these two, and on a GPU host with more cores about its largest file's time, ~11 s, when the disk keeps
up: once when it is written and once before a resume, against the minutes a save and a step take.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1
# The key a checkpoint's own record (``loop_state.json``, the best-Player record) carries once the folder was
# written with a manifest: a manifest deleted afterwards makes the folder broken, not unchecked.
MANIFEST_MARK = "manifest_format"
BEST_RECORD = "cpmobius_best.json"  # the best-Player copy's score and step (`cpmobius.checkpoint.save_best_policy`)
MARKED_RECORDS = ("loop_state.json", BEST_RECORD)
CHUNK_BYTES = 8 << 20  # 8 MiB reads: 1.3-1.4 GB/s; 64 MiB ones measured slower (0.9 GB/s), and take more memory


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of the file at ``path``, read in 8 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a file's or a folder's data and metadata to the disk (``fsync``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_files(folder: Path) -> list[str]:
    """Every file under ``folder`` but its manifest, as sorted POSIX paths relative to ``folder``.

    Symbolically linked folders are walked too (each real folder once), so a file reached through a link
    (a shard folder moved to another disk and linked back, with a stale shard of another world size in
    it) is listed like any other, and is unlisted in the manifest when this run did not write it.
    """
    names, seen = [], set()
    for top, dirs, files in os.walk(folder, followlinks=True):
        real = os.stat(top)
        if (real.st_dev, real.st_ino) in seen:  # a link back to a folder already walked
            dirs[:] = []
            continue
        seen.add((real.st_dev, real.st_ino))
        relative = Path(top).relative_to(folder)
        names += [(relative / f).as_posix() for f in files if os.path.isfile(os.path.join(top, f))]
    return sorted(name for name in names if name != MANIFEST_FILE)


def _hash_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def write_manifest(folder: str | os.PathLike) -> dict:
    """Hash every file under ``folder``, write ``manifest.json`` last, fsync every file and folder.

    Returns:
        the manifest: ``{"format": 1, "files": {relative path: {"bytes": int, "sha256": hex}}}``.
    """
    folder = Path(folder)
    names = checkpoint_files(folder)
    with ThreadPoolExecutor(_hash_workers()) as pool:
        digests = list(pool.map(lambda name: sha256_file(folder / name), names))
        list(pool.map(lambda name: fsync_path(folder / name), names))
    files = {name: {"bytes": (folder / name).stat().st_size, "sha256": d} for name, d in zip(names, digests)}
    manifest = {"format": MANIFEST_FORMAT, "files": files}
    path = folder / MANIFEST_FILE
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    folders = {(folder / name).parent for name in names} | {folder}
    for sub in sorted(folders, key=lambda p: len(p.parts), reverse=True):  # deepest first, the folder itself last
        fsync_path(sub)
    return manifest


def read_manifest(folder: str | os.PathLike) -> Optional[dict]:
    """The manifest of ``folder``, or None when it has none (a checkpoint from before manifests).

    Raises:
        ValueError: one line, when ``manifest.json`` exists but is not a manifest (truncated, edited).
    """
    path = Path(folder) / MANIFEST_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        manifest = json.loads(path.read_text())
        files = manifest["files"]
        if not all(isinstance(e["bytes"], int) and isinstance(e["sha256"], str) for e in files.values()):
            raise TypeError("an entry without bytes and sha256")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is unreadable ({type(error).__name__}: {error})") from None
    return manifest


def verify_checkpoint(folder: str | os.PathLike) -> Optional[str]:
    """Check ``folder`` against its manifest: sizes first (cheap), then SHA-256 in parallel threads.

    Returns:
        None when every listed file is there with its size and hash and no other file is; else one line
        naming the first file that differs and how. A folder without a manifest returns None (unchecked:
        `read_manifest` tells the two apart), unless its record says it was written with one.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return f"{folder} is not a folder"
    try:
        manifest = read_manifest(folder)
    except ValueError as error:
        return str(error)
    if manifest is None:
        return _missing_manifest(folder)
    files = manifest["files"]
    for name, entry in files.items():
        path = folder / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            return f"{folder / MANIFEST_FILE} lists a path outside the checkpoint: {name}"
        if not path.is_file():
            return f"{path} is missing"
        size = path.stat().st_size
        if size != entry["bytes"]:
            return f"{path} is {size:,} bytes, the manifest says {entry['bytes']:,} (truncated or rewritten)"
    unlisted = [name for name in checkpoint_files(folder) if name not in files]
    if unlisted:
        return f"{folder / unlisted[0]} is not in the manifest (a file this run did not write)"
    names = sorted(files, key=lambda name: -files[name]["bytes"])
    with ThreadPoolExecutor(_hash_workers()) as pool:
        digests = list(pool.map(lambda name: sha256_file(folder / name), names))
    for name, digest in zip(names, digests):
        if digest != files[name]["sha256"]:
            return f"{folder / name} does not match its SHA-256 in the manifest (its bytes changed)"
    return None


def _missing_manifest(folder: Path) -> Optional[str]:
    """One line when a record of ``folder`` says it was written with a manifest (now missing), else None."""
    for name in MARKED_RECORDS:
        try:
            record = json.loads((folder / name).read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(record, dict) and MANIFEST_MARK in record:
            return f"{folder / MANIFEST_FILE} is missing, though {folder / name} says the folder was written with one"
    if folder.name.startswith("global_step_"):  # a step's checkpoint: the resume reads its loop state once Ray is up
        try:
            if not isinstance(json.loads((folder / "loop_state.json").read_text()), dict):
                raise ValueError
        except (OSError, ValueError, UnicodeDecodeError):
            return f"{folder / 'loop_state.json'} is missing or unreadable (cut short?), and there is no manifest"
    return None


class CheckpointCorruptError(RuntimeError):
    """No intact checkpoint to resume from, or the one ``trainer.resume_from_path`` names is broken."""


# The ways out of a run folder without an intact checkpoint, and of a broken one that trainer.resume_from_path picked
# (another folder would not help there: the run would still resume from the picked one).
RESUME_KEYS = (
    "set trainer.resume_mode=disable to start again, trainer.resume_mode=resume_path "
    "trainer.resume_from_path=<a global_step_N folder> to pick one, or another trainer.default_local_dir"
)
PICKED_RESUME_KEYS = (
    "set trainer.resume_mode=disable to start again, trainer.resume_from_path=<another global_step_N folder> "
    "to pick another, or trainer.resume_mode=auto to resume from the newest intact one in trainer.default_local_dir"
)
_verified: dict[Path, int] = {}  # checkpoint folder → its manifest's mtime when it was found intact


def check_checkpoint(path: Path) -> Optional[str]:
    """`verify_checkpoint` once per process (remembered while the manifest is unchanged)."""
    manifest = path / "manifest.json"
    stamp = manifest.stat().st_mtime_ns if manifest.is_file() else -1
    if _verified.get(path.resolve()) == stamp:
        return None
    problem = verify_checkpoint(path)
    if problem is None:
        _verified[path.resolve()] = stamp
    return problem


def require_intact(path: Path, ways_out: str = RESUME_KEYS) -> None:
    """Raise `CheckpointCorruptError` (one line naming the file, then ``ways_out``) when ``path`` does not match its
    manifest."""
    problem = check_checkpoint(path)
    if problem is not None:
        raise CheckpointCorruptError(f"the checkpoint {path} is broken: {problem}; {ways_out}")
