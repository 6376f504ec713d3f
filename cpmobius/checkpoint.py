"""Checkpoints: both policies, both optimizers, the loop state and the resolved config, written atomically.

Layout under ``trainer.default_local_dir``::

    global_step_{N}/coach/          verl actor checkpoint (model, optimizer, LR scheduler, RNG) per rank
    global_step_{N}/player/
    global_step_{N}/loop_state.json step, Δt and validation history, best score, rollback counter,
                                    filter statistics, generation counters
    global_step_{N}/rng.pt          driver RNG states (python, numpy, torch)
    global_step_{N}/config.yaml     the resolved config of the run
    latest_checkpointed_iteration.txt   N, written last (verl's tracker file name)

    global_step_{N}/manifest.json   every other file's size and SHA-256, written last
                                    (`cpmobius.checkpoint_manifest`)

A checkpoint is written into ``.global_step_{N}.partial``, its manifest written and every file and
folder fsynced, then renamed into place, and the tracker file is replaced atomically (fsynced too)
after that: a run killed mid-save, or a host that loses power, leaves the previous checkpoint as the
latest, never a half-written one. A save that fails (a full disk) removes its partial copy and raises
`CheckpointSaveError` with one line; the room a run needs is checked at start-up
(`cpmobius.checkpoint_space`).

Before Ray starts, `check_resume` checks the checkpoint a run would resume from against its manifest;
a broken one (a truncated shard, an edited file, a tracker holding garbage or naming a missing step) is
reported in one line, moved aside to ``broken_global_step_{N}``, and the run resumes from the newest
intact checkpoint before it (`CheckpointCorruptError`, one line, when there is none). A checkpoint
written before checkpoints carried a manifest is resumed with a one-line warning that it cannot be
checked. Our own files load with ``torch.load(weights_only=True)``; verl's shards are pickles it loads
itself, reached only when the manifest matches.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable, Optional

import torch
from omegaconf import DictConfig, OmegaConf

from cpmobius.checkpoint_failures import CheckpointSaveError, describe_save_failure
from cpmobius.checkpoint_manifest import (
    BEST_RECORD,
    MANIFEST_FORMAT,
    MANIFEST_MARK,
    PICKED_RESUME_KEYS,
    RESUME_KEYS,
    CheckpointCorruptError,
    check_checkpoint,
    fsync_path,
    read_manifest,
    require_intact,
    write_manifest,
)
from cpmobius.policy_api import TrainedPolicy
from cpmobius.rng_state import capture_rng, load_rng, restore_rng

TRACKER_FILE = "latest_checkpointed_iteration.txt"


def _atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically and durably (the file, then its folder, fsynced)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)


def save_checkpoint(
    root: str | os.PathLike,
    step: int,
    policies: dict[str, TrainedPolicy],
    loop_state: dict,
    config: DictConfig,
    keep: Optional[int] = None,
    resume: str = "run the same command",
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
        resume: what resumes this run, for the line of a failed save (`resume_command`).

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
        (partial / "loop_state.json").write_text(json.dumps({**loop_state, MANIFEST_MARK: MANIFEST_FORMAT}, indent=1))
        torch.save(capture_rng(), partial / "rng.pt")
        (partial / "config.yaml").write_text(OmegaConf.to_yaml(config, resolve=True))
        write_manifest(partial)  # last: sizes and SHA-256 of every file, all fsynced
    except Exception as error:  # a full disk, a lost mount, a worker's torch.save failing: nothing replaced
        shutil.rmtree(partial, ignore_errors=True)  # frees the space the half-written copy took
        tracker = root / TRACKER_FILE
        latest = tracker.read_text().strip() if tracker.is_file() else None
        raise CheckpointSaveError(describe_save_failure(root, step, error, latest, resume)) from error
    previous = root / f".global_step_{step}.previous"
    if final.exists():  # saving a step again: keep the old copy until the new one is in place
        if previous.exists():
            shutil.rmtree(previous)
        os.replace(final, previous)
    os.replace(partial, final)
    fsync_path(root)  # the rename itself is on disk before the tracker names it
    _atomic_write_text(root / TRACKER_FILE, str(step))
    if previous.exists():
        shutil.rmtree(previous)
    if keep is not None:
        prune_checkpoints(root, keep)
    return final


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
    latest = parse_step(tracker.read_text(errors="replace").strip()) if tracker.is_file() else None
    steps = sorted(s for s in map(checkpoint_step, root.glob("global_step_*")) if s is not None)
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


def parse_step(text: str) -> Optional[int]:
    """The step N written as this run writes it (``str(N)``: ASCII digits, no leading zero, at most 18), else
    None: ``02``, ``²``, ``٣``, ``-1`` and a 5,000-digit number are not steps (``global_step_02`` is not the
    folder of step 2, and ``int`` of the last two raises)."""
    if not (text.isascii() and text.isdigit()) or len(text) > 18 or (len(text) > 1 and text[0] == "0"):
        return None
    return int(text)


def checkpoint_step(path: Path) -> Optional[int]:
    """N of a ``global_step_N`` folder, else None."""
    head, _, tail = path.name.rpartition("_")
    return parse_step(tail) if head == "global_step" else None


def _move_aside(path: Path) -> Path:
    target, n = path.with_name(f"broken_{path.name}"), 1
    while target.exists():
        n += 1
        target = path.with_name(f"broken_{path.name}_{n}")
    os.replace(path, target)
    return target


def _warn_unchecked(path: Path, report: Callable[[str], None]) -> None:
    # A checkpoint from before manifests: accepted (runs written by earlier versions keep resuming), said once.
    if read_manifest(path) is None:
        report(
            f"[cpmobius] warning: {path} has no manifest (written before checkpoints carried one): "
            "its files cannot be checked, and resuming it unpickles them as they are"
        )


def select_intact_checkpoint(root: str | os.PathLike, report: Callable[[str], None] = print) -> Optional[Path]:
    """The newest intact checkpoint at or before the step the tracker names; the tracker is repaired to it.

    Each broken checkpoint (one that does not match its manifest) is reported in one line naming its file
    and moved aside to ``broken_global_step_N``; a tracker holding garbage or naming a missing step is
    reported and every ``global_step_*`` folder is a candidate (resp. those before that step). A
    checkpoint without a manifest (written before manifests) is accepted with a one-line warning.

    Args:
        root: checkpoint folder (``trainer.default_local_dir``).
        report: called with each one-line message.

    Returns:
        the folder, or None when there is neither a tracker nor a ``global_step_*`` folder (a new run). Checkpoints
        without a tracker (lost or deleted) are resumed from, as with a tracker holding garbage.

    Raises:
        CheckpointCorruptError: a tracker or checkpoints exist but no checkpoint is intact, or the tracker is not a
            file; one line with the keys to set.
    """
    root = Path(root)
    tracker = root / TRACKER_FILE
    steps = sorted((s for s in map(checkpoint_step, root.glob("global_step_*")) if s is not None), reverse=True)
    if tracker.exists() and not tracker.is_file():
        raise CheckpointCorruptError(f"{tracker} is not a file: remove it to resume from the newest intact checkpoint")
    if not tracker.is_file() and not steps:
        return None
    # CPMöbius: verl starts a new run when the tracker is missing; beside checkpoints that would overwrite and prune
    # them, and drop the earlier run's metrics. A missing tracker is read as an unreadable one.
    text = tracker.read_text(errors="replace").strip() if tracker.is_file() else ""
    named = parse_step(text)
    if not tracker.is_file():
        report(f"[cpmobius] {tracker} is missing beside checkpoints: resuming from the newest intact checkpoint")
    elif named is None:
        report(f"[cpmobius] {tracker} holds {text[:40]!r}, not a step: resuming from the newest intact checkpoint")
    else:
        previous = root / f".global_step_{named}.previous"
        if not (root / f"global_step_{named}").is_dir() and previous.is_dir():  # killed while re-saving it
            os.replace(previous, root / f"global_step_{named}")
            steps = sorted(set(steps) | {named}, reverse=True)
        if named not in steps:
            report(f"[cpmobius] {tracker} names step {named} but {root / f'global_step_{named}'} is missing")
        steps = [s for s in steps if s <= named]
    broken = []
    for step in steps:
        path = root / f"global_step_{step}"
        problem = check_checkpoint(path)
        if problem is not None:
            broken.append(f"step {step}: {problem}")
            report(f"[cpmobius] checkpoint of step {step} is broken: {problem}; moved to {_move_aside(path)}")
            continue
        _warn_unchecked(path, report)
        if step != named:
            _atomic_write_text(tracker, str(step))
        if broken:
            report(f"[cpmobius] resuming from step {step}, the newest intact checkpoint")
        return path
    found = "; ".join(broken) if broken else "no global_step_* folder"
    raise CheckpointCorruptError(f"no intact checkpoint to resume from in {root} ({found}); {RESUME_KEYS}")


def check_resume(cfg: DictConfig, report: Callable[[str], None] = print) -> int:
    """Before Ray starts: the step the run resumes from, its checkpoint checked against its manifest.

    ``trainer.resume_mode=auto``: `select_intact_checkpoint` (falls back past broken ones). ``resume_path``:
    the folder ``trainer.resume_from_path`` names must be intact (returns 0 as `resume_step` does).

    Raises:
        CheckpointCorruptError: one line naming the file, and the keys that choose a checkpoint.
    """
    mode = cfg.trainer.resume_mode
    if mode == "resume_path":
        path = Path(str(cfg.trainer.resume_from_path)).expanduser()
        if not path.is_dir():
            raise CheckpointCorruptError(f"trainer.resume_from_path: no checkpoint folder at {path}")
        require_intact(path, PICKED_RESUME_KEYS)
        _warn_unchecked(path, report)
        return 0
    if mode != "auto":
        return 0
    latest = select_intact_checkpoint(cfg.trainer.default_local_dir, report)
    return 0 if latest is None else checkpoint_step(latest)


def resume_step(cfg: DictConfig) -> int:
    """The step a run of ``cfg`` resumes from: its latest checkpoint's with ``trainer.resume_mode=auto``, else 0."""
    if cfg.trainer.resume_mode != "auto":
        return 0
    latest = find_latest_checkpoint(cfg.trainer.default_local_dir)
    return int(latest.name.rsplit("_", 1)[1]) if latest is not None else 0


