"""Checkpoints: both policies, both optimizers, the loop state and the resolved config, written atomically.

Layout under ``trainer.default_local_dir``::

    global_step_{N}/coach/          verl actor checkpoint (model, optimizer, LR scheduler, RNG) per rank
    global_step_{N}/player/
    global_step_{N}/loop_state.json step, Δt and validation history, best score, rollback counter,
                                    filter statistics, generation counters
    global_step_{N}/rng.pt          driver RNG states (python, numpy, torch)
    global_step_{N}/config.yaml     the resolved config of the run
    latest_checkpointed_iteration.txt   N, written last (verl's tracker file name)

A checkpoint is written into ``.global_step_{N}.partial`` and renamed into place, and the tracker
file is replaced atomically after that: a run killed mid-save leaves the previous checkpoint as the
latest, never a half-written one. A save that fails (a full disk) removes its partial copy and raises
`CheckpointSaveError` with one line; the room a run needs is checked at start-up
(`cpmobius.checkpoint_space`).
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from cpmobius.policy_api import TrainedPolicy

TRACKER_FILE = "latest_checkpointed_iteration.txt"


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def capture_rng() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def restore_rng(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(
    root: str | os.PathLike,
    step: int,
    policies: dict[str, TrainedPolicy],
    loop_state: dict,
    config: DictConfig,
    keep: Optional[int] = None,
) -> Path:
    """Write checkpoint ``step`` under ``root`` and make it the latest.

    Args:
        root: checkpoint folder (``trainer.default_local_dir``).
        step: completed loop steps.
        policies: ``{"coach": Policy, "player": Policy}``.
        loop_state: JSON-serialisable loop state.
        config: the run's config (saved resolved).
        keep: keep only the newest ``keep`` checkpoints (``trainer.max_actor_ckpt_to_keep``, verl's
            key; None keeps all). Older ``global_step_*`` folders are deleted only after the new one
            is the latest. At the 1.5B shape one step's checkpoint (both policies, fp32 weights and
            Adam states) is ~37 GB, so a long run without a limit fills a disk.

    Returns:
        The checkpoint folder.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"global_step_{step}"
    partial = root / f".global_step_{step}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    try:
        partial.mkdir()
        for name, policy in policies.items():
            policy.save(str((partial / name).resolve()))
        (partial / "loop_state.json").write_text(json.dumps(loop_state, indent=1))
        torch.save(capture_rng(), partial / "rng.pt")
        (partial / "config.yaml").write_text(OmegaConf.to_yaml(config, resolve=True))
    except Exception as error:  # a full disk, a lost mount, a worker's torch.save failing: nothing replaced
        shutil.rmtree(partial, ignore_errors=True)  # frees the space the half-written copy took
        raise CheckpointSaveError(describe_save_failure(root, step, error)) from error
    previous = root / f".global_step_{step}.previous"
    if final.exists():  # saving a step again: keep the old copy until the new one is in place
        if previous.exists():
            shutil.rmtree(previous)
        os.replace(final, previous)
    os.replace(partial, final)
    _atomic_write_text(root / TRACKER_FILE, str(step))
    if previous.exists():
        shutil.rmtree(previous)
    if keep is not None:
        prune_checkpoints(root, keep)
    return final


class CheckpointSaveError(RuntimeError):
    """Writing a checkpoint failed; the previous checkpoint is intact and still the latest."""


def describe_save_failure(root: Path, step: int, error: BaseException) -> str:
    """One line: what failed, the free space left, the checkpoint a rerun resumes from."""
    tracker = root / TRACKER_FILE
    latest = tracker.read_text().strip() if tracker.is_file() else None
    resume = (
        f"the last complete checkpoint, step {latest}, is intact: make room (or move {root} to a larger "
        "disk and point trainer.default_local_dir there) and run the same command to resume from it"
        if latest is not None
        else "no earlier checkpoint exists: make room and run the same command to start again"
    )
    return (
        f"saving the checkpoint of step {step} in {root} failed ({describe_failure(error)}; "
        f"{format_bytes(free_bytes(root))} free now); {resume}"
    )


def describe_full_disk(error: OSError, root: str | os.PathLike) -> Optional[str]:
    """One line for a disk that filled up outside a checkpoint save (metrics, problem archive), or None
    when ``error`` is not ENOSPC."""
    if error.errno != errno.ENOSPC:
        return None
    where = f" writing {error.filename}" if error.filename else ""
    return (
        f"the disk is full ({error.strerror}{where}); the last complete checkpoint in {root} is intact: "
        "make room and run the same command to resume from it"
    )


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units, one decimal: ``format_bytes(42_660_000_000) == "42.7 GB"``."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
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


