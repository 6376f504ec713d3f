"""What every baseline reward checks of its input, and the answer-equivalence rule it is given (numpy-free)."""

from __future__ import annotations

import numbers
from typing import Callable, Sequence

Equivalent = Callable[[str, str], bool]
"""An answer-equivalence rule, called as ``equivalent(given, reference)`` (mathruler's or Qwen's
``grade_answer`` argument order); it returns False on a timeout or an error."""


def check_nonempty(name: str, items: Sequence) -> None:
    """Raise ValueError naming ``name`` when ``items`` is empty."""
    if len(items) == 0:
        raise ValueError(f"{name}: empty batch (at least one item is needed)")


def check_share(name: str, p: float) -> None:
    """Raise ValueError naming ``name`` unless ``p`` is a number in [0, 1] (a majority share)."""
    if isinstance(p, bool) or not (isinstance(p, numbers.Real) and 0.0 <= p <= 1.0):
        raise ValueError(f"{name}: a majority share must be a number in [0, 1], got {p!r}")
