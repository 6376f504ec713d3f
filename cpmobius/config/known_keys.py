"""Command-line keys checked against the config tree: a misspelt key is an error, never ignored.

Hydra rejects an unknown key only when it is set without ``+``, and then with a hint to add it with
``+``, after which the key is composed in and silently read by nothing. `check_override_keys` checks
every key a command line sets against the config that the same group choices compose to (the
reference), ``+`` or not, and names the nearest valid key (difflib). The two policy deltas
``coach.verl`` and ``player.verl`` are shaped like ``actor_rollout_ref``: a key under them is valid
when verl's ``actor_rollout_ref`` tree has it (``++player.verl.rollout.top_k=5`` is the documented way
to set any verl key for one policy). A verl node with a ``_target_`` dataclass also knows that
dataclass's fields (verl reads some its YAML omits). Free-form nodes (None, ``{}``, ``*kwargs``,
``override_config``, ``custom``) accept any key below them.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from typing import Any, Callable, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from cpmobius.config import CONFIG_DIR, ConfigError
from cpmobius.error_text import first_line

POLICY_DELTAS = ("coach.verl", "player.verl")
POLICY_BASE = "actor_rollout_ref"
# Nodes whose keys are the user's own (verl passes them through to a library or a custom class).
FREE_FORM_NAMES = ("override_config", "custom", "sync")
FREE_FORM_SUFFIXES = ("kwargs", "kw_args")


# Groups whose option follows another group's choice in configs/cpmobius.yaml's defaults list (a method's own keys,
# `method_defaults: ${method}`): not a choice of their own, so never offered.
FOLLOWING_GROUPS = ("method_defaults",)


def config_groups() -> dict[str, list[str]]:
    """The project's config groups a command line chooses and their options, read from `CONFIG_DIR`
    (``{"backend": ["cpu", ...]}``; `FOLLOWING_GROUPS` left out)."""
    return {
        group.name: sorted(path.stem for path in group.glob("*.yaml"))
        for group in sorted(CONFIG_DIR.iterdir())
        if group.is_dir() and group.name not in FOLLOWING_GROUPS
    }


def parse_overrides(overrides: list[str]) -> list[Any]:
    """Hydra's parsed overrides (`hydra.core.override_parser.types.Override`).

    Raises:
        ConfigError: for an override Hydra cannot parse, with the override and Hydra's first line.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    parsed = []
    for line in overrides:
        try:
            parsed += parser.parse_overrides([line])
        except OverrideParseException as error:
            raise ConfigError(f"{line}: not a valid override ({first_line(error)})") from error
    return parsed


def is_group_override(override: Any) -> bool:
    """Whether an override picks a config group option (``backend=cpu``), or is Hydra's own (``hydra.run.dir``)."""
    key = override.key_or_group
    if key == "hydra" or key.startswith(("hydra.", "hydra/")) or "/" in key or override.package is not None:
        return True
    return "." not in key and (key in config_groups() or _is_verl_group(key))


def _is_verl_group(name: str) -> bool:
    from importlib.resources import files

    try:
        return files("verl.trainer.config").joinpath(name).is_dir()
    except (ModuleNotFoundError, FileNotFoundError):
        return False


def _is_free_form(name: str, node: Any) -> bool:
    if node is None or (isinstance(node, DictConfig) and (node._is_none() or len(node) == 0)):
        return True
    return name in FREE_FORM_NAMES or name.endswith(FREE_FORM_SUFFIXES)


def _child(node: Any, name: str) -> tuple[bool, Any]:
    """(found, child) of a DictConfig / ListConfig node, without resolving interpolations (a
    mandatory ``???`` value counts as present)."""
    if isinstance(node, DictConfig):
        child = node._get_node(name) if name in node.keys() else None
        if child is None:
            return False, None
        return True, (child if isinstance(child, (DictConfig, ListConfig)) else child._value())
    if isinstance(node, ListConfig) and name.lstrip("-").isdigit():
        return True, None  # an item of a list: its value is the user's
    return False, None


@functools.lru_cache(maxsize=None)
def _target_fields(target: str) -> tuple[str, ...]:
    """The fields of the dataclass a verl node's ``_target_`` names (verl reads fields its YAML omits,
    e.g. ``fsdp_config.mixed_precision``, ``rollout.repetition_penalty``); () when it is not one."""
    try:
        from hydra.utils import get_class

        cls = get_class(target)
    except Exception:  # not importable here (an optional backend): only the YAML's keys count
        return ()
    return (
        tuple(f.name for f in dataclasses.fields(cls) if f.name != "_target_") if dataclasses.is_dataclass(cls) else ()
    )


