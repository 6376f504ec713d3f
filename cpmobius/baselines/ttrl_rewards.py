r"""TTRL's vote and reward (`PRIME-RL/TTRL`), as its released code computes them.

`verl/utils/reward_score/ttrl/ttt_metrics.py` `test_time_train_metrics`: the label is the most common extracted
answer (exact strings, all votes); reward 1.0 for a rollout whose answer is equivalent to it, else 0.0.
docs/baselines.md has the references.

Departures from the released code (marked `# CPMöbius:` where they happen): the trained rollouts are the first
`n_train` in generation order (the code takes the first `n_train` after verl's length-balancing reorder, which
depends on the number of data-parallel ranks); ValueError on an empty batch or a count out of range.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from cpmobius.baselines.checks import Equivalent, check_nonempty


def ttrl_vote_then_train(extracted: Sequence[str], n_train: int) -> tuple[str, list[int]]:
    """TTRL's label from all votes, and which rollouts train.

    Source: TTRL `verl/utils/reward_score/ttrl/ttt_metrics.py` `test_time_train_metrics`: label =
    ``Counter(extracted).most_common(1)[0][0]`` over all votes (64 in `examples/ttrl/amc.sh`):
    exact strings after Qwen's ``strip_string``, ties to the first seen, and ``""`` (nothing extracted)
    can win. The rollouts that train (32 of the 64) are chosen in `ray_trainer.py`
    ``_select_top_k_per_prompt``.

    Args:
        extracted: (n_votes,) each vote's extracted, normalised answer, in generation order.
        n_train: how many rollouts train, 1 <= n_train <= n_votes.

    Returns:
        (label, train_indices): train_indices = [0, 1, ..., n_train − 1].

    Raises:
        ValueError: no votes, a vote that is not a string, or n_train outside [1, n_votes].
    """
    check_nonempty("ttrl_vote_then_train", extracted)
    if not all(isinstance(a, str) for a in extracted):
        raise ValueError("ttrl_vote_then_train: every extracted answer must be a string ('' when none was found)")
    if not 1 <= n_train <= len(extracted):
        raise ValueError(f"ttrl_vote_then_train: n_train must be in [1, {len(extracted)}], got {n_train}")
    label = Counter(extracted).most_common(1)[0][0]
    # CPMöbius: the first n_train in generation order. The released code keeps the first n_train of each
    # group after verl's length-balancing reorder over the data-parallel ranks (8 there), an order that
    # depends on the world size and on the other prompts' lengths.
    return label, list(range(n_train))


def ttrl_rewards(extracted_train: Sequence[str], label: str, equivalent: Equivalent) -> list[float]:
    """TTRL's reward: 1.0 for a rollout whose answer is equivalent to the voted label, else 0.0.

    Source: TTRL `ttt_metrics.py` `test_time_train_metrics` → `qwen/qwen_eval.py` `qwen_reward_fn`:
    ``1.0 if grade_answer(answer, label) else 0.0``; no format term. The vote is exact-string
    (`ttrl_vote_then_train`), the reward lenient (``equivalent``).

    Args:
        extracted_train: (n_train,) the training rollouts' extracted answers.
        label: the voted label.
        equivalent: ``equivalent(given, reference) -> bool`` (TTRL: Qwen's ``math_grade.grade_answer``).

    Returns:
        (n_train,) rewards in {0.0, 1.0}.

    Raises:
        ValueError: no rollouts.
    """
    check_nonempty("ttrl_rewards", extracted_train)
    return [1.0 if equivalent(answer, label) else 0.0 for answer in extracted_train]
