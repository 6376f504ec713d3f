"""The toy world's files on disk: the tiny models, pretrained once per seed and spec, and the warm-up set.

`materialize_toy_models` builds and pretrains the tiny Coach and Player of the toy world
(`cpmobius.toy.world`) side by side and saves them in the HF layout; each folder's
``cpmobius_toy.json`` records what it was built from (sizes, pretraining spec with its seed, Coach
instruction, `code_version`), and a folder is reused only when that record matches;
`write_coach_warmup_data` keeps the Coach warm-up set the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import torch

from cpmobius.cpu_kernels import check_kernels_in_force, kernel_settings, kernels_in_force
from cpmobius.toy.tiny_models import TINY_SPEC, build_char_tokenizer, build_tiny_qwen2
from cpmobius.toy.world import PretrainSpec, coach_sampler, coach_warmup_messages, player_sampler, pretrain


def code_version() -> str:
    """A hash of the code that decides the toy models' weights (`world`, `tiny_models` and this module):
    part of the cache key, so that a change to the world, its corpora or the models never reuses stale weights.

    The hash is of the syntax trees without docstrings (`source_digest`), so that editing a comment or a
    docstring keeps the cache; any change to the code itself (a constant included) makes new weights.
    """
    import hashlib

    from cpmobius.toy import tiny_models, world

    digest = hashlib.sha256()
    for path in (Path(world.__file__), Path(tiny_models.__file__), Path(__file__)):
        digest.update(source_digest(path.read_text(encoding="utf-8")).encode())
    return digest.hexdigest()[:16]


def source_digest(source: str) -> str:
    """``ast.dump`` of Python source with every docstring removed (comments never reach the tree)."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or ([] if isinstance(node, ast.Module) else [ast.Pass()])
    return ast.dump(tree)


def _toy_record(coach_instruction: str, tiny_spec: Optional[dict[str, int]], pretrain_spec: PretrainSpec) -> dict:
    """What a cached toy model folder must have been built from (its ``cpmobius_toy.json``): the model
    sizes, the pretraining spec (seed included), the Coach instruction, the code version and the CPU kernels."""
    record = {
        "tiny_spec": dict(tiny_spec or TINY_SPEC),
        "pretrain": asdict(pretrain_spec),
        "instruction": coach_instruction,
        "code": code_version(),
        "kernels": kernel_settings(),  # the pretraining processes' kernels (`cpmobius.cpu_kernels`)
    }
    return json.loads(json.dumps(record))  # as read back from the marker file (tuples become lists)


FILES = "cpmobius_files.json"  # each file's size, written before the marker: a truncated file is not a cached model


def _is_cached(path: Path, record: dict) -> bool:
    """Whether ``path`` holds whole models made from ``record``: its marker matches (an unreadable marker does not)
    and every file the folder listed has its size (folders written before the list are taken on the marker)."""
    try:
        if json.loads((path / "cpmobius_toy.json").read_text()) != record:
            return False
        sizes = json.loads((path / FILES).read_text()) if (path / FILES).is_file() else {}
        return all((path / name).is_file() and (path / name).stat().st_size == size for name, size in sizes.items())
    except (OSError, ValueError, AttributeError):  # absent, cut short or not JSON: pretrained again
        return False


def toy_models_cached(
    coach_path: str | os.PathLike,
    player_path: str | os.PathLike,
    coach_instruction: str,
    tiny_spec: Optional[dict[str, int]] = None,
    pretrain_spec: PretrainSpec = PretrainSpec(),
) -> bool:
    """Whether `materialize_toy_models` with these arguments would only load both models from the cache."""
    record = _toy_record(coach_instruction, tiny_spec, pretrain_spec)
    return all(_is_cached(Path(path).expanduser(), record) for path in (coach_path, player_path))


def materialize_toy_models(
    coach_path: str | os.PathLike,
    player_path: str | os.PathLike,
    coach_instruction: str,
    tiny_spec: Optional[dict[str, int]] = None,
    pretrain_spec: PretrainSpec = PretrainSpec(),
    progress: bool = False,
    coach_ready: Optional[Callable[[], None]] = None,
) -> tuple[Path, Path]:
    """Build, pretrain and save the toy Coach and Player (HF layout), unless cached with the same specs.

    Calls for the same folders at once (two runs of one seed started side by side) pretrain them once: each
    folder has a lock file beside it (``.<name>.lock``), and the later call waits, then finds them cached.

    The Coach learns arithmetic text (`coach_sampler`); the Player learns problem → ``\\boxed{answer}``
    with slips (`player_sampler`), so that it is right on some samples and wrong on others.

    Args:
        progress: show a progress bar (stderr) for each model that is pretrained.
        coach_ready: called once the Coach's folder is in place, the Player's pretraining perhaps still
            running (the driver starts the Coach warm-up there, on the core the Coach's shorter pretraining
            leaves idle); if ``coach_ready`` raises, the Player's pretraining is stopped.

    Returns:
        ``(coach_path, player_path)``.

    Raises:
        RuntimeError: a pretraining process failed.
    """
    record = _toy_record(coach_instruction, tiny_spec, pretrain_spec)
    paths = {"Coach": Path(coach_path).expanduser(), "Player": Path(player_path).expanduser()}
    with _folder_locks(paths.values()):
        _materialize_locked(paths, record, coach_instruction, tiny_spec, pretrain_spec, progress, coach_ready)
    return paths["Coach"], paths["Player"]


