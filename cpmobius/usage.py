"""The command line of ``python -m cpmobius.main``: its short ``--help`` and which arguments are overrides.

Hydra's own ``--help`` prints the whole composed config (over a thousand lines of verl's tree);
`short_help` says what the command does, the presets, the keys people change most (with the values
this command line gives them) and where the rest is: ``--cfg job`` prints every key, resolved.
"""

from __future__ import annotations

import textwrap
from typing import Any, Optional

from omegaconf import OmegaConf

from cpmobius.config import MAIN_CONFIG

# The keys people change most: (key, what it is).
KNOBS = (
    ("trainer.total_training_steps", "Coach-Player steps"),
    ("trainer.default_local_dir", "the run's folder: the same one resumes, a new one starts"),
    ("trainer.logger", "any of console, file (metrics.jsonl), tensorboard, wandb"),
    ("trainer.n_gpus_per_node", "devices per node (trainer.nnodes: nodes)"),
    ("model.player_path", "the Player's checkpoint, a folder or a hub id"),
    ("model.coach_path", "the Coach's"),
    ("filter.quota", "m: problems kept per step"),
    ("player.n", "n: rollouts per problem (the GRPO group)"),
    ("filter.band_low", "keep a problem when band_low <= pass rate <= band_high"),
    ("filter.band_high", ""),
    ("actor_rollout_ref.actor.optim.lr", "both policies (one: coach.verl.actor.optim.lr)"),
    ("validation.dataset", "toy, amc, minerva_math, olympiadbench or a .jsonl file"),
    ("warmup.enabled", "Coach warm-up (ablations: coach.update, filter.enabled)"),
)
# Hydra's flags that take a value (``--cfg job``): that value is not an override.
FLAGS_WITH_VALUE = {
    "-c",
    "--cfg",
    "-p",
    "--package",
    "-cp",
    "--config-path",
    "-cn",
    "--config-name",
    "-cd",
    "--config-dir",
    "--experimental-rerun",
    "--info",
    "-i",
}


def overrides_from_argv(argv: list[str]) -> list[str]:
    """The overrides of a command line (``key=value``, ``+key=value``, ``group=option``), without Hydra's
    flags and their values (an override never starts with ``-``)."""
    overrides, skip = [], False
    for arg in argv:  # `--cfg=job` is one argument: a flag, no value after it
        if skip and "=" not in arg:  # the flag's value (`--info` takes one optionally)
            skip = False
            continue
        skip = arg in FLAGS_WITH_VALUE
        if not arg.startswith("-"):
            overrides.append(arg)
    return overrides


def default_options() -> dict[str, Optional[str]]:
    """Each config group's default option, from the main config's defaults list (``{"backend": "cpu", ...}``)."""
    defaults = OmegaConf.to_container(MAIN_CONFIG.defaults)
    return {key: value for entry in defaults if isinstance(entry, dict) for key, value in entry.items()}


def _compose_quietly(overrides: list[str]) -> Optional[Any]:
    from hydra.errors import HydraException

    from cpmobius.config import compose_config

    try:
        return compose_config(overrides)
    except HydraException:
        return None


def _value(cfg: Any, key: str) -> str:
    if cfg is None:
        return ""
    value = OmegaConf.select(cfg, key, default=None, throw_on_missing=False)
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return str(value)


def short_help(overrides: Optional[list[str]] = None) -> str:
    """The text of ``python -m cpmobius.main --help`` (about 40 lines), values as ``overrides`` give them."""
    from cpmobius.config.known_keys import config_groups

    cfg = _compose_quietly(list(overrides or []))
    defaults = default_options()
    lines = [
        "usage: python -m cpmobius.main [group=option ...] [key=value ...] [--cfg job] [--hydra-help]",
        "",
        "CPMöbius, data-free RL for math reasoning on verl: a Coach model writes problems, a Player model",
        "solves them; problems it solves sometimes but not always train it (GRPO), and its validation gain",
        "Δt rewards the Coach. With no arguments: the toy world on this CPU (tiny models, 15 steps; the first",
        "run pretrains them for about 3.5 minutes on 2 cores; nothing downloaded).",
        "",
        "Presets (configs/<group>/<option>.yaml; * = default):",
    ]
    groups = config_groups()
    for group in sorted(groups, key=lambda g: list(defaults).index(g) if g in defaults else len(defaults)):
        marked = [f"{option}*" if option == defaults.get(group) else option for option in groups[group]]
        text = ", ".join(marked) + (" (none by default)" if defaults.get(group, "") is None else "")
        lines += textwrap.wrap(text, 100, initial_indent=f"  {group + '=':<12}", subsequent_indent=" " * 14)
    lines += ["", "Keys people change most" + (" (values for this command line):" if cfg is not None else ":")]
    for key, meaning in (*KNOBS, ("++player.verl.<verl key>", "any verl actor_rollout_ref key, one policy")):
        setting = key + ("=" + _value(cfg, key) if not key.startswith("+") else "=...")
        if len(setting) > 44 and meaning:
            lines += [f"  {setting}", f"  {'':<44} {meaning}"]
        else:
            lines.append(f"  {setting:<44} {meaning}".rstrip())
    lines += [
        "Any other key: key=value (see --cfg job). A misspelt key is an error naming the nearest valid one.",
        "",
        "  --cfg job       print the whole config, resolved and validated (every key); nothing runs",
        "  --hydra-help    Hydra's own flags (multirun -m, --info, ...)",
        "",
        "Outputs go to trainer.default_local_dir ("
        + (_value(cfg, "trainer.default_local_dir") or "outputs/...")
        + "):",
        "checkpoints global_step_N/, metrics.jsonl, problems/step_N.jsonl, training_dynamics.png, hydra/.",
        "The same command again resumes there. Ctrl-C (exit 130) or SIGTERM (exit 143) stops cleanly at any",
        "point; what is on disk stays whole, and the next run resumes from the last checkpoint.",
    ]
    return "\n".join(lines)