def prune_checkpoints(root: str | os.PathLike, keep: int) -> list[int]:
    """Delete all but the newest ``keep`` ``global_step_*`` folders under ``root``; the step the
    tracker file names is never deleted. Returns the deleted steps.

    Raises:
        ValueError: ``keep`` < 1.
    """
    if keep < 1:
        raise ValueError(f"trainer.max_actor_ckpt_to_keep must be >= 1 or null, got {keep}")
    root = Path(root)
    tracker = root / TRACKER_FILE
    latest = int(tracker.read_text().strip()) if tracker.is_file() else None
    steps = sorted(
        int(p.name.rsplit("_", 1)[1]) for p in root.glob("global_step_*") if p.name.rsplit("_", 1)[1].isdigit()
    )
    deleted = [s for s in steps[:-keep] if s != latest]
    for s in deleted:
        shutil.rmtree(root / f"global_step_{s}")
    return deleted


def find_latest_checkpoint(root: str | os.PathLike) -> Optional[Path]:
    """The checkpoint the tracker file names, or None when there is none.

    Raises:
        FileNotFoundError: when the tracker names a checkpoint folder that does not exist.
    """
    tracker = Path(root) / TRACKER_FILE
    if not tracker.is_file():
        return None
    step = int(tracker.read_text().strip())
    path = Path(root) / f"global_step_{step}"
    previous = Path(root) / f".global_step_{step}.previous"
    if not path.is_dir() and previous.is_dir():  # killed while re-saving this step: the old copy stands
        os.replace(previous, path)
    if not path.is_dir():
        raise FileNotFoundError(f"{tracker} names step {step} but {path} is missing")
    return path


def resume_step(cfg: DictConfig) -> int:
    """The step a run of ``cfg`` resumes from: its latest checkpoint's with ``trainer.resume_mode=auto``, else 0."""
    if cfg.trainer.resume_mode != "auto":
        return 0
    latest = find_latest_checkpoint(cfg.trainer.default_local_dir)
    return int(latest.name.rsplit("_", 1)[1]) if latest is not None else 0


BEST_RECORD = "cpmobius_best.json"


def save_best_policy(folder: str | os.PathLike, policy: TrainedPolicy, score: float, step: int) -> Path:
    """Save ``policy`` as the best one so far, with its score inside the folder, atomically.

    Written into ``.<name>.partial`` and swapped into place (the old copy kept as ``.<name>.previous``
    until the swap is done): a run killed mid-save keeps the previous best, whole, with its own score.

    Returns:
        the folder.
    """
    folder = Path(folder)
    partial = folder.with_name(f".{folder.name}.partial")
    previous = folder.with_name(f".{folder.name}.previous")
    if partial.exists():
        shutil.rmtree(partial)
    policy.save(str(partial.resolve()))
    _atomic_write_text(partial / BEST_RECORD, json.dumps({"score": score, "step": step}))
    if folder.exists():
        if previous.exists():
            shutil.rmtree(previous)
        os.replace(folder, previous)
    os.replace(partial, folder)
    if previous.exists():
        shutil.rmtree(previous)
    return folder


def read_best_record(folder: str | os.PathLike) -> Optional[dict]:
    """``{"score", "step"}`` of the best-policy folder `save_best_policy` wrote, or None when there is none.

    Recovers a save killed between its two renames (the previous copy is put back).
    """
    folder = Path(folder)
    previous = folder.with_name(f".{folder.name}.previous")
    if not folder.is_dir() and previous.is_dir():
        os.replace(previous, folder)
    record = folder / BEST_RECORD
    return json.loads(record.read_text()) if record.is_file() else None


def load_checkpoint(path: str | os.PathLike, policies: dict[str, TrainedPolicy]) -> dict:
    """Load both policies (weights, optimizer, scheduler, RNG) and the driver RNG; return the loop state."""
    path = Path(path)
    state = json.loads((path / "loop_state.json").read_text())
    for name, policy in policies.items():
        policy.load(str((path / name).resolve()), global_steps=state["policies"][name]["global_steps"])
        policy.generation_calls = state["policies"][name]["generation_calls"]
    restore_rng(torch.load(path / "rng.pt", weights_only=False))
    return state
