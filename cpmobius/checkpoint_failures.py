"""What a failed checkpoint save or a full disk tells the user, in one line, and the disk figures it quotes.

`cpmobius.checkpoint` raises `CheckpointSaveError` with `describe_save_failure`'s line; the driver prints
`describe_full_disk`'s line for a disk that filled up elsewhere (metrics, the problem archive); both say which
checkpoint is intact and what resumes the run (`resume_command`). `format_bytes` and `free_bytes` are shared with
the start-up space check (`cpmobius.checkpoint_space`).
"""

from __future__ import annotations

import errno
import math
import os
import shutil
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf


class CheckpointSaveError(RuntimeError):
    """Writing a checkpoint failed; the previous checkpoint is intact and still the latest."""


def resume_command(cfg: DictConfig) -> str:
    """What resumes a run from its newest checkpoint: the same command where it resumes by itself
    (``trainer.resume_mode=auto``); with ``disable`` the same command would start again, and with
    ``resume_path`` go back to ``trainer.resume_from_path``, so the key that resumes is added."""
    mode = OmegaConf.select(cfg, "trainer.resume_mode", default="auto")
    return "run the same command" if mode == "auto" else "run the same command with trainer.resume_mode=auto"


def describe_save_failure(
    root: Path, step: int, error: BaseException, latest: Optional[str], resume: str = "run the same command"
) -> str:
    """One line: what failed, the free space left, the checkpoint a rerun resumes from (``latest``, the tracker
    file's text, None without one; ``resume``: `resume_command`)."""
    resume = (
        f"the last complete checkpoint, step {latest}, is intact: make room (or move {root} to a larger "
        f"disk and point trainer.default_local_dir there) and {resume} to resume from it"
        if latest is not None
        else "no earlier checkpoint exists: make room and run the same command to start again"
    )
    return (
        f"saving the checkpoint of step {step} in {root} failed ({describe_failure(error)}; "
        f"{format_bytes(free_bytes(root))} free now); {resume}"
    )


def describe_full_disk(error: OSError, root: str | os.PathLike, resume: str = "run the same command") -> Optional[str]:
    """One line for a disk that filled up outside a checkpoint save (metrics, problem archive), or None
    when ``error`` is not ENOSPC; ``resume`` says what resumes the run (`resume_command`)."""
    if error.errno != errno.ENOSPC:
        return None
    where = f" writing {error.filename}" if error.filename else ""
    return (
        f"the disk is full ({error.strerror}{where}); the last complete checkpoint in {root} is intact: "
        f"make room and {resume} to resume from it"
    )


def format_bytes(n: float, up: bool = False) -> str:
    """``n`` bytes in decimal units, one decimal: ``format_bytes(42_660_000_000) == "42.7 GB"``; with ``up``
    rounded up, for room that must suffice (``format_bytes(42_610_000_000, up=True) == "42.7 GB"``)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            if up:
                n = math.ceil(n) if unit == "B" else math.ceil(n * 10) / 10
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def free_bytes(folder: str | Path) -> int:
    """Free bytes on the disk that holds ``folder`` (or its nearest existing parent)."""
    path = Path(folder).expanduser().absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def describe_failure(error: BaseException) -> str:
    """The first line of what made a save fail, reached through Ray's task wrapper."""
    cause = getattr(error, "cause", None)
    lines = [line.strip() for line in str(cause or error).strip().splitlines() if line.strip()]
    if not lines:
        return type(cause or error).__name__
    # A task error's own text is Ray's traceback, whose last line is the error; a cause's first line is.
    return f"{type(cause).__name__}: {lines[0]}" if cause is not None else lines[-1]
