"""The run's default name, and so its folder (``outputs/<project>/<trainer.experiment_name>``): what makes it a
different run from the default one.

``trainer.experiment_name: ${run_name:<preset>}`` in ``configs/cpmobius.yaml`` (``default``) and in each preset
(``paper_qwen_1p5b``) names the run by the preset, then ``_<method>`` unless the method is ``cpmobius`` and
``_seed<k>`` unless the seed is 0; without a preset, a model other than the toy world's names it instead of
``default``. So ``method=rent`` after the default run starts its own run (``default_rent``) instead of finding the
default's finished folder; ``experiment=paper_qwen_1p5b method=rent`` is ``paper_qwen_1p5b_rent``. An explicit
``trainer.experiment_name=NAME`` replaces the whole name, and ``trainer.default_local_dir=DIR`` the whole folder.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

RESOLVER = "run_name"
DEFAULT_NAME = "default"
DEFAULT_METHOD = "cpmobius"
DEFAULT_MODEL = "tiny"


def run_name(preset: Any, _root_: Any) -> str:
    """The run's name from its preset's name and the config's method, seed and model.

    Args:
        preset: the preset's name (``default`` for none).
        _root_: the whole config (OmegaConf passes it); reads ``method.name``, ``seed`` and ``model.name``.

    Returns:
        e.g. ``default``, ``default_rent``, ``paper_qwen_1p5b_rent``, ``default_seed3``, ``qwen2p5_coder_0p5b``.
    """
    name = str(preset)
    model = OmegaConf.select(_root_, "model.name", default=None)
    if name == DEFAULT_NAME and model not in (None, DEFAULT_MODEL):
        name = str(model)
    method = OmegaConf.select(_root_, "method.name", default=None)
    if method not in (None, DEFAULT_METHOD):
        name += f"_{method}"
    seed = OmegaConf.select(_root_, "seed", default=0)
    if seed not in (None, 0):
        name += f"_seed{seed}"
    return name


def register_run_name() -> None:
    """Make ``${run_name:...}`` known to OmegaConf (once per process; again is a no-op)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, run_name)