def _known_names(node: DictConfig) -> list[str]:
    names = [str(k) for k in node.keys()]
    target = node._get_node("_target_") if "_target_" in node.keys() else None
    if target is not None and isinstance(target._value(), str):
        names += [f for f in _target_fields(target._value()) if f not in names]
    return names


def _nearest(name: str, candidates: list[str]) -> Optional[str]:
    match = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return match[0] if match else None


def find_unknown_key(reference: DictConfig, key: str, typed: Optional[str] = None) -> Optional[str]:
    """Why ``key`` (a dotted path) is not a key of ``reference``, or None when it is.

    A key under ``coach.verl`` / ``player.verl`` is looked up there first, then under
    ``actor_rollout_ref``. Returns a one-line reason naming the key and the nearest valid one; with ``typed``
    (the value as typed on the command line) the nearest one is the whole override that works
    (`override_as_typed`: ``did you mean filter.quota=4?``).
    """
    parts = key.split(".")
    root, prefix = reference, []
    for delta in POLICY_DELTAS:
        if key.startswith(delta + ".") and _walk(reference, parts) is not None:
            root, prefix, parts = reference[POLICY_BASE], delta.split("."), parts[len(delta.split(".")) :]
    failure = _walk(root, parts)
    if failure is None:
        return None
    depth, siblings = failure
    path = prefix + parts
    near = _nearest(path[len(prefix) + depth], siblings)
    if typed is not None and near is not None:
        fixed = ".".join(path[: len(prefix) + depth] + [near] + path[len(prefix) + depth + 1 :])
        return f"{key}: unknown key (did you mean {override_as_typed(reference, fixed, typed)}?)"
    return unknown_key_message(key, path, len(prefix) + depth, siblings)


def unknown_key_message(key: str, path: list[str], depth: int, siblings: list[str]) -> str:
    """The one-line error for a config key whose part ``path[depth]`` does not exist: the nearest of
    ``siblings`` (the names there are) as a full key, else the names there are. Used for command-line
    overrides (`check_override_keys`) and for the method sections of a composed config
    (`cpmobius.config.sections.read_section`), so a misspelt key reads the same from both.

    Example: ``unknown_key_message("filtr.quota", ["filtr", "quota"], 0, ["filter", "coach"])`` →
    ``"filtr.quota: unknown key (did you mean filter.quota?)"``.
    """
    near = _nearest(path[depth], siblings)
    if near is not None:
        return f"{key}: unknown key (did you mean {'.'.join(path[:depth] + [near] + path[depth + 1 :])}?)"
    where = ".".join(path[:depth]) or "the top level"
    shown = ", ".join(sorted(siblings)[:12]) + (", ..." if len(siblings) > 12 else "")
    return f"{key}: unknown key ({where} has: {shown})"


def _walk(root: Any, parts: list[str]) -> Optional[tuple[int, list[str]]]:
    """None when ``parts`` is a path of ``root``; else (index of the first unknown part, its siblings)."""
    node = root
    for depth, name in enumerate(parts):
        found, child = _child(node, name)
        if not found:
            known = _known_names(node) if isinstance(node, DictConfig) else []
            return None if name in known else (depth, known)  # a dataclass field the YAML omits: its value is free
        if isinstance(child, ListConfig) or _is_free_form(name, child):
            return None
        if not isinstance(child, DictConfig) and depth < len(parts) - 1:
            return depth + 1, []  # a key below a plain value
        node = child
    return None


def _leaf_keys(key: str, value: Any) -> list[str]:
    """``key`` itself, and for a dict value every dotted path below it (``a={b: {c: 1}}`` → a, a.b, a.b.c)."""
    keys = [key]
    if isinstance(value, dict):
        for name, sub in value.items():
            keys += _leaf_keys(f"{key}.{name}", sub)
    return keys


def check_override_keys(overrides: list[str], compose: Optional[Callable[[list[str]], DictConfig]] = None) -> None:
    """Check that every key the overrides set exists in the config their group choices compose to.

    Args:
        overrides: Hydra overrides as typed (``["+filtr.quota=4", "backend=cpu"]``).
        compose: ``overrides -> DictConfig`` (default `cpmobius.config.compose_config`).

    Raises:
        ConfigError: one line naming the first unknown key and the nearest valid one, an override
            Hydra cannot parse, or a config group option that does not exist.
    """
    from cpmobius.config import compose_config

    compose = compose or compose_config
    parsed = parse_overrides(overrides)
    groups = [o for o in parsed if is_group_override(o)]
    keys = [o for o in parsed if not is_group_override(o) and not o.is_delete()]
    if not keys:
        return
    reference = compose_reference([o.input_line for o in groups], compose)
    for override in keys:
        value = override.value() if not override.is_sweep_override() else None
        for key in _leaf_keys(override.key_or_group, value):
            typed = override.input_line.split("=", 1)[1] if key == override.key_or_group else None
            reason = find_unknown_key(reference, key, typed)
            if reason is not None:
                raise ConfigError(reason)


