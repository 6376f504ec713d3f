"""The run's default name, and so its folder (``outputs/<project>/<trainer.experiment_name>``): what makes it a
different run from the default one.

``trainer.experiment_name: ${run_name:<preset>}`` in ``configs/cpmobius.yaml`` (``default``) and in each preset
(``paper_qwen_1p5b``) names the run by the preset, then ``_<method>`` unless the method is ``cpmobius`` or the
preset's name holds it (``rent_qwen_1p5b``), and
``_seed<k>`` unless the seed is 0; without a preset, a model other than the toy world's names it instead of
``default``. So ``method=rent`` after the default run starts its own run (``default_rent``) instead of finding the
default's finished folder; ``experiment=paper_qwen_1p5b method=rent`` is ``paper_qwen_1p5b_rent``. An explicit
``trainer.experiment_name=NAME`` replaces the whole name, and ``trainer.default_local_dir=DIR`` the whole folder.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

RESOLVER = "run_name"
DEFAULT_NAME = "default"
DEFAULT_MODEL = "tiny"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@lru_cache(maxsize=1)
def default_and_other_methods() -> tuple[str, tuple[str, ...]]:
    """The default method (``configs/cpmobius.yaml``'s defaults list) and the others, one a YAML of
    ``configs/method/``; a preset named for one of the others (``rent_qwen_1p5b``) runs that method only."""
    defaults = OmegaConf.to_container(OmegaConf.load(CONFIGS / "cpmobius.yaml").defaults)
    default = next(entry["method"] for entry in defaults if isinstance(entry, dict) and "method" in entry)
    others = tuple(sorted(path.stem for path in (CONFIGS / "method").glob("*.yaml") if path.stem != default))
    return default, others


class PresetMethodError(ValueError):
    """A preset made for one method (``rent_qwen_1p5b``) composed with another; `validate_run_config` reports it as
    a config error naming the ``method=`` to add."""


def run_name(preset: Any, _root_: Any) -> str:
    """The run's name from its preset's name and the config's method, seed and model.

    Args:
        preset: the preset's name (``default`` for none).
        _root_: the whole config (OmegaConf passes it); reads ``method.name``, ``seed`` and ``model.name``.

    Returns:
        e.g. ``default``, ``default_rent``, ``paper_qwen_1p5b_rent``, ``default_seed3``, ``qwen2p5_coder_0p5b``,
        ``rent_qwen_1p5b``.

    Raises:
        PresetMethodError: a preset named for a baseline (``rent_qwen_1p5b``) with another method.
    """
    name = str(preset)
    model = OmegaConf.select(_root_, "model.name", default=None)
    if name == DEFAULT_NAME and model not in (None, DEFAULT_MODEL):
        name = str(model)
    method = OmegaConf.select(_root_, "method.name", default=None)
    default_method, others = default_and_other_methods()
    named = [word for word in name.split("_") if word in others]
    if named and named[0] != method:
        raise PresetMethodError(
            f"experiment={preset} is {named[0]}'s preset, but the method is {method}: add method={named[0]} "
            f"(bash scripts/launch.sh {preset} method={named[0]})"
        )
    if method not in (None, default_method) and not named:  # rent_qwen_1p5b names its method already
        name += f"_{method}"
    seed = OmegaConf.select(_root_, "seed", default=0)
    if seed not in (None, 0):
        name += f"_seed{seed}"
    return name


def register_run_name() -> None:
    """Make ``${run_name:...}`` known to OmegaConf (once per process; again is a no-op)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, run_name)
