"""Rewards and advantages: the Player's reward against the pseudo-label (GRPO), and the Coach's reward.

Player (paper §3, released `MajorityVoteRewardManager`): reward 1 for a rollout whose answer equals
the pseudo-label, else 0, placed on its last response token; GRPO advantages per group through
verl's `compute_grpo_outcome_advantage` ((r − mean)/(std + ε), broadcast over response tokens). The
released code uses ±1 instead of 1/0: GRPO's normalisation makes the two identical.

Coach (paper Eq. for R_i; released `_proposer_val_reward`), one value per *kept* problem:

| variant              | R_i                                             | source                        |
|----------------------|-------------------------------------------------|-------------------------------|
| `paper`              | pass_rate_i × 100 · Δt                          | paper (default)               |
| `released_uniform`   | 100 · Δt                                        | released 1.5B script          |
| `released_advantage` | 100 · Δt × token-weighted mean Player advantage | released 7B / 3B scripts      |

Δt is the change of validation accuracy as a fraction (0.04 = 4 points); every variant uses it in
accuracy points (100 · Δt), as the released code does. # CPMöbius: the paper writes pass_rate_i × Δt
without a unit; the Coach's regularisers (entropy bonus +0.01, KL 0.001) are the released code's,
tuned for a reward in points. With Δt as a fraction (~0.005–0.015 per step) they would outweigh the
reward under token-mean aggregation and drive the Coach instead of the Player's progress
(tests/test_coach_reward_scale.py measures the three gradients). No baseline and no
normalisation (released code: singleton GRPO groups), so a continuous reward is never divided by a
near-zero std. Problems that were rejected or filtered out carry no reward at all (`None`),
never a number standing in for one; the Coach update trains on kept problems only.

Ablations of the Δt in R_i (``coach.delta_t_source``, `coach_delta_t`), to ask whether Δt steers the Coach
or acts as a constant factor: ``measured`` (the method), ``constant`` (one given value every step), ``noise``
(a fresh zero-mean Gaussian each step) and ``shuffled`` (the measured Δt of a uniformly random earlier step).
Each is marked `# CPMöbius:` where it replaces Δt; the Coach update is otherwise the method's.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import torch

from cpmobius.settings import COACH_REWARDS, DELTA_T_SOURCES

# Independent random streams of one (seed, step): each source draws from its own (`coach_delta_t`).
_NOISE_STREAM, _SHUFFLE_STREAM = 1, 2


def player_token_rewards(agrees: Sequence[float], response_mask: torch.Tensor) -> torch.Tensor:
    """Each rollout's reward on its last response token (CPMöbius: 1/0 vs the pseudo-label).

    Args:
        agrees: (B,) rollout b's reward: a bool (its answer equals its group's pseudo-label) or a number
            (a baseline's reward, `cpmobius.baselines`).
        response_mask: (B, T) 1 on response tokens.

    Returns:
        (B, T) float32, zero except at each row's last response token.
    """
    rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
    lengths = response_mask.long().sum(dim=1)
    for row, (agree, length) in enumerate(zip(agrees, lengths.tolist())):
        if length > 0:
            rewards[row, length - 1] = float(agree)
    return rewards


def random_player_rewards(count: int, p: float, seed: int, step: int) -> list[float]:
    """Rewards of 1 with probability ``p`` and 0 otherwise, whatever the rollouts answer (``player.reward=random``).

    A null control, not the method: the same problems, groups and GRPO update as the paper's reward, with
    the pseudo-label's verdict replaced by a coin (the "random reward" of arXiv 2506.10947).

    Args:
        count: rollouts, B.
        p: probability of a reward of 1, in [0, 1].
        seed, step: the run's seed and the loop step; the draws depend on these alone.

    Returns:
        (B,) list of 0.0 / 1.0.

    Raises:
        ValueError: ``p`` outside [0, 1] or a negative ``count``.
    """
    if not 0.0 <= p <= 1.0 or count < 0:
        raise ValueError(f"random rewards need 0 <= p <= 1 and count >= 0, got p={p!r}, count={count!r}")
    generator = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(step))
    return (torch.rand(count, generator=generator) < p).float().tolist()


def grpo_advantages(
    token_rewards: torch.Tensor, response_mask: torch.Tensor, group_ids: Sequence[str], norm_by_std: bool = True
) -> torch.Tensor:
    """GRPO outcome advantages through verl (`core_algos.compute_grpo_outcome_advantage`).

    Args:
        token_rewards: (B, T) from `player_token_rewards`.
        response_mask: (B, T).
        group_ids: (B,) the group (uid) of each row.
        norm_by_std: divide by the group's standard deviation (``algorithm.norm_adv_by_std_in_grpo``, verl's key;
            false: Dr. GRPO's unscaled advantages).

    Returns:
        (B, T) float32 advantages, zero on padding; exactly zero for a zero-variance group.
    """
    import numpy as np
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    advantages, _ = compute_grpo_outcome_advantage(
        token_level_rewards=token_rewards,
        response_mask=response_mask.float(),
        index=np.asarray(group_ids, dtype=object),
        norm_adv_by_std_in_grpo=norm_by_std,
    )
    return advantages.float()


def token_weighted_mean_advantage(advantages: torch.Tensor, response_mask: torch.Tensor) -> float:
    """Mean of the non-padding token advantages of one group's rollouts (released `advantages` statistic).

    Args:
        advantages: (n, T) one group's GRPO advantages.
        response_mask: (n, T).
    """
    mask = response_mask.bool()
    return float(advantages[mask].mean()) if mask.any() else 0.0


def coach_rewards(
    variant: str,
    delta_t: float,
    pass_rates: Sequence[float],
    mean_player_advantages: Optional[Sequence[float]] = None,
) -> list[float]:
    """R_i for each kept problem (table in the module docstring).

    Args:
        variant: one of `COACH_REWARDS`.
        delta_t: validation accuracy after minus before the Player update, as a fraction (0.01 =
            one point); R_i uses it in points (× 100) for every variant.
        pass_rates: (K,) pass rate of each kept problem.
        mean_player_advantages: (K,) token-weighted mean Player advantage per kept problem
            (`released_advantage` only).

    Returns:
        K floats.

    Raises:
        ValueError: unknown variant, or `released_advantage` without advantages.
    """
    if variant not in COACH_REWARDS:
        raise ValueError(f"unknown coach reward {variant!r}; expected one of {COACH_REWARDS}")
    delta_t_points = 100.0 * delta_t
    if variant == "paper":
        # CPMöbius: Δt in accuracy points, like the released rewards (module docstring).
        return [float(rate) * delta_t_points for rate in pass_rates]
    if variant == "released_uniform":
        return [delta_t_points for _ in pass_rates]
    if mean_player_advantages is None or len(mean_player_advantages) != len(pass_rates):
        raise ValueError("released_advantage needs one mean Player advantage per kept problem")
    # Released code: a mean advantage of exactly 0 becomes -1.
    return [delta_t_points * (adv if adv != 0.0 else -1.0) for adv in mean_player_advantages]


def coach_delta_t(
    source: str,
    delta_t: float,
    earlier: Sequence[float],
    seed: int,
    constant: Optional[float] = None,
    noise_sd: Optional[float] = None,
) -> tuple[float, Optional[int]]:
    """The Δt that the Coach's reward R_i multiplies at step t = len(earlier) + 1 (``coach.delta_t_source``).

    # CPMöbius: every source but ``measured`` is an ablation, not the method:

    - ``measured``: the step's own Δt (the paper);
    - ``constant``: ``constant`` every step (e.g. the measured run's mean Δt): R_i keeps the pass rate and the
      scale, and carries nothing of what the step's problems did to the Player;
    - ``noise``: a fresh draw of N(0, noise_sd²) each step: a reward of Δt's kind that carries no signal;
    - ``shuffled``: the measured Δt of step J, J uniform over 1 … t−1 (drawn with replacement, as a bootstrap
      of this run's own history): the values and scale of the run's Δt, paired with another step's problems.
      Not a permutation of the whole run: the reward of step t can only use Δt measured by then, and the only
      permutation that never reaches ahead is the identity. The current step is left out, so no step is
      rewarded with its own Δt; step 1 has no earlier step and gets 0 (its Coach update is skipped, like a
      step whose Δt is 0). With Δt trending down over a run, the draws lean to the larger early values.

    The draws of ``noise`` and ``shuffled`` are a function of (``seed``, t) alone (numpy's generator seeded
    with ``[seed, t, stream]``), so a resumed run draws what an uninterrupted one does: nothing to checkpoint
    beyond the Δt history, which the loop state holds.

    Args:
        source: one of `DELTA_T_SOURCES`.
        delta_t: the step's measured Δt, a fraction (0.01 = one point).
        earlier: (t−1,) the measured Δt of steps 1 … t−1 (``val/delta_t``; a skipped step's is 0).
        seed: the run's seed.
        constant: ``constant``'s value, a fraction.
        noise_sd: ``noise``'s standard deviation, a fraction.

    Returns:
        ``(Δt for R_i, the step whose measured Δt it is)``; the step is None for ``constant``, ``noise`` and a
        ``shuffled`` step 1.

    Raises:
        ValueError: unknown source, or its parameter missing.
    """
    step = len(earlier) + 1
    if source == "measured":
        return float(delta_t), step
    if source == "constant" and constant is not None:
        return float(constant), None
    if source == "noise" and noise_sd is not None:
        return float(np.random.default_rng([seed, step, _NOISE_STREAM]).normal(0.0, noise_sd)), None
    if source == "shuffled":
        if not earlier:
            return 0.0, None
        drawn = int(np.random.default_rng([seed, step, _SHUFFLE_STREAM]).integers(1, step))  # 1 … t−1
        return float(earlier[drawn - 1]), drawn
    raise ValueError(f"coach Δt source {source!r} (one of {DELTA_T_SOURCES}) without its parameter")


def coach_advantages(rewards: Sequence[float], response_mask: torch.Tensor) -> torch.Tensor:
    """REINFORCE advantages: R_i on every response token of Coach row i; no baseline, no normalisation.

    Args:
        rewards: (K,) Coach rewards.
        response_mask: (K, T).

    Returns:
        (K, T) float32.
    """
    return torch.tensor(list(rewards), dtype=torch.float32)[:, None] * response_mask.float()
