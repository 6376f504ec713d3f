"""Checkpoint space, checked at start-up: the bytes of one checkpoint and the room a run needs.

A checkpoint (`cpmobius.checkpoint`) holds, per policy, verl's actor shards: the weights in the actor's
``fsdp_config.model_dtype``, the AdamW moments (two tensors per parameter, same dtype), the extra state
(LR scheduler, RNG), the model's config and tokenizer files, and bf16 weights when
``actor.checkpoint.save_contents`` asks for ``hf_model``. At the 1.5B shape in fp32 that is
1.78 B × (4 + 8) bytes ≈ 21 GB per policy, ≈ 43 GB for both; a new checkpoint is written before an old
one is deleted. A run whose disk cannot hold what it will write stops here, before any model loads,
instead of dying in ``torch.save`` hours later.

Sizes come from parameter counts (the model built on PyTorch's meta device from its ``config.json``:
no weights are read) and dtypes, so the estimate holds for a folder that is not downloaded yet only
when its config is there; for the toy world the config comes from ``model.tiny_spec``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from cpmobius.checkpoint import resume_step
from cpmobius.checkpoint_failures import format_bytes, free_bytes
from cpmobius.config.known_keys import policy_keys
from cpmobius.error_text import first_line
from cpmobius.methods import get_method

# Weight files are not copied into a checkpoint's ``huggingface/`` folder; every other file of the model
# folder is (config, generation config, tokenizer).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".ckpt")
DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
# What a checkpoint holds and what a resume loads, under verl's actor_rollout_ref (or a policy's delta).
SAVE_CONTENTS, LOAD_CONTENTS = "actor.checkpoint.save_contents", "actor.checkpoint.load_contents"
# torch.save's per-tensor records, the LR scheduler and RNG state, fsdp_config.json: measured on the toy
# (2 ranks and 1): 50-60 KiB a rank and policy beyond the tensors' bytes.
OVERHEAD_BYTES_PER_RANK = 64 * 1024
# The tokenizer and config files of a toy model (its folder does not exist before pretraining).
TOY_MODEL_FILES_BYTES = 16 * 1024


class DiskSpaceError(RuntimeError):
    """The checkpoint folder's disk cannot hold what the run will write; nothing has run."""


@dataclass(frozen=True)
class PolicyCheckpoint:
    """The bytes one policy adds to a checkpoint.

    Attributes:
        name: "coach" or "player".
        parameters: parameter count of the model.
        weight_bytes: the actor's weight shards (parameters × bytes of ``model_dtype``).
        optimizer_bytes: AdamW's two moments (2 × parameters × bytes of ``model_dtype``).
        other_bytes: extra state, config and tokenizer files, bf16 HF weights when saved.
    """

    name: str
    parameters: int
    weight_bytes: int
    optimizer_bytes: int
    other_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.optimizer_bytes + self.other_bytes


