"""The run's config: Hydra composition of ``configs/`` (with verl's own tree), the run's own keys checked, the
command line's keys checked, and the typed reading of the method's sections. No verl, torch or Ray is imported
here (a config error comes at once), and nothing of the method: the stages' settings classes read their sections
through `cpmobius.config.sections`, the engine builds each policy's verl config from the composed one
(`cpmobius.engine.config`).

Modules: this ``__init__`` (`compose_config`, `ConfigError`, `validate_run_config`); `sections` (a group's keys as
its settings class, each key's default); `known_keys` (command-line keys against the composed tree, the nearest
valid key for a misspelt one); `run_name` (``${run_name:...}``, a run's default experiment name); `value_ranges`
(verl's numeric keys and their ranges).

What it may import of cpmobius: itself and `cpmobius.error_text` (a leaf).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Optional

from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from cpmobius.config.run_name import PresetMethodError, register_run_name
from cpmobius.config.value_ranges import run_value_problem

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
CONFIG_NAME = "cpmobius"
# The main config as written (defaults list and method defaults), read once: `config_sections.default` takes the
# method keys' defaults from it and `cpmobius.usage` the config groups' default options.
MAIN_CONFIG = OmegaConf.load(CONFIG_DIR / f"{CONFIG_NAME}.yaml")
# trainer.logger backends every verl 0.9.1 `Tracking` knows (tests/test_cli_help.py checks them against it).
COMMON_LOGGERS = frozenset({"console", "file", "tensorboard", "wandb"})
# verl 0.9.1's platforms (verl.plugin.platform: nvidia, amd, huawei) and this project's CPU one
# (cpmobius.engine.cpu_platform); VERL_PLATFORM in every worker, where another name failed only there.
PLATFORMS = ("cpu", "nvidia", "amd", "huawei")


class ConfigError(ValueError):
    """A config value is wrong; the message names the key."""

    @classmethod
    def from_omegaconf(cls, error: Exception) -> "ConfigError":
        """OmegaConf's error (an interpolation that does not resolve: ``seed=${oc.env:UNSET}``, a missing key) as
        one line naming its key, instead of its multi-line traceback."""
        from cpmobius.error_text import first_line

        key = getattr(error, "full_key", None)
        return cls(f"{key}: {first_line(error)}" if key else first_line(error))


def verl_config_dir() -> Optional[Path]:
    """The installed verl's ``trainer/config`` folder, found without importing verl (None: not installed)."""
    spec = importlib.util.find_spec("verl")
    return Path(spec.origin).parent / "trainer" / "config" if spec is not None and spec.origin else None


class VerlConfigSearchPath(SearchPathPlugin):
    """Puts verl's config folder on Hydra's search path as a file path.

    Hydra's ``pkg://verl.trainer.config`` would import the package, and ``import verl`` loads torch,
    Ray and verl's trainer (5-40 s): every ``--help``, ``--cfg job`` and config error waited for it.
    The YAML files are the same either way (the composed config is identical).
    """

    def manipulate_search_path(self, search_path: Any) -> None:
        folder = verl_config_dir()
        if folder is not None:
            search_path.append(provider="verl", path=f"file://{folder}")


Plugins.instance().register(VerlConfigSearchPath)  # for compose_config and the driver's @hydra.main alike
register_run_name()  # trainer.experiment_name's ${run_name:...}, for the same two


