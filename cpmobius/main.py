"""Entry point: ``python -m cpmobius.main [group=option ...] [key=value ...]`` (Hydra).

With no arguments it runs the embedded default: the toy world (`cpmobius.toy.world`) on this
machine's CPU through verl, a few steps, one table row per step; nothing is downloaded. Every
config value and every key the command line sets is validated before Ray or any worker starts
(a misspelt key is one line naming the nearest valid key, exit 2). ``--help`` is a short help;
Ctrl-C or SIGTERM stops the run with one line saying where to resume (exit 130 / 143).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, Callable, Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from cpmobius.config import CONFIG_DIR, CONFIG_NAME
from cpmobius.engine.config import apply_env_to_driver, build_policy_configs, check_kernel_packages
from cpmobius.interrupts import Terminated, raise_terminated, stop_after_interrupt
from cpmobius.run_log import Loggers, StepTable, make_tracking
from cpmobius.settings import load_settings


def prepare_models(cfg: DictConfig, settings: Any, coach_ready: Optional[Callable[[], None]] = None) -> None:
    """Build (and cache) the toy models when the config asks for them; real checkpoints are used as given.

    ``coach_ready`` is called once the Coach's weights are in place (for the toy world, possibly while
    the Player still pretrains; `cpmobius.toy.cache.materialize_toy_models`), else at the end.
    """
    if cfg.model.get("name") != "tiny":
        if coach_ready is not None:
            coach_ready()
        return
    from cpmobius.toy.cache import materialize_toy_models, toy_models_cached, write_coach_warmup_data
    from cpmobius.toy.world import PretrainSpec

    models = (cfg.model.coach_path, cfg.model.player_path, settings.coach.instruction)
    specs = {"tiny_spec": dict(cfg.model.tiny_spec), "pretrain_spec": PretrainSpec(**cfg.model.get("pretrain", {}))}
    if toy_models_cached(*models, **specs):
        print(f"[cpmobius] toy world: the tiny Coach and Player loaded from cache ({cfg.model.cache_dir})", flush=True)
    else:
        print(
            "[cpmobius] toy world: pretraining the tiny Coach and Player (once: about 3.5 minutes on 2 idle cores; "
            f"then cached in {cfg.model.cache_dir})",
            flush=True,
        )
    toy_warmup = cfg.model.get("toy_warmup")
    if toy_warmup is not None and settings.warmup.enabled:
        write_coach_warmup_data(
            toy_warmup.path, settings.coach.instruction, int(toy_warmup.count), int(toy_warmup.seed)
        )
    materialize_toy_models(*models, **specs, progress=True, coach_ready=coach_ready)


def check_model_folders(cfg: DictConfig) -> None:
    """A preset of a fetched model (``model.fetch``) whose folder is absent stops here, naming the command.

    Raises:
        ConfigError: one line with ``python -m cpmobius.models fetch <name>``.
    """
    name = cfg.model.get("fetch")
    if not name:
        return
    from pathlib import Path

    from cpmobius.config import ConfigError
    from cpmobius.models.registry import fetch_command

    for role in ("player", "coach"):
        path = str(cfg.model.get(f"{role}_path"))
        if not Path(path).expanduser().is_dir():
            raise ConfigError(
                f"model={cfg.model.name}: no model folder at {path} (model.{role}_path); "
                f"fetch it first: {fetch_command(name)}"
            )


def build_loop(cfg: DictConfig, logger: Any = None, settings: Any = None, configs: Any = None) -> Any:
    """Validate everything, prepare the models, start Ray and both policies; return the `CoachPlayerLoop`.

    Args:
        settings: the stage settings when the caller already loaded them (`load_settings`).
        configs: the policies' verl configs when the caller already built them (`build_policy_configs`).

    Raises:
        ConfigError: for any bad value, before Ray or a worker starts.
        RayStartError: Ray did not start (`cpmobius.engine.sharing.start_ray`).
    """
    from cpmobius.methods import check_settings, get_method  # the method's own checks (their modules import verl)
    from cpmobius.validation import load_ood_set, load_validation_set

    settings = check_settings(settings if settings is not None else load_settings(cfg))
    configs = configs if configs is not None else build_policy_configs(cfg)  # every value checked before anything runs
    check_model_folders(cfg)
    val_set = load_validation_set(settings.validation)  # a bad dataset fails here, before Ray
    ood_set = load_ood_set(settings.validation)
    # The Coach warm-up (a torchrun process group) starts as soon as the Coach's weights exist — for the
    # toy world while the Player still pretrains — and on CPU runs in the background while Ray and the
    # Player, which does not depend on it, start; the Coach starts from its output once it is done. On
    # GPUs it ends first: SFT on the GPUs the Player's engines are profiling would race for their memory
    # (vLLM aborts when free memory changes during its start-up profile).
    warmup = None

    def start_coach_warmup() -> None:
        nonlocal warmup
        if cfg.warmup.enabled:
            from cpmobius.warmup.sft import start_warmup

            warmup = start_warmup(cfg)

    try:
        prepare_models(cfg, settings, coach_ready=start_coach_warmup)
        if warmup is not None and cfg.backend.platform != "cpu":
            warmup.wait()
    except BaseException:
        if warmup is not None:
            warmup.stop()
        raise
    try:
        apply_env_to_driver(cfg)
        import cpmobius.engine.extensions  # noqa: F401  (platform and rollout registered in the driver too)
        from cpmobius.engine.policy import Policy
        from cpmobius.engine.quiet import quiet_driver
        from cpmobius.engine.sharing import EngineGuard, make_resource_pool, start_policies, start_ray

        quiet_driver()
        start_ray(cfg)  # keeps our SIGTERM handler (ray.init replaces it): SIGTERM stops the run as Ctrl-C does
        pool, guard = make_resource_pool(cfg), EngineGuard()
        player = Policy("player", configs["player"], pool, guard)
        if warmup is not None and warmup.running:
            player.start()  # the Player starts while the Coach warm-up runs (CPU; on a GPU the warm-up ended)
        if warmup is not None:
            from omegaconf import open_dict

            coach_start = warmup.wait()
            with open_dict(cfg):
                cfg.model.coach_path = str(coach_start)
            configs = build_policy_configs(cfg)  # the Coach now starts from the warm-up output
        has_coach = get_method(settings.method.name).has_coach  # TTRL, RENT: none (R-Zero's Challenger is the Coach)
        coach = Policy("coach", configs["coach"], pool, guard) if has_coach else None
        start_policies(*[p for p in (player, coach) if p is not None and p.worker_group is None])
    except BaseException:
        if warmup is not None:
            warmup.stop()  # Ctrl-C, SIGTERM or a failure while starting: no torchrun left behind
        raise
    from cpmobius.loop import CoachPlayerLoop
    from cpmobius.worlds import world_of

    world = world_of(settings.validation.dataset)  # the truth of every Coach problem, where the task defines it
    return CoachPlayerLoop(
        cfg,
        settings,
        coach,
        player,
        logger,
        world.solve if world else None,
        val_set=val_set,
        difficulty_of=world.difficulty if world else None,
        ood_set=ood_set,
    )


def hold_kernels(cfg: DictConfig) -> None:
    """On a CPU run (``backend.portable_kernels``) hold this process and every one it starts to the portable
    kernels (`cpmobius.cpu_kernels.PORTABLE_KERNELS`). torch and MKL read them when they first compute, so
    this comes before anything computes or imports verl; the line `run` prints shows which kernels it got."""
    if cfg.backend.get("portable_kernels", False):
        from cpmobius.cpu_kernels import hold_portable_kernels

        hold_portable_kernels()


def run(cfg: DictConfig, settings: Any = None) -> Any:
    """`build_loop`, then `fit`. Returns the final `LoopState` (None when there was nothing to do).

    ``settings`` is `load_settings(cfg)` when the caller has checked it already (built here otherwise).

    Raises:
        ConfigError: for any bad value, before Ray or a worker starts.
        GpuDriverError: the NVIDIA driver is too old for torch's CUDA build (`cpmobius.engine.gpu_driver`).
        DiskSpaceError: the checkpoint folder's disk cannot hold the run (`cpmobius.checkpoint_space`).
        CheckpointSaveError: a save failed; the previous checkpoint is intact.
        CheckpointCorruptError: no intact checkpoint to resume from (`cpmobius.checkpoint.check_resume`).
        SystemExit: 130 after Ctrl-C, 143 after SIGTERM (`stop_after_interrupt`), with one line.
    """
    from cpmobius.checkpoint import check_resume
    from cpmobius.checkpoint_space import check_checkpoint_space, describe_optimizer_resume
    from cpmobius.engine.gpu_driver import check_this_machine
    from cpmobius.methods import table_columns

    settings = settings if settings is not None else load_settings(cfg)  # and the method's checks in `build_loop`
    hold_kernels(cfg)  # for callers of `run` other than `main`
    done = check_resume(cfg)  # checked against its manifest; a broken one falls back to the newest intact one
    if done >= int(cfg.trainer.total_training_steps):
        print(
            f"[cpmobius] {cfg.trainer.default_local_dir} is already at step {done} of "
            f"trainer.total_training_steps={cfg.trainer.total_training_steps}: nothing to run. Raise "
            "trainer.total_training_steps to continue, or set trainer.default_local_dir for a new run.",
            flush=True,
        )
        return None
    check_this_machine(str(cfg.backend.platform))  # a too-old NVIDIA driver for torch's CUDA build: one line
    configs = build_policy_configs(cfg)
    check_kernel_packages(cfg, configs)  # Liger, which verl would import only inside a worker's model build
    print(check_checkpoint_space(cfg, configs), flush=True)  # before any model loads
    if (weights_only := describe_optimizer_resume(cfg, configs)) is not None:  # a weights-only checkpoint
        print(weights_only, flush=True)
    if str(cfg.backend.platform) == "cpu":  # the exact figures of a CPU run depend on these kernels
        from cpmobius.cpu_kernels import cpu_kernels

        print(f"[cpmobius] CPU kernels: {cpu_kernels()}", flush=True)
    loop, state = None, None
    try:
        loop = build_loop(cfg, settings=settings, configs=configs)
        validation = loop.settings.validation
        sampled = validation.metric != "expected" and not validation.greedy and validation.samples_per_problem > 1
        expected, ood = validation.metric == "expected", validation.ood_dataset is not None
        columns = table_columns(loop.settings.method.name, expected, loop.difficulty_of is not None, sampled, ood)
        loop.logger = Loggers(make_tracking(cfg), StepTable(columns))
        state = loop.fit()
        kept = "checkpoints and problem archive" if loop.method.writes_problem_archive else "checkpoints"
        print(f"[cpmobius] done: {state.step} steps; {kept} in {cfg.trainer.default_local_dir}", flush=True)
        if "file" in cfg.trainer.logger:
            from cpmobius.plots import plot_training_dynamics, run_title

            plot = plot_training_dynamics(cfg.trainer.default_local_dir, title=run_title(cfg))
            print(f"[cpmobius] training dynamics: {plot}", flush=True)
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM through `Terminated`
        stop_after_interrupt(cfg, loop, interrupt)
    return state


# ---------------------------------------------------------------------------- entry point


@hydra.main(config_path=str(CONFIG_DIR), config_name=CONFIG_NAME, version_base=None)
def main(cfg: DictConfig) -> None:
    """Hydra's task: `run`. Each of these is one line: a `ConfigError`, too small a disk for the run's
    checkpoints (`DiskSpaceError`) or no intact checkpoint to resume (`CheckpointCorruptError`), exit 2;
    an NVIDIA driver too old for torch's CUDA build, Ray not starting, a failed checkpoint save or a full disk
    while writing metrics or the problem archive, exit 1."""
    from omegaconf.errors import OmegaConfBaseException

    from cpmobius.config import ConfigError
    from cpmobius.config.unread_keys import check_unread_keys

    _restore_hydra_full_error()
    try:
        try:
            check_unread_keys(_task_overrides(), cfg)
            settings = load_settings(cfg)  # the method's values, checked before verl, Ray or torch is imported
        except OmegaConfBaseException as error:  # an interpolation that does not resolve
            raise ConfigError.from_omegaconf(error) from error
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        sys.exit(2)
    hold_kernels(cfg)  # before verl's import computes its first tensor
    from cpmobius.methods import check_method_overrides

    try:
        check_method_overrides(_task_overrides(), settings)
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        sys.exit(2)
    from cpmobius.checkpoint_failures import CheckpointSaveError, describe_full_disk, resume_command
    from cpmobius.checkpoint_manifest import CheckpointCorruptError
    from cpmobius.checkpoint_space import DiskSpaceError
    from cpmobius.engine.gpu_driver import GpuDriverError
    from cpmobius.engine.sharing import RayStartError

    try:
        run(cfg, settings)
    except (ConfigError, DiskSpaceError, CheckpointCorruptError) as error:  # nothing has started
        print(f"{'config error' if isinstance(error, ConfigError) else 'error'}: {error}", file=sys.stderr)
        sys.exit(2)
    except (RayStartError, CheckpointSaveError, GpuDriverError, OSError) as error:
        root, resume = cfg.trainer.default_local_dir, resume_command(cfg)
        message = describe_full_disk(error, root, resume) if isinstance(error, OSError) else str(error)
        if message is None:  # an OSError other than a full disk
            raise
        print(f"error: {message}", file=sys.stderr)
        import ray

        ray.shutdown()  # a no-op when Ray is not up
        sys.exit(1)


def print_validated_config(argv: list[str]) -> int:
    """``--cfg job`` (Hydra's flag): compose, validate every key, print the resolved config; no Ray.

    Hydra's own ``--cfg`` prints before any of our checks run, so it is handled here first.
    Returns the process exit code (2 with a message naming the key on a bad value or unknown key).
    """
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from cpmobius.config import ConfigError, compose_config
    from cpmobius.config.known_keys import check_override_keys, check_section_values, describe_hydra_error
    from cpmobius.config.unread_keys import check_unread_keys
    from cpmobius.methods import check_method_overrides, check_settings
    from cpmobius.usage import overrides_from_argv

    overrides = overrides_from_argv(argv)
    try:
        check_section_values(overrides)
        try:
            cfg = compose_config(overrides)
        except HydraException as error:
            check_override_keys(overrides)  # names an unknown key and the nearest valid one
            raise ConfigError(describe_hydra_error(error, overrides)) from error
        check_override_keys(overrides)
        try:
            check_unread_keys(overrides, cfg)
            settings = check_settings(load_settings(cfg))
            check_method_overrides(overrides, settings)
            build_policy_configs(cfg)
            text = OmegaConf.to_yaml(cfg, resolve=True)
        except OmegaConfBaseException as error:  # an interpolation that does not resolve
            raise ConfigError.from_omegaconf(error) from error
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 0


def _task_overrides() -> list[str]:
    """The command line's overrides as typed, from Hydra's record of the task (``seed=${oc.env:X}`` stays a string:
    read through OmegaConf, the record's own strings would be resolved as interpolations)."""
    from omegaconf import OmegaConf

    return list(OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False))


def _restore_hydra_full_error() -> None:
    """Undo `cli`'s HYDRA_FULL_ERROR=1 once composition succeeded: the run (and its Ray workers)
    see the user's own setting, and Hydra reports the task's errors as usual."""
    previous = os.environ.pop("_CPMOBIUS_HYDRA_FULL_ERROR", None)
    if previous is None:
        os.environ.pop("HYDRA_FULL_ERROR", None)
    else:
        os.environ["HYDRA_FULL_ERROR"] = previous


def cli(argv: Optional[list[str]] = None) -> int:
    """``python -m cpmobius.main``: short help, ``--cfg job``, or a run through Hydra.

    Hydra's composition errors (an unknown key without ``+``, a missing group option) come back here
    instead of Hydra's multi-line report, and become one line naming the key. Ctrl-C or SIGTERM at
    any point is one line (`stop_after_interrupt` once the run started).

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit code: 0, 2 (config error), 130 (Ctrl-C) or 143 (SIGTERM).
    """
    if argv is not None:
        sys.argv[1:] = argv  # Hydra reads sys.argv
    argv = sys.argv[1:]
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, raise_terminated)  # SIGTERM stops the run as Ctrl-C does
    try:
        return _dispatch(argv)
    except KeyboardInterrupt as interrupt:  # before the run started (`run` handles its own)
        print("[cpmobius] interrupted while reading the config; nothing ran", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def _dispatch(argv: list[str]) -> int:
    from hydra.errors import HydraException

    from cpmobius.config import ConfigError
    from cpmobius.config.known_keys import check_override_keys, check_section_values, describe_hydra_error
    from cpmobius.engine.run_folders import check_run_folders
    from cpmobius.usage import overrides_from_argv, short_help

    if "--help" in argv or "-h" in argv:
        print(short_help(overrides_from_argv(argv)))
        return 0
    if any(arg == "-c" or arg == "--cfg" or arg.startswith("--cfg=") for arg in argv):
        return print_validated_config(argv)
    overrides = overrides_from_argv(argv)
    if any(line.startswith("+") for line in overrides):  # without "+", Hydra itself rejects an unknown key
        try:
            check_override_keys(overrides)
        except ConfigError as error:
            print(f"config error: {error}", file=sys.stderr)
            return 2
    try:
        check_section_values(overrides)  # experiment=null stops Hydra itself with a ValueError
        check_run_folders(overrides)  # Hydra makes its log folder in the run folder before any check of ours
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    if "HYDRA_FULL_ERROR" in os.environ:
        os.environ["_CPMOBIUS_HYDRA_FULL_ERROR"] = os.environ["HYDRA_FULL_ERROR"]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises composition errors instead of reporting them
    try:
        main()
    except HydraException as error:  # raised before the task ran: the command line does not compose
        _restore_hydra_full_error()
        try:
            check_override_keys(overrides)
            message = describe_hydra_error(error, overrides)
        except ConfigError as named:
            message = str(named)
        print(f"config error: {message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