@contextlib.contextmanager
def _folder_locks(folders: Iterable[Path]) -> Iterator[None]:
    """Hold a lock file beside each folder (``.<name>.lock``), always in the order given.

    Two runs of one seed started at once (two ablations side by side on a fresh cache) would otherwise both
    pretrain into the same folders, the second replacing the first's folder while the first may be loading it;
    with the locks, the second waits and then finds the models cached.
    """
    from filelock import FileLock, Timeout

    with contextlib.ExitStack() as stack:
        for folder in folders:
            folder.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(folder.with_name(f".{folder.name}.lock")))
            try:
                lock.acquire(timeout=0)
            except Timeout:
                print(f"[cpmobius] toy world: waiting for another run that is writing {folder}", flush=True)
                lock.acquire()
            stack.callback(lock.release)
        yield


def _materialize_locked(
    paths: dict[str, Path],
    record: dict,
    coach_instruction: str,
    tiny_spec: Optional[dict[str, int]],
    pretrain_spec: PretrainSpec,
    progress: bool,
    coach_ready: Optional[Callable[[], None]],
) -> None:
    """`materialize_toy_models`'s work, its folders' locks held."""
    todo = [role for role, path in paths.items() if not _is_cached(path, record)]
    args = (coach_instruction, tiny_spec, pretrain_spec, record, progress)
    # Each on one thread (`pretrain`), the Player's in a second process, same seeds as one by one. A process already
    # computing on other kernels than the record names (it computed before they were held) pretrains neither itself:
    # a fresh process takes the held kernels from the environment, so the record says what made the weights.
    here = todo[:1] if kernels_in_force() else []
    children = {role: _start_child(role, paths[role], args) for role in todo if role not in here}
    try:
        if "Coach" in here:
            _materialize_one("Coach", paths["Coach"], *args)
        elif "Coach" in children:
            _join_child("Coach", children.pop("Coach"))
        if coach_ready is not None:
            coach_ready()
        if "Player" in here:
            _materialize_one("Player", paths["Player"], *args)
    except BaseException:
        for child in children.values():
            child.terminate()  # a failed Coach or warm-up start: no Player pretraining left running
        raise
    finally:
        for role, child in children.items():
            _join_child(role, child, check=False)
    for role, child in children.items():
        if child.exitcode != 0:
            raise RuntimeError(f"pretraining the tiny {role} failed (exit {child.exitcode})")


def _start_child(role: str, path: Path, args: tuple) -> Any:
    """`_materialize_one` for ``role`` in a spawned process (a fresh torch, on the environment's kernels)."""
    import multiprocessing

    child = multiprocessing.get_context("spawn").Process(target=_materialize_one, args=(role, path, *args))
    child.start()
    return child


def _join_child(role: str, child: Any, check: bool = True) -> None:
    """Wait for a pretraining process; with ``check``, raise when it failed."""
    child.join()
    if check and child.exitcode != 0:
        raise RuntimeError(f"pretraining the tiny {role} failed (exit {child.exitcode})")


def _materialize_one(
    role: str,
    path: Path,
    coach_instruction: str,
    tiny_spec: Optional[dict[str, int]],
    pretrain_spec: PretrainSpec,
    record: dict,
    progress: bool,
) -> None:
    """Build, pretrain and save one toy model ("Coach" or "Player") at ``path`` (`materialize_toy_models`)."""
    from transformers.utils import logging as hf_logging

    check_kernels_in_force()  # the record names the kernels in the environment: they must be this process's

    if role == "Coach":
        sample, steps, model_seed = (
            coach_sampler(coach_instruction, pretrain_spec.coach_corpus),
            pretrain_spec.coach_steps,
            1,
        )
    else:
        sample = player_sampler(
            pretrain_spec.player_answer_noise, pretrain_spec.player_unboxed, pretrain_spec.player_unboxed_growth
        )
        steps, model_seed = pretrain_spec.player_steps, 2
    tokenizer = build_char_tokenizer()
    model = build_tiny_qwen2(tokenizer, tiny_spec, seed=model_seed)
    torch.manual_seed(pretrain_spec.seed + model_seed)
    label = f"pretraining the tiny {role}" if progress else None
    losses = pretrain(
        model, tokenizer, sample, steps, replace(pretrain_spec, seed=pretrain_spec.seed + model_seed), label
    )
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a one-shard "Writing model shards" bar after the pretraining bar says nothing
    try:
        model.save_pretrained(tmp)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    tokenizer.save_pretrained(tmp)
    (tmp / "pretrain_loss.json").write_text(json.dumps({"first": losses[:5], "last": losses[-5:]}))
    (tmp / FILES).write_text(json.dumps({f.name: f.stat().st_size for f in sorted(tmp.iterdir()) if f.is_file()}))
    (tmp / "cpmobius_toy.json").write_text(json.dumps(record))  # last: the folder is whole
    if path.exists():
        import shutil

        shutil.rmtree(path)
    tmp.rename(path)


def write_coach_warmup_data(path: str | os.PathLike, instruction: str, count: int = 512, seed: int = 7) -> Path:
    """Write `coach_warmup_messages` as a parquet (what ``warmup.data`` reads), unless the same set is there."""
    import pandas as pd

    path = Path(path).expanduser()
    marker = path.with_suffix(".json")
    record = {"instruction": instruction, "count": count, "seed": seed, "code": code_version()}
    if path.is_file() and marker.is_file() and json.loads(marker.read_text()) == record:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pd.DataFrame({"messages": coach_warmup_messages(instruction, count, seed)}).to_parquet(tmp)
    tmp.rename(path)
    marker.write_text(json.dumps(record))
    return path
