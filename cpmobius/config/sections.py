"""The composed config read as typed sections: each method key's default, and one group's keys against a dataclass.

`default` reads a method key's default from ``configs/cpmobius.yaml``, the one place it is written (a method's own
keys: `method_default`, from its ``configs/method_defaults/<method>.yaml``); `read_section`
turns one group of the composed config (``filter``, ``player``, ...) into its settings dataclass, naming an unknown
key with the nearest valid one (`cpmobius.config.known_keys.unknown_key_message`) and checking simple types before
the dataclass's own range checks run. `cpmobius.settings` holds the dataclasses; nothing here knows the groups.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from cpmobius.config import CONFIG_DIR, MAIN_CONFIG, ConfigError
from cpmobius.config.known_keys import unknown_key_message

_ABSENT = object()
_SIMPLE_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def default(key: str) -> Any:
    """The default of method key ``key`` (e.g. ``"filter.quota"``): its value in ``configs/cpmobius.yaml``.

    Raises:
        KeyError: the key is not in that file (every method key must be, with its comment).
    """
    value = OmegaConf.select(MAIN_CONFIG, key, default=_ABSENT)
    if value is _ABSENT:
        raise KeyError(f"{key}: no default in configs/cpmobius.yaml")
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def method_default(method: str, key: str) -> Any:
    """The default of method ``method``'s own key ``key`` (e.g. ``("ttrl", "votes")``): its value in
    ``configs/method_defaults/<method>.yaml``, the method's defaults file, which its settings class reads.

    Raises:
        KeyError: the file or the key is missing (every key of a method's settings class must be there).
    """
    path = CONFIG_DIR / "method_defaults" / f"{method}.yaml"
    node = OmegaConf.load(path) if path.is_file() else OmegaConf.create()
    value = OmegaConf.select(node, f"method.{key}", default=_ABSENT)
    if value is _ABSENT:
        raise KeyError(f"method.{key}: no default in configs/method_defaults/{method}.yaml")
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def require(condition: bool, key: str, message: str) -> None:
    """Raise ``ConfigError("<key>: <message>")`` unless ``condition``."""
    if not condition:
        raise ConfigError(f"{key}: {message}")


def require_choice(value: Any, choices: tuple, key: str) -> None:
    """Raise a `ConfigError` naming ``key`` unless ``value`` is one of ``choices``."""
    require(value in choices, key, f"must be one of {choices}, got {value!r}")


def check_type(key: str, annotation: str, value: Any) -> None:
    """Raise a `ConfigError` naming ``key`` when ``value`` is not of the field's simple type (``int``, ``float``,
    ``bool``, ``str``, or ``Optional[...]`` of one; other annotations are left to the dataclass)."""
    optional = annotation.startswith("Optional[")
    base = annotation[len("Optional[") : -1] if optional else annotation
    if base not in _SIMPLE_TYPES or (optional and value is None):
        return
    allowed = _SIMPLE_TYPES[base]
    if not isinstance(value, allowed) or (base != "bool" and isinstance(value, bool)):
        raise ConfigError(f"{key}: expected {annotation}, got {value!r}")
    if base == "float" and not math.isfinite(value):  # inf passed every ">= x" check (warmup.lr=inf trained)
        raise ConfigError(f"{key}: expected a finite number, got {value!r}")


def read_section(cfg: DictConfig, key: str, cls: type, nested: Optional[dict[str, type]] = None) -> Any:
    """``cls(**cfg[key])``: the group's keys checked against ``cls``'s fields and types first (its ``verl``
    delta left out). ``nested`` maps a field holding a sub-group (``player.rollback``) to its dataclass, whose
    keys are checked the same way.

    Raises:
        ConfigError: naming the first unknown key or the first value of the wrong type, or the group itself set to
            a value (``filter=null``).
    """
    if key in cfg and not OmegaConf.is_dict(cfg[key]):  # filter=null: the whole group replaced by a value
        raise ConfigError(f"{key}: a group of keys ({key}.<name>=<value>), got {cfg[key]!r}")
    node = OmegaConf.to_container(cfg[key], resolve=True) if key in cfg else {}
    node.pop("verl", None)
    return read_fields(key, node, cls, nested)


def read_fields(key: str, node: dict, cls: type, nested: Optional[dict[str, type]] = None) -> Any:
    """``cls(**node)`` for the keys of group ``key`` as a plain dict (`read_section`; a method's own keys,
    `cpmobius.methods.base.Method.read_settings`), each checked against ``cls``'s fields and simple types first.

    Raises:
        ConfigError: naming the first unknown key (with the nearest known one) or the first value of the wrong type.
    """
    node = dict(node)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(node) - set(known))
    if unknown:
        raise ConfigError(unknown_key_message(f"{key}.{unknown[0]}", [key, unknown[0]], 1, sorted(known)))
    for name, value in node.items():
        check_type(f"{key}.{name}", str(known[name].type), value)
    for name, sub_cls in (nested or {}).items():
        if not isinstance(node.get(name), dict):
            continue
        sub_known = {f.name: f for f in fields(sub_cls)}
        for sub_name, value in node[name].items():
            if sub_name not in sub_known:
                path = [key, name, sub_name]
                raise ConfigError(unknown_key_message(".".join(path), path, 2, list(sub_known)))
            check_type(f"{key}.{name}.{sub_name}", str(sub_known[sub_name].type), value)
    return cls(**node)