def check_section_values(overrides: list[str]) -> None:
    """Refuse a config group chosen as ``null`` and a section of the config given a plain value.

    ``experiment=null`` stopped Hydra with a ValueError traceback, and ``trainer=null`` or
    ``coach.verl.rollout=null`` composed, then failed as a TypeError or AttributeError deep in a check.

    Raises:
        ConfigError: naming the key, with the options of a group or the way to set a section's keys.
    """
    from cpmobius.config import MAIN_CONFIG

    groups = config_groups()
    for override in parse_overrides(overrides):
        if override.is_delete() or override.is_sweep_override():
            continue
        key, value = override.key_or_group, override.value()
        if key in groups and value is None:
            options = ", ".join(groups[key])
            raise ConfigError(
                f"{key}: null is not an option; leave {key}= out for the default, or pick one of {options}"
            )
        if is_group_override(override) or isinstance(value, dict):
            continue
        node = OmegaConf.select(MAIN_CONFIG, key, default=None, throw_on_resolution_failure=False)
        if OmegaConf.is_dict(node):
            typed = override.input_line.split("=", 1)[1]
            raise ConfigError(f"{key}: a section of the config: set its keys ({key}.<key>=<value>), not {typed}")


def override_as_typed(reference: DictConfig, key: str, value: str) -> str:
    """The override that sets ``key`` to ``value`` (as typed) on this command line: ``key=value`` when the
    composed config has the key, else ``++key=value`` (a verl key a policy delta does not list; Hydra rejects
    it without ``+`` and ``+`` alone where the key exists)."""
    missing = object()
    found = OmegaConf.select(reference, key, default=missing, throw_on_resolution_failure=False)
    return f"{key}={value}" if found is not missing else f"++{key}={value}"


def policy_keys(cfg: DictConfig, names: list[str], path: str) -> list[str]:
    """The keys that set verl's ``actor_rollout_ref.<path>`` for the policies ``names`` on a command line, each once:
    a policy's own ``<name>.verl.<path>`` where its delta sets it (the delta wins over the shared key), else the
    shared ``actor_rollout_ref.<path>``."""
    missing, keys = object(), []
    for name in names:
        own = f"{name}.verl.{path}"
        found = OmegaConf.select(cfg, own, default=missing, throw_on_resolution_failure=False)
        key = own if found is not missing else f"{POLICY_BASE}.{path}"
        keys += [] if key in keys else [key]
    return keys


def compose_reference(group_overrides: list[str], compose: Callable[[list[str]], DictConfig]) -> DictConfig:
    """The config the group choices alone compose to.

    Raises:
        ConfigError: for a group option that does not exist, listing the options there are.
    """
    from hydra.errors import HydraException

    try:
        return compose(group_overrides)
    except HydraException as error:
        raise ConfigError(describe_hydra_error(error, group_overrides)) from error


def describe_hydra_error(error: BaseException, overrides: list[str]) -> str:
    """One line for a Hydra composition error: a missing group option with the options there are,
    else Hydra's first line."""
    text = str(error)
    groups = config_groups()
    for override in parse_overrides(overrides):
        options = groups.get(override.key_or_group)
        if options is not None and f"'{override.key_or_group}/" in text:
            value = override.value()
            near = _nearest(str(value), options)
            hint = f"did you mean {override.key_or_group}={near}? " if near else ""  # the override to type
            return f"{override.key_or_group}={value}: no such option ({hint}options: {', '.join(options)})"
    first = next((line for line in text.splitlines() if line.strip()), type(error).__name__)
    if first.startswith("Ambiguous value for argument"):  # a comma in an unquoted value reads as a sweep
        line = first.split("'", 1)[1].rstrip("'") if "'" in first else ""
        key, _, typed = line.partition("=")
        return f"{key}: a value with a comma reads as a list of runs; quote it: '{key}=\"{typed}\"'"
    for override in parse_overrides(overrides):
        key, typed = override.key_or_group, override.input_line.partition("=")[2]
        if f"Could not override '{key}'" in first:  # a valid key (verl's) the composed tree does not list
            return f"{key}: not in the composed config; add it with ++: ++{key}={typed}"
        if f"An item is already at '{key}'" in first:  # `+key=...` for a key that exists
            return f"{key}: already in the config, so set it without +: {key}={typed}"
    return first