def compose_config(overrides: Optional[list[str]] = None, config_name: str = CONFIG_NAME) -> DictConfig:
    """Compose the main config with Hydra's compose API (tests, notebooks, the driver's checks).

    Args:
        overrides: Hydra overrides, e.g. ``["backend=cpu", "player.verl.actor.optim.lr=1e-5"]``.
        config_name: primary config in `CONFIG_DIR`.

    Raises:
        hydra.errors.ConfigCompositionException: for an unknown group option or key.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name=config_name, overrides=list(overrides or []))


def _require_int(cfg: DictConfig, key: str, low: int, allowed: tuple[int, ...] = (), what: str = "") -> None:
    """``key`` (``section.leaf``) must be an int >= ``low`` or one of ``allowed``; an absent key passes."""
    section, leaf = key.split(".")
    if section not in cfg or leaf not in cfg[section]:
        return
    value = cfg[section][leaf]
    if isinstance(value, bool) or not isinstance(value, int) or (value < low and value not in allowed):
        raise ConfigError(f"{key}: {what or f'must be an integer >= {low}'}, got {value!r}")


def validate_run_config(cfg: DictConfig) -> None:
    """Check the run's own ``trainer`` and ``data`` keys, which verl's dataclasses do not cover.

    Each of these used to fail (``int("abc")``, an unknown logger) or misbehave (0 steps run, exit
    0) only inside ``fit``, after Ray and both policies had started. A section absent from ``cfg``
    is skipped (tests build partial configs).

    Raises:
        ConfigError: naming the first bad key.
    """
    if "trainer" in cfg:
        trainer = cfg.trainer
        try:
            for key in ("trainer.experiment_name", "trainer.default_local_dir"):  # `run_name` resolves the name
                value = OmegaConf.select(cfg, key, default="absent")
                if value is None or (isinstance(value, str) and not value.strip()):  # a run folder named "None"
                    raise ConfigError(f"{key}: must name the run (a folder name), got {value!r}")
        except InterpolationResolutionError as error:
            cause: BaseException | None = error  # OmegaConf chains the resolver's error as a context, not a cause
            while cause is not None and not isinstance(cause, PresetMethodError):
                cause = cause.__cause__ or cause.__context__
            if cause is None:
                raise
            raise ConfigError(str(cause)) from error
        # CPMöbius: the loop has no dataloader to derive a step count from (verl's null), and runs
        # exactly this many steps; 0 or fewer would run none and exit 0 (a resume that silently skips work).
        _require_int(cfg, "trainer.total_training_steps", 1, what="must be a whole number of steps >= 1")
        # verl's convention: a positive k saves every k steps, -1 (its default) or 0 never; the loop
        # always saves the last step.
        _require_int(
            cfg,
            "trainer.save_freq",
            1,
            allowed=(-1, 0),
            what="must be >= 1 (every k steps), or -1 or 0 (the last step only)",
        )
        for key in ("trainer.nnodes", "trainer.n_gpus_per_node"):
            _require_int(cfg, key, 1)
        if trainer.get("max_actor_ckpt_to_keep") is not None:
            _require_int(cfg, "trainer.max_actor_ckpt_to_keep", 1, what="must be >= 1 or null (keep all)")
        if "logger" in trainer:
            logger = trainer.logger
            if not OmegaConf.is_list(logger):
                raise ConfigError(f"trainer.logger: must be a list, e.g. trainer.logger=[console,file], got {logger!r}")
            others = [backend for backend in logger if backend not in COMMON_LOGGERS]
            if others:  # verl's list of backends needs `import verl` (seconds): only for these
                from verl.utils.tracking import Tracking

                for backend in others:
                    if backend not in Tracking.supported_backend and backend != "tracking":  # verl's old wandb alias
                        raise ConfigError(
                            f"trainer.logger: unknown backend {backend!r} (known: {Tracking.supported_backend})"
                        )
        if "resume_mode" in trainer:
            modes = ("auto", "disable", "resume_path")
            if trainer.resume_mode not in modes:
                raise ConfigError(f"trainer.resume_mode: must be one of {modes}, got {trainer.resume_mode!r}")
            if trainer.resume_mode == "resume_path" and not trainer.get("resume_from_path"):
                raise ConfigError("trainer.resume_from_path: needed with trainer.resume_mode=resume_path")
    platform = OmegaConf.select(cfg, "backend.platform", default=None)
    if platform is not None and str(platform) not in PLATFORMS:  # verl took any name, and failed in a worker
        raise ConfigError(
            f"backend.platform: one of {', '.join(PLATFORMS)} (the backend group sets it: backend=cpu|cuda_hf|vllm), "
            f"got {platform!r}"
        )
    if "data" in cfg:
        for key in ("data.max_prompt_length", "data.max_response_length"):
            _require_int(cfg, key, 1, what="must be a positive number of tokens")
    problem = run_value_problem(cfg)  # the seed, the KL coefficient of the reward
    if problem:
        raise ConfigError(problem)
