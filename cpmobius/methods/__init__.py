"""The training methods: CPMöbius and the baselines it is compared with, one module each, found by name.

A method is a `Method` subclass registered under its ``method.name`` (`register`); the loop asks it for what
differs between methods and runs the same `step()` for all of them (`cpmobius.loop.CoachPlayerLoop.step`):

    problem source (`Method.problem_source`) → Player update (rewards: `Method.player_scores`) → validation
    → the method's Coach update (`Method.update_coach`) → rollback

- `coach_player`: CPMöbius, the Coach writes problems, the difficulty filter keeps them, REINFORCE with Δt.
- `ttrl`, `rent`: the Player alone on a fixed pool of questions (`fixed_pool`), TTRL's vote or RENT's entropy.
- `rzero`: R-Zero's Challenger and Solver phases.

A new method is one module here (its class, registered), one ``configs/method/<name>.yaml`` and one test; no code
outside this package compares a method's name. This package may import anything in cpmobius except the loop and
the driver (`cpmobius.loop`, `cpmobius.main`), which import it.
"""

from __future__ import annotations

import importlib
import pkgutil

from cpmobius.config import ConfigError
from cpmobius.methods.base import Method, register, registered
from cpmobius.run_log import with_validation_columns
from cpmobius.settings import Settings

_SHARED = {"base", "fixed_pool"}  # modules of this package that define no method


def _load_all() -> None:
    """Import every method module of this package once, so each registers itself."""
    for module in pkgutil.iter_modules(__path__):
        if module.name not in _SHARED:
            importlib.import_module(f"{__name__}.{module.name}")


def method_names() -> tuple[str, ...]:
    """The registered methods' names, sorted (the values ``method.name`` accepts)."""
    _load_all()
    return tuple(sorted(registered()))


def get_method(name: str) -> type[Method]:
    """The method registered as ``name``.

    Raises:
        KeyError: no method has that name (the message lists those that do).
    """
    _load_all()
    methods = registered()
    if name not in methods:
        raise KeyError(f"no method named {name!r}; the methods are {sorted(methods)}")
    return methods[name]


def table_columns(
    method: str, greedy_beside: bool = False, levels: bool = False, snr: bool = False, ood: bool = False
) -> tuple:
    """The step table's ``(metric key, format, label)`` columns for a run of ``method``.

    A CPMöbius run's table gains the greedy pass's accuracy beside ``val_acc`` when ``greedy_beside``
    (``validation.metric=expected``: ``val_acc`` is then the expected accuracy) and the mean level of the Coach's
    well-formed problems after ``valid`` when ``levels`` (the toy world, where a problem's level is known)
    (`Method.table_columns`). With ``snr`` and ``ood``, every method's table shows the validation extras
    (`cpmobius.run_log.with_validation_columns`).
    """
    return with_validation_columns(get_method(method).table_columns(greedy_beside, levels), snr, ood)


def check_settings(settings: Settings) -> Settings:
    """The checks across config sections that depend on the method (after `cpmobius.settings.load_settings`,
    which checks each section and that ``method.name`` has a YAML): the method's own keys (`Method.read_settings`)
    and checks (`Method.check`), no warm-up
    for a method without a Coach, and the ``coach.delta_t_source`` ablations only where the Coach's reward
    carries Δt. Returns ``settings``.

    Raises:
        ConfigError: naming the key to change.
    """
    method = get_method(settings.method.name)
    method.read_settings(settings.method.options)
    method.check(settings)
    if not method.has_coach and settings.warmup.enabled:
        raise ConfigError(
            f"warmup.enabled: method={method.name} has no Coach to warm up: set warmup.enabled=false "
            "(configs/method/ does)"
        )
    source, update = settings.coach.delta_t_source, settings.coach.update
    if source != "measured" and not (method.coach_reward_has_delta_t and update):
        raise ConfigError(
            f"coach.delta_t_source: {source} replaces the Δt of the CPMöbius Coach's reward: it needs method=cpmobius "
            f"and coach.update=true, got method={method.name} coach.update={update}"
        )
    return settings


def check_method_overrides(overrides: list[str], settings: Settings) -> None:
    """Refuse an override of a key the run's method never reads (`Method.unread`): ``method=ttrl filter.quota=4``
    would run as if the key were not there.

    Raises:
        ConfigError: naming the key, the method and why.
    """
    from cpmobius.config.unread_keys import set_keys

    method = get_method(settings.method.name)
    for key, _ in set_keys(overrides):
        for prefix, why in method.unread.items():
            if key == prefix or key.startswith(f"{prefix}."):
                raise ConfigError(f"{key}: not read by method={method.name}: {why}")


__all__ = [
    "Method",
    "check_method_overrides",
    "check_settings",
    "get_method",
    "method_names",
    "register",
    "table_columns",
]
