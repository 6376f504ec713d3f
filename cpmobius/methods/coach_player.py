"""CPMöbius (``method=cpmobius``, paper Algorithm 1): the Coach writes problems, the difficulty filter keeps those
in the band, the Player trains on them against their pseudo-labels, and the Coach is rewarded with R_i, which
carries the Player's measured gain Δt (`cpmobius.rewards.coach_rewards`)."""

from __future__ import annotations

from cpmobius import metrics
from cpmobius.filter_stage import DifficultyFilter
from cpmobius.loop_state import KeptProblems
from cpmobius.methods.base import LoopView, Method, register
from cpmobius.policy_api import train_policy
from cpmobius.rewards import coach_advantages, coach_delta_t, coach_rewards, token_weighted_mean_advantage


@register
class CoachPlayer(Method):
    """The method this repository reproduces; its step table shows the filter and the Coach."""

    name = "cpmobius"
    coach_reward_has_delta_t = True
    writes_problem_archive = True

    @classmethod
    def table_columns(cls, greedy_beside: bool = False, levels: bool = False) -> list[tuple]:
        """`Method.table_columns`, with the greedy pass's accuracy beside ``val_acc`` when ``greedy_beside``
        (``validation.metric=expected``) and the mean level of the Coach's well-formed problems after ``valid``
        when ``levels`` (a world whose problems have levels: the toy world)."""
        columns = list(cls.table)
        if levels:
            at = next(i for i, (key, _, _) in enumerate(columns) if key == "coach/valid_frac") + 1
            columns.insert(at, ("coach/difficulty_mean", "{:>7.2f}", "c_level"))
        if greedy_beside:
            columns.insert(2, ("val/accuracy_greedy", "{:>6.3f}", "greedy"))
        return columns

    def problem_source(self, loop: LoopView) -> DifficultyFilter:
        return DifficultyFilter(
            loop.settings,
            loop.coach,
            loop.player,
            loop.player_prompt,
            loop.output_dir / "problems",
            loop.stages,
            loop.count_tokens,
            loop.ground_truth,
            loop.difficulty_of,
        )

    def update_coach(self, loop: LoopView, kept: KeptProblems, delta_t: float) -> dict[str, float]:
        """REINFORCE on the kept problems' Coach rows with R_i (`cpmobius.rewards.coach_rewards`).

        Skipped when the reward's Δt is 0 (released code) or ``coach.update`` is false. # CPMöbius: with
        ``coach.delta_t_source`` other than ``measured`` (an ablation) R_i multiplies a replaced Δt
        (`cpmobius.rewards.coach_delta_t`), logged as ``coach/delta_t`` (and the step it was measured at as
        ``coach/delta_t_step``); the update is otherwise the same.
        """
        cs, n = loop.settings.coach, loop.settings.player.n
        if loop.coach is None or kept.coach_batch is None:  # nothing the Coach wrote was kept
            return {}
        if not cs.update:
            return {"coach/updated": 0.0}
        earlier = loop.state.delta_t_history[: loop.state.step]  # steps 1 … t−1, checkpointed in the loop state
        delta_t, from_step = coach_delta_t(
            cs.delta_t_source, delta_t, earlier, int(loop.cfg.seed), cs.delta_t_constant, cs.delta_t_noise_sd
        )
        used = {"coach/delta_t": delta_t} if cs.delta_t_source != "measured" else {}  # an ablation's Δt, logged
        if used and from_step is not None:
            used["coach/delta_t_step"] = float(from_step)
        if delta_t == 0.0:
            return {"coach/updated": 0.0, **used}
        player_adv, player_mask = kept.player_batch.batch["advantages"], kept.player_batch.batch["response_mask"]
        mean_adv = [
            token_weighted_mean_advantage(player_adv[i * n : (i + 1) * n], player_mask[i * n : (i + 1) * n])
            for i in range(len(kept))
        ]
        rewards = coach_rewards(cs.reward, delta_t, [o.pass_rate for o in kept.outcomes], mean_adv)
        batch = kept.coach_batch
        update_metrics = train_policy(
            loop.coach, batch, lambda _entropies: coach_advantages(rewards, batch.batch["response_mask"])
        )
        return {
            **metrics.prefixed(update_metrics, "coach"),
            "coach/updated": 1.0,
            "coach/reward_mean": sum(rewards) / len(rewards),
            **used,
        }