def save_best_policy(folder: str | os.PathLike, policy: TrainedPolicy, score: float, step: int) -> Path:
    """Save ``policy`` as the best one so far, with its score inside the folder, atomically.

    Written into ``.<name>.partial`` with a manifest (`write_manifest`, last) and swapped into place (the
    old copy kept as ``.<name>.previous`` until the swap is done): a run killed mid-save keeps the previous
    best, whole, with its own score; a rollback loads it only while it matches its manifest.

    Returns:
        the folder.
    """
    folder = Path(folder)
    partial = folder.with_name(f".{folder.name}.partial")
    previous = folder.with_name(f".{folder.name}.previous")
    if partial.exists():
        shutil.rmtree(partial)
    policy.save(str(partial.resolve()))
    _atomic_write_text(
        partial / BEST_RECORD, json.dumps({"score": score, "step": step, MANIFEST_MARK: MANIFEST_FORMAT})
    )
    write_manifest(partial)
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
    if not record.is_file():
        return None
    saved = json.loads(record.read_text())
    return {"score": saved["score"], "step": saved["step"]}


def load_checkpoint(path: str | os.PathLike, policies: dict[str, TrainedPolicy]) -> dict:
    """Load both policies (weights, optimizer, scheduler, RNG) and the driver RNG; return the loop state.

    Raises:
        CheckpointCorruptError: ``path`` does not match its manifest (checked once per process; nothing
            of it is unpickled then).
    """
    path = Path(path)
    require_intact(path)
    state = json.loads((path / "loop_state.json").read_text())
    for name, policy in policies.items():
        policy.load(str((path / name).resolve()), global_steps=state["policies"][name]["global_steps"])
        policy.generation_calls = state["policies"][name]["generation_calls"]
    restore_rng(load_rng(path / "rng.pt"))
    return state
