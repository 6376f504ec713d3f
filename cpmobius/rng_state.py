"""The driver's random number generators in a checkpoint (``rng.pt``), as data only.

Stage: checkpoints (`cpmobius.checkpoint`). Python's, numpy's and torch's states are stored as plain
containers and tensors, so ``torch.load(weights_only=True)`` reads them and loading a checkpoint runs no
pickled code; a ``rng.pt`` of the older layout (numpy arrays inside) loads with numpy's array
constructors allowed and nothing else.
"""

from __future__ import annotations

import os
import pickle
import random

import numpy as np
import torch


def capture_rng() -> dict:
    """The driver's RNG states as plain containers and tensors, which ``torch.load(weights_only=True)`` reads:
    ``{"python": {"version", "internal": 625 ints, "gauss"}, "numpy": {"kind", "keys": 624 ints, "pos",
    "has_gauss", "cached_gaussian"}, "torch": uint8 tensor}``."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached_gaussian = np.random.get_state()
    return {
        "python": {"version": version, "internal": list(internal), "gauss": gauss},
        "numpy": {
            "kind": kind,
            "keys": [int(k) for k in keys],
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "torch": torch.get_rng_state(),
    }


def restore_rng(state: dict) -> None:
    """Set the driver's RNGs from `capture_rng`'s dict (or the tuples checkpoints held before it)."""
    python, numpy_state = state["python"], state["numpy"]
    if isinstance(python, dict):
        python = (python["version"], tuple(python["internal"]), python["gauss"])
    if isinstance(numpy_state, dict):
        n = numpy_state
        numpy_state = (n["kind"], np.array(n["keys"], dtype=np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    random.setstate(python)
    np.random.set_state(numpy_state)
    torch.set_rng_state(state["torch"])


# What a ``rng.pt`` from before `capture_rng` stored plain containers needs: numpy arrays of the MT19937 keys
# (data constructors only; no callable that runs code).
_LEGACY_RNG_GLOBALS = [np.ndarray, np.dtype, type(np.dtype(np.uint32)), np._core.multiarray._reconstruct]


def load_rng(path: str | os.PathLike) -> dict:
    """``rng.pt`` loaded with ``weights_only=True`` (numpy's array type allowed for the older layout)."""
    try:
        return torch.load(path, weights_only=True)
    except pickle.UnpicklingError:
        with torch.serialization.safe_globals(_LEGACY_RNG_GLOBALS):
            return torch.load(path, weights_only=True)