def count_parameters(model_path: str, tiny_spec: Optional[dict] = None) -> int:
    """Parameters of the causal LM at ``model_path`` (or the toy model of ``tiny_spec``), read from its
    config on PyTorch's meta device: no weights are loaded.

    Raises:
        OSError: no config to read (a folder without ``config.json``, a hub id with the hub out of reach).
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if tiny_spec is not None:
        from cpmobius.toy.tiny_models import build_char_tokenizer, tiny_qwen2_config

        config = tiny_qwen2_config(build_char_tokenizer(), dict(tiny_spec))
    else:  # a local folder, or a hub id (only its config.json is fetched)
        folder = Path(model_path).expanduser()
        config = AutoConfig.from_pretrained(str(folder) if folder.is_dir() else model_path)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def _model_files_bytes(model_path: str) -> int:
    folder = Path(model_path).expanduser()
    if not folder.is_dir():
        return TOY_MODEL_FILES_BYTES
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file() and not f.name.endswith(WEIGHT_SUFFIXES))


def policy_checkpoint_bytes(
    name: str, policy_cfg: DictConfig, world_size: int, tiny_spec: Optional[dict] = None
) -> PolicyCheckpoint:
    """What one policy's part of a checkpoint weighs, from its verl config (`build_policy_configs`).

    Args:
        name: "coach" or "player".
        policy_cfg: the policy's full verl config (``actor_rollout_ref.model.path``, ``actor.fsdp_config``,
            ``actor.checkpoint.save_contents``).
        world_size: ranks of the policy's worker group (``nnodes × n_gpus_per_node``).
        tiny_spec: ``model.tiny_spec`` for the toy world (its folders may not exist yet).
    """
    arr = policy_cfg.actor_rollout_ref
    path = str(arr.model.path)
    parameters = count_parameters(path, tiny_spec)
    dtype_bytes = DTYPE_BYTES.get(str(arr.actor.fsdp_config.get("model_dtype") or "fp32"), 4)
    contents = set(arr.actor.checkpoint.save_contents)
    weights = parameters * dtype_bytes if "model" in contents else 0
    optimizer = 2 * parameters * dtype_bytes if "optimizer" in contents else 0
    other = world_size * OVERHEAD_BYTES_PER_RANK + _model_files_bytes(path)
    if "hf_model" in contents:
        other += parameters * 2
    return PolicyCheckpoint(name, parameters, weights, optimizer, other)


def saves_between(start: int, total: int, save_freq: int) -> int:
    """Checkpoints a run writes from step ``start`` (exclusive) to ``total`` (inclusive): every
    ``save_freq`` steps and after the last (`CoachPlayerLoop.fit`)."""
    steps = range(start + 1, total + 1)
    return sum(1 for s in steps if (save_freq > 0 and s % save_freq == 0) or s == total)


def checkpoints_held(existing: int, saves: int, keep: Optional[int]) -> int:
    """How many more checkpoints the disk must hold at the run's fullest moment.

    A new checkpoint is written whole before older ones are pruned (`cpmobius.checkpoint.save_checkpoint`),
    so keeping ``keep`` means ``keep + 1`` on disk while saving.

    Args:
        existing: ``global_step_*`` folders already in the checkpoint folder (a resumed run).
        saves: checkpoints this run will write (`saves_between`).
        keep: ``trainer.max_actor_ckpt_to_keep`` (None keeps all).
    """
    if saves == 0:
        return 0
    if keep is None:
        return saves
    return min(saves, max(keep + 1 - existing, 1))


@dataclass(frozen=True)
class SpacePlan:
    """The room a run needs in ``trainer.default_local_dir`` and what it has."""

    folder: str
    policies: tuple[PolicyCheckpoint, ...]
    checkpoints: int  # more checkpoints held at the fullest moment
    extra: dict[str, int]  # bytes of the best-Player copies (rollback) and the Coach warm-up's output
    free_bytes: int

    @property
    def extra_bytes(self) -> int:
        return sum(self.extra.values())

    @property
    def checkpoint_bytes(self) -> int:
        return sum(p.total_bytes for p in self.policies) + 64 * 1024  # + loop state, RNG, config

    @property
    def needed_bytes(self) -> int:
        return self.checkpoints * self.checkpoint_bytes + self.extra_bytes

    def describe(self) -> str:
        parts = ", ".join(f"{p.name} {format_bytes(p.total_bytes)}" for p in self.policies)
        return f"one checkpoint is {format_bytes(self.checkpoint_bytes)} ({parts})"


def plan_checkpoint_space(cfg: DictConfig, policy_cfgs: dict[str, DictConfig]) -> SpacePlan:
    """The room the run described by ``cfg`` needs for checkpoints, from its current state on disk.

    Counts the checkpoints still to be written (``trainer.total_training_steps``, ``save_freq``, from
    the latest one when resuming), how many are on disk at once (``max_actor_ckpt_to_keep`` + 1, or
    all), the best-Player folder and its replacement when rollback is on, and the Coach warm-up's
    checkpoint when it still has to run here.
    """
    trainer = cfg.trainer
    root = Path(str(trainer.default_local_dir)).expanduser()
    world_size = int(trainer.nnodes) * int(trainer.n_gpus_per_node)
    tiny_spec = dict(cfg.model.tiny_spec) if cfg.model.get("name") == "tiny" else None
    # The baselines on a fixed pool (method=ttrl|rent) start no Coach and save none.
    alone = not get_method(OmegaConf.select(cfg, "method.name", default="cpmobius")).has_coach
    policies = tuple(
        policy_checkpoint_bytes(name, policy_cfgs[name], world_size, tiny_spec)
        for name in (("player",) if alone else ("player", "coach"))
    )
    start = resume_step(cfg)
    existing = len(list(root.glob("global_step_*"))) if root.is_dir() else 0
    keep = trainer.get("max_actor_ckpt_to_keep")
    saves = saves_between(start, int(trainer.total_training_steps), int(trainer.save_freq))
    extra: dict[str, int] = {}
    player = policies[0]
    if cfg.player.rollback.enabled:
        extra["the best Player"] = (1 if (root / "best_player").is_dir() else 2) * player.total_bytes
    warmup_done = (root / "coach_warmup" / "latest_checkpointed_iteration.txt").is_file()
    if cfg.warmup.enabled and not warmup_done and not alone:  # written here, then kept in warmup.cache_dir if set
        coach = policies[1]
        extra["the Coach warm-up"] = coach.total_bytes + coach.parameters * 2  # its checkpoint, with bf16 HF weights
    held = checkpoints_held(existing, saves, None if keep is None else int(keep))
    return SpacePlan(str(root), policies, held, extra, free_bytes(root))


def check_checkpoint_space(cfg: DictConfig, policy_cfgs: dict[str, DictConfig]) -> str:
    """Stop before any model loads when the checkpoint folder's disk is too small for the run.

    Returns:
        the start-up line: the plan (`describe_plan`), or why it could not be made (a model whose config
        cannot be read here; the run goes on, and verl names the model if it cannot load it either).

    Raises:
        DiskSpaceError: one line naming the sizes, the free space and the keys that change them.
    """
    try:
        plan = plan_checkpoint_space(cfg, policy_cfgs)
    except (OSError, ValueError) as error:
        return f"[cpmobius] checkpoint space not checked: a model's config could not be read ({first_line(error)})"
    if plan.needed_bytes <= plan.free_bytes:
        return describe_plan(plan)
    trainer = cfg.trainer
    keep = trainer.get("max_actor_ckpt_to_keep")
    held = f"{plan.checkpoints} of them" + (
        " (every checkpoint is kept: max_actor_ckpt_to_keep=null)"
        if keep is None
        else f" (max_actor_ckpt_to_keep={keep}, plus the one being written)"
    )
    extra = "".join(f" + {format_bytes(size)} for {what}" for what, size in plan.extra.items())
    keep_fits = math.floor((plan.free_bytes - plan.extra_bytes) / plan.checkpoint_bytes) - 1
    if keep_fits < 1:
        advice = "one checkpoint and the next being written do not fit here: point"
    elif keep is None:
        advice = (
            f"set trainer.max_actor_ckpt_to_keep={keep_fits} or less, raise trainer.save_freq "
            f"(now {trainer.save_freq}), or point"
        )
    else:
        advice = f"lower trainer.max_actor_ckpt_to_keep to {keep_fits} or less, or point"
    raise DiskSpaceError(
        f"not enough disk for this run's checkpoints: {plan.describe()}; the run holds {held} = "
        f"{format_bytes(plan.checkpoints * plan.checkpoint_bytes)}{extra}, "
        f"but {plan.folder} has {format_bytes(plan.free_bytes)} free; "
        f"{advice} trainer.default_local_dir at a disk with {format_bytes(plan.needed_bytes, up=True)} free"
        f"{describe_weights_only(plan, policy_keys(cfg, [p.name for p in plan.policies], SAVE_CONTENTS))}"
    )


def weights_only_plan(plan: SpacePlan) -> SpacePlan:
    """``plan`` with checkpoints saved without optimizer state (the best-Player copies too)."""
    policies = tuple(replace(p, optimizer_bytes=0) for p in plan.policies)
    extra = dict(plan.extra)
    if "the best Player" in extra:  # 1 or 2 copies of the Player's part
        extra["the best Player"] = extra["the best Player"] // plan.policies[0].total_bytes * policies[0].total_bytes
    return replace(plan, policies=policies, extra=extra)


def describe_weights_only(plan: SpacePlan, keys: list[str]) -> str:
    """The refusal's last clause when saving weights only would fit: the ``keys`` that set it (`policy_keys`),
    its sizes, what a resume loses."""
    if not any(p.optimizer_bytes for p in plan.policies):
        return ""
    light = weights_only_plan(plan)
    if light.needed_bytes > plan.free_bytes:
        return ""
    return (
        f"; or save weights only, {' '.join(f'{key}=[model,extra]' for key in keys)} "
        f"({format_bytes(light.checkpoint_bytes)} a checkpoint, {format_bytes(light.needed_bytes)} needed; "
        "a resume then restarts both optimizers from zero moments)"
    )


def describe_plan(plan: SpacePlan) -> str:
    """One start-up line: checkpoint size, how many at once, free space."""
    return (
        f"[cpmobius] checkpoints: {plan.describe()}; up to {plan.checkpoints} more at once "
        f"({format_bytes(plan.needed_bytes)}); {format_bytes(plan.free_bytes)} free in {plan.folder}"
    )


def describe_optimizer_resume(cfg: DictConfig, policy_cfgs: dict[str, DictConfig]) -> Optional[str]:
    """The start-up line of a resume that restores no optimizer state, or None when every optimizer is restored
    (or nothing is resumed).

    A checkpoint saved weights-only (``actor.checkpoint.save_contents`` without ``optimizer``) has no
    ``optim_world_size_*`` shards; verl then loads the weights and the LR scheduler, and AdamW restarts with
    zero moments. The same happens when ``load_contents`` leaves the optimizer out.

    Raises:
        ConfigError: the checkpoint has no optimizer state but ``load_contents`` asks for it (verl would
            fail in a worker, after Ray and both engines are up).
    """
    from cpmobius.checkpoint import find_latest_checkpoint
    from cpmobius.config import ConfigError

    mode = cfg.trainer.resume_mode
    if mode == "resume_path":
        path: Optional[Path] = Path(str(cfg.trainer.resume_from_path)).expanduser()
    else:
        path = find_latest_checkpoint(cfg.trainer.default_local_dir) if mode == "auto" else None
    if path is None:
        return None
    restart: list[tuple[str, str]] = []
    asking: list[str] = []  # policies whose checkpoint has no optimizer state, though load_contents asks for it
    for name, policy_cfg in policy_cfgs.items():
        folder = path / name
        if not folder.is_dir():
            continue
        saved = any(folder.glob("optim_world_size_*"))
        loads = "optimizer" in set(policy_cfg.actor_rollout_ref.actor.checkpoint.load_contents)
        asking += [name] if loads and not saved else []
        if not saved or not loads:
            restart.append((name, "its checkpoint holds none" if not saved else "its load_contents leaves it out"))
    if asking:
        fixes = " ".join(f"{key}=[model,extra]" for key in policy_keys(cfg, asking, LOAD_CONTENTS))
        raise ConfigError(
            f"{path / asking[0]} holds no optimizer state (saved weights-only), but "
            f"{asking[0]}.verl.actor.checkpoint.load_contents asks for it: set {fixes} to resume with a fresh optimizer"
        )
    if not restart:
        return None
    reasons = "; ".join(f"{name}: {reason}" for name, reason in restart)
    return (
        f"[cpmobius] resuming {path} without optimizer state ({reasons}): AdamW restarts from zero moments "
        f"for the {' and the '.join(name for name, _ in restart)}"
    )
