r"""RENT's reward (`satrams/rent-rl`), as its released code computes it.

`verl/trainer/ppo/ray_trainer.py` `fit` (`trainer.minimize_entropy`): −(mean token entropy over the whole
response), −7.0 without a final `\boxed{}` (`base_format`). docs/baselines.md has the references.

Departures from the released code (marked `# CPMöbius:` where they happen): an opt-in window over the last part of
each response (the paper's analysis; the code has none); ValueError on inputs the released code would silently
mis-handle (length mismatches, an empty batch, an unknown window).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from cpmobius.baselines.checks import check_nonempty

RENT_WINDOWS = ("all", "last_fraction")


def rent_rewards(
    entropies: torch.Tensor,
    response_mask: torch.Tensor,
    has_box: Sequence[bool],
    no_box_entropy: float = 7.0,
    window: str = "all",
    last_fraction: Optional[float] = None,
) -> torch.Tensor:
    r"""RENT's reward: minus the mean token entropy of each response; −7.0 without a final box.

    Source: RENT `verl/trainer/ppo/ray_trainer.py` `fit` (``trainer.minimize_entropy``,
    ``trainer.base_format``, ``trainer.entropy_base=7.0``): H_i = ``entropys[i, :L_i].mean()`` with L_i the
    response length (the final EOS token included), H_i := 7.0 when ``extract_answer`` finds no
    ``\boxed{}`` (verl ``last_boxed_only_string`` is None), reward = −H_i on the last response token. The
    entropies are of the rollout policy before the update, at the rollout temperature, in nats.

    ``window="all"`` (default) is the released code: every response token. ``window="last_fraction"``
    averages over the last ceil(``last_fraction`` · L_i) response tokens only (at least one), the part
    of the response the paper's analysis singles out; the released code has no such window and no
    released value of the fraction, so ``last_fraction`` must be given.

    Args:
        entropies: (B, T) float, per-token entropy in nats.
        response_mask: (B, T) 1 (or True) on response tokens, 0 on padding. Rows are read through the
            mask; for verl's right-padded responses this is the code's ``[:L_i]``.
        has_box: (B,) whether each response has a final ``\boxed{}``.
        no_box_entropy: H for a response without a box (the reward is its negative), nats.
        window: ``"all"`` or ``"last_fraction"``.
        last_fraction: in (0, 1], required with ``window="last_fraction"``, refused with ``"all"``.

    Returns:
        (B,) float32 rewards, nats (≤ 0 for non-negative entropies).

    Raises:
        ValueError: shapes not both (B, T), B = 0, ``len(has_box) != B``, an unknown window, a missing,
            out-of-range or unused ``last_fraction``, or a boxed response with no response token.
    """
    if entropies.dim() != 2 or entropies.shape != response_mask.shape:
        raise ValueError(
            f"rent_rewards: entropies and response_mask must both be (B, T), got "
            f"{tuple(entropies.shape)} and {tuple(response_mask.shape)}"
        )
    check_nonempty("rent_rewards", entropies)
    if len(has_box) != entropies.shape[0]:
        raise ValueError(f"rent_rewards: {entropies.shape[0]} responses but {len(has_box)} has_box flags")
    if window not in RENT_WINDOWS:
        raise ValueError(f"rent_rewards: window must be one of {RENT_WINDOWS}, got {window!r}")
    if window == "last_fraction" and (last_fraction is None or not 0.0 < last_fraction <= 1.0):
        raise ValueError(f"rent_rewards: window='last_fraction' needs last_fraction in (0, 1], got {last_fraction}")
    if window == "all" and last_fraction is not None:
        raise ValueError("rent_rewards: last_fraction is only read with window='last_fraction'")
    rewards = torch.empty(entropies.shape[0], dtype=torch.float32)
    for i, boxed in enumerate(has_box):
        if not boxed:
            rewards[i] = -float(no_box_entropy)
            continue
        row = entropies[i][response_mask[i].bool()].float()
        if row.numel() == 0:
            raise ValueError(f"rent_rewards: response {i} has a box but no response token in its mask")
        if window == "last_fraction":
            # CPMöbius: the paper's window over the end of the response, opt-in; the released code has none.
            row = row[-max(1, math.ceil(last_fraction * row.numel())) :]
        rewards[i] = -row.mean()
    return rewards
