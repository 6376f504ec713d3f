"""The CPMöbius loop (paper Algorithm 1): orchestration only, no math.

`CoachPlayerLoop.step` is one iteration, the same for every method (`cpmobius.methods`): the method's problem
source (CPMöbius: Coach generation and the difficulty filter, resampled until the quota is met or the attempt
cap is hit) → Player GRPO update on the source's own rollouts → validation and Δt → the method's Coach update
(CPMöbius: REINFORCE with Δt) → optional Player rollback. `fit` validates once before the loop, runs the steps,
logs, archives every generated problem, and checkpoints.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ContextManager

from omegaconf import OmegaConf

from cpmobius import checkpoint, metrics
from cpmobius.checkpoint_failures import resume_command
from cpmobius.clock import OpLog
from cpmobius.engine.timing import op_marks, op_metrics
from cpmobius.loop_state import KeptProblems, LoopState
from cpmobius.methods import check_settings, get_method
from cpmobius.policy_api import TrainedPolicy, train_policy
from cpmobius.prompts import PlayerPrompt, resolve_answer_instruction
from cpmobius.rewards import grpo_advantages, player_token_rewards
from cpmobius.settings import Settings
from cpmobius.validation import DeltaTracker, load_ood_set, load_validation_set, measure_accuracy

STAGES = ("coach", "difficulty_filter", "player_update", "validation", "coach_update", "rollback")


class CoachPlayerLoop:
    """Coach and Player co-evolution on verl, or the method ``method.name`` names (`cpmobius.methods`): ``method``
    is its `cpmobius.methods.Method` and ``filter`` its problem source (CPMöbius: the difficulty filter; TTRL and
    RENT: `cpmobius.methods.fixed_pool.FixedPool`; R-Zero: `cpmobius.methods.rzero.RZeroSchedule`).

    Args:
        cfg: the composed config (``trainer.*`` for steps, checkpoints and logging).
        settings: validated stage settings (`cpmobius.settings.load_settings`).
        coach: the Coach `Policy`, started; None for the baselines that have no Coach.
        player: the Player `Policy`, started.
        logger: an object with ``log(data, step)`` (verl's `Tracking`), or None.
        ground_truth: optional function problem text → true answer or None (the toy world), for
            ``pseudo_label/*`` metrics (compared with the project's grader).
        val_set: the validation set, when already loaded (the driver loads it before starting Ray).
        difficulty_of: optional function problem text → difficulty level or None, for the per-difficulty
            metrics (`metrics.difficulty_metrics`; the driver passes the toy world's classifier).
        ood_set: the out-of-distribution set scored beside validation, when already loaded (else
            ``validation.ood_dataset``'s, or none).
    """

    def __init__(
        self,
        cfg: Any,
        settings: Settings,
        coach: TrainedPolicy,
        player: TrainedPolicy,
        logger: Any = None,
        ground_truth: Any = None,
        val_set: Any = None,
        difficulty_of: Any = None,
        ood_set: Any = None,
    ):
        self.cfg = cfg
        # verl's key, both GRPO updates; a config without an ``algorithm`` group keeps verl's default (true)
        self.norm_adv_by_std = bool(OmegaConf.select(cfg, "algorithm.norm_adv_by_std_in_grpo", default=True))
        self._settings = check_settings(settings)
        self.coach, self.player = coach, player  # coach None: a baseline that trains the Player alone
        self.policies = {name: p for name, p in (("coach", coach), ("player", player)) if p is not None}
        self.logger = logger
        self.ground_truth = ground_truth
        self.difficulty_of = difficulty_of
        self.output_dir = Path(cfg.trainer.default_local_dir)
        self.val_set = val_set if val_set is not None else load_validation_set(settings.validation)
        self.ood_set = ood_set if ood_set is not None else load_ood_set(settings.validation)
        self.delta = DeltaTracker(settings.validation.ema_decay)
        # One Player prompt for rollouts, prompt-length checks and validation (no train/eval prompt drift); the \boxed{}
        # instruction resolved once from the Player's chat template (player.answer_format).
        template_kwargs = dict(OmegaConf.select(cfg, "data.apply_chat_template_kwargs", default=None) or {})
        answer_instruction = resolve_answer_instruction(
            settings.player.answer_format,
            getattr(player, "tokenizer", None),
            settings.player.system_prompt,
            **template_kwargs,
        )
        if answer_instruction and settings.player.answer_format == "auto":
            print(
                f"[cpmobius] player.answer_format=auto: the Player's chat template does not ask for \\boxed{{}}; "
                f"every Player prompt ends with {answer_instruction!r}",
                flush=True,
            )
        self.player_prompt = PlayerPrompt(settings.player.system_prompt, answer_instruction)
        self.state = LoopState()
        self.validating_step_0 = False
        # each stage's (stage, start, end) in perf_counter seconds (bench_step_gpu.py attributes operations by them)
        self.stages = OpLog()
        self._step_mark = 0
        self.method = get_method(settings.method.name)(settings.method.options)
        self.filter = self.method.problem_source(self)

    @property
    def settings(self) -> Settings:
        """The validated stage settings, shared with the difficulty filter."""
        return self._settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        # A new set (a benchmark's phases: another oversampling, a Coach reserve) reaches the filter too:
        # it holds its own reference, and a copy left behind would keep running the old settings.
        self._settings = self.filter.settings = settings

    # ------------------------------------------------------------------ Algorithm 1

    def step(self) -> dict[str, float]:
        """One coach–player iteration; returns its metrics."""
        self._step_mark = self.stages.mark()
        kept, step_metrics = self.filter.collect(self.state.step + 1)  # the method's problem source
        if kept is None:
            return {**step_metrics, **self._skipped_step()}
        if len(kept):  # R-Zero's Challenger steps keep nothing for the Player (their update is the Coach's)
            with self.timed("player_update"):
                step_metrics.update(self.update_player(kept))
        with self.timed("validation"):
            delta_t, val_metrics = self.validate()
        with self.timed("coach_update"):
            step_metrics.update(self.update_coach(kept, delta_t))  # the method's: CPMöbius's REINFORCE with Δt
        with self.timed("rollback"):
            step_metrics.update(self.maybe_roll_back(val_metrics["val/accuracy"]))
        return {**step_metrics, **val_metrics, "val/delta_t": delta_t, **self._timing_metrics()}

    # ------------------------------------------------------------------ stages

    def update_player(self, kept: KeptProblems) -> dict[str, float]:
        """GRPO on the kept groups' rollouts with the method's rewards (`cpmobius.methods.Method.player_scores`:
        agreement with the pseudo-label for CPMöbius, TTRL and R-Zero; minus the mean token entropy for RENT),
        verl's update."""
        batch = kept.player_batch
        mask = batch.batch["response_mask"]
        scores: list[float] = []

        def advantages(entropies: Any) -> Any:
            scores[:] = self.method.player_scores(self, kept, entropies)
            rewards = player_token_rewards(scores, mask)
            return grpo_advantages(rewards, mask, batch.non_tensor_batch["uid"], self.norm_adv_by_std)

        update_metrics = train_policy(self.player, batch, advantages)
        lengths = mask.sum(dim=1).float().tolist()
        return {
            **metrics.prefixed(update_metrics, "player"),
            "player/reward_mean": sum(scores) / len(scores),
            **metrics.length_metrics("player/response_length", lengths),
        }

    def validate(self) -> tuple[float, dict[str, float]]:
        """Validation accuracy after the Player update, and Δt against the score before it."""
        result = self._measure_validation(ood=True)
        delta_t = self.delta.update(result.accuracy, result.accuracy_se)
        self.state.delta_t_history.append(delta_t)
        return delta_t, {
            **self._accuracy_metrics(result),
            **metrics.delta_t_noise_metrics(delta_t, result.accuracy_se, self.delta.delta_se),
            "val/response_length_mean": result.mean_response_tokens,
            "val/truncated_frac": result.truncated_frac,
            **{f"val/sampling/{key}": value for key, value in result.sampling.items()},
            **{f"val/grade/{status}": count for status, count in result.grade_counts.items()},
        }

    def update_coach(self, kept: KeptProblems, delta_t: float) -> dict[str, float]:
        """The method's Coach update after validation (`cpmobius.methods.Method.update_coach`): CPMöbius's
        REINFORCE with R_i, R-Zero's Challenger update, none for the methods without a Coach."""
        return self.method.update_coach(self, kept, delta_t)

    def maybe_roll_back(self, score: float) -> dict[str, float]:
        """Released option: keep the best-on-validation Player; after ``patience`` non-improving steps
        (counted from ``begin_step``) with a score below the best, restore it.

        The running best starts at the initial validation score V₀ (released code), with the initial
        Player saved as the first best. # CPMöbius: after a rollback the restored Player is validated
        once more and Δt restarts from that score, not from ``best_val``: ``best_val`` is the maximum
        of noisy passes, so measuring from it would bias the next Δt (and the Coach's reward) negative;
        the released code measures from the pre-rollback score and credits the rollback's jump. The
        counter test is ``>=`` (released: ``==``, which never rolls back when the patience-th step ties
        the best).
        """
        rb, state = self.settings.player.rollback, self.state
        if not rb.enabled:
            return {}
        best_dir = self.output_dir / "best_player"
        step_metrics: dict[str, float] = {}
        if state.best_val is None or score > state.best_val:
            state.best_val, state.steps_without_improvement = score, 0
            checkpoint.save_best_policy(best_dir, self.player, score, state.step + 1)
        elif self.state.step + 1 >= rb.begin_step:
            state.steps_without_improvement += 1
            if state.steps_without_improvement >= rb.patience and score < state.best_val:
                state.steps_without_improvement = 0
                broken = checkpoint.check_checkpoint(best_dir)  # checked against its manifest before verl unpickles it
                if broken is not None:  # no rollback, the run goes on
                    print(f"[cpmobius] no rollback: the best Player's copy is broken ({broken})", flush=True)
                    step_metrics["player/rollback_skipped"] = 1.0
                else:
                    self.player.load(str(best_dir.resolve()))
                    state.rollbacks += 1
                    restored = self._measure_validation()
                    self.delta.start(restored.accuracy, restored.accuracy_se)
                    step_metrics["player/restored_val"] = restored.accuracy
        return {**step_metrics, "player/rollbacks": state.rollbacks, "player/best_val": state.best_val}

    # ------------------------------------------------------------------ fit

    def fit(self) -> LoopState:
        """Validate once, then run steps up to ``trainer.total_training_steps``, resuming if asked."""
        total = int(self.cfg.trainer.total_training_steps)
        if not self.try_resume():
            with self.timed("validation"):
                self.validating_step_0 = True  # the interrupt line names this phase (interrupts.describe_interrupt)
                result = self._measure_validation(ood=True)
                self.validating_step_0 = False
            self.delta.start(result.accuracy, result.accuracy_se)
            if self.settings.player.rollback.enabled:
                # Released code: the running best starts at V₀; the initial Player is the first best.
                self.state.best_val = result.accuracy
                checkpoint.save_best_policy(self.output_dir / "best_player", self.player, result.accuracy, 0)
            noise = metrics.delta_t_noise_metrics(0.0, result.accuracy_se, None)
            self._log({**self._accuracy_metrics(result), **noise, **self._timing_metrics()}, step=0)
        while self.state.step < total:
            started, marks = time.perf_counter(), op_marks(self.policies)
            step_metrics = self.step()
            self.state.step += 1
            step_metrics["timing_s/step"] = time.perf_counter() - started
            step_metrics.update(op_metrics(self.policies, marks))
            step_metrics.update(self._loop_metrics())
            self._log(step_metrics, step=self.state.step)
            save_freq = int(self.cfg.trainer.save_freq)
            if (save_freq > 0 and self.state.step % save_freq == 0) or self.state.step == total:
                self.save()
        return self.state

    def save(self) -> Path:
        state = self.state
        state.delta_tracker = self.delta.state_dict()
        state.problem_source = self.filter.state_dict()
        state.engine_switches = self.player.guard.switches
        loop_state = {
            **{k: getattr(state, k) for k in LoopState.__dataclass_fields__},
            "policies": {
                name: {"global_steps": p.global_steps, "generation_calls": p.generation_calls}
                for name, p in self.policies.items()
            },
        }
        return checkpoint.save_checkpoint(
            self.output_dir,
            state.step,
            self.policies,
            loop_state,
            self.cfg,
            keep=self.cfg.trainer.get("max_actor_ckpt_to_keep"),
            resume=resume_command(self.cfg),
        )

    def try_resume(self) -> bool:
        """Resume from the latest checkpoint when ``trainer.resume_mode`` is auto (or from
        ``trainer.resume_from_path`` with resume_path). Returns whether a checkpoint was loaded."""
        mode = self.cfg.trainer.resume_mode
        if mode == "disable":
            return False
        path = (
            Path(self.cfg.trainer.resume_from_path)
            if mode == "resume_path"
            else checkpoint.find_latest_checkpoint(self.output_dir)
        )
        if path is None:
            return False
        saved = checkpoint.load_checkpoint(path, self.policies)
        self.state = LoopState.from_saved(saved)
        self.delta.load_state_dict(self.state.delta_tracker)
        self.filter.load_state_dict(self.state.problem_source)
        self.player.guard.switches = self.state.engine_switches  # cumulative counters go on from the checkpoint
        best = checkpoint.read_best_record(self.output_dir / "best_player")
        if best is not None and best["score"] != self.state.best_val:
            # CPMöbius: killed after a new best Player was saved but before the step's checkpoint: the
            # saved weights are the best ones, so their score is the best score (a rollback restores
            # exactly what best_val describes).
            self.state.best_val = best["score"]
        print(f"[cpmobius] resumed from {path} at step {self.state.step}", flush=True)
        return True

    # ------------------------------------------------------------------ helpers

    def timed(self, stage: str) -> ContextManager[None]:
        return self.stages.timed(stage)

    def stage_sequence(self, mark: int = 0) -> list[str]:
        """The stages run since ``mark`` (`OpLog.mark` of ``self.stages``), in order, repeats merged."""
        names = [stage for stage, _, _ in self.stages.intervals[mark:]]
        return [name for i, name in enumerate(names) if i == 0 or names[i - 1] != name]

    def _measure_validation(self, ood: bool = False) -> Any:
        """One validation pass of the Player (`cpmobius.validation.measure_accuracy`), tokens counted; with ``ood``,
        the out-of-distribution set's too (every step, not a rollback's re-validation)."""
        ood_set = self.ood_set if ood else None
        result = measure_accuracy(self.player, self.val_set, self.settings.validation, self.player_prompt, ood_set)
        self.count_tokens("validation", result.response_tokens + result.ood_response_tokens)
        return result

    def _accuracy_metrics(self, result: Any) -> dict[str, float]:
        """``val/accuracy`` (what Δt is measured on) and, with ``validation.metric=expected``, the greedy pass's
        ``val/accuracy_greedy``; per difficulty level where the world knows it (`metrics.accuracy_by_level`)."""
        found = {"val/accuracy": result.accuracy}
        if result.ood_accuracy is not None:
            found["val/ood_accuracy"] = result.ood_accuracy
        greedy = result.greedy_per_problem is not None
        if greedy:
            found["val/accuracy_greedy"] = result.greedy_accuracy
        if self.difficulty_of is not None:
            levels = [self.difficulty_of(p) for p in self.val_set.problems]
            found.update(metrics.accuracy_by_level(levels, result.correct_per_problem))
            if greedy:
                by_level = metrics.accuracy_by_level(levels, result.greedy_per_problem)
                found.update({key.replace("val/accuracy/", "val/accuracy_greedy/"): v for key, v in by_level.items()})
        return found

    def _timing_metrics(self) -> dict[str, float]:
        return {f"timing_s/{stage}": seconds for stage, seconds in self.stages.seconds_since(self._step_mark).items()}

    def _loop_metrics(self) -> dict[str, float]:
        return {
            "loop/engine_switches": float(self.player.guard.switches),
            "loop/filter_kept_total": float(self.filter.state_dict().get("kept", 0)),
            **{f"loop/generated_tokens/{stage}": float(count) for stage, count in self.state.generated_tokens.items()},
        }

    def count_tokens(self, stage: str, count: int) -> None:
        """Add ``count`` generated tokens to ``stage``'s running total (``loop/generated_tokens/<stage>``)."""
        self.state.generated_tokens[stage] = self.state.generated_tokens.get(stage, 0) + count

    def _skipped_step(self) -> dict[str, float]:
        # Everything filtered out: no Player update, so the Player's score and Δt are unchanged (0); nothing to reward.
        self.state.delta_t_history.append(0.0)
        return {"val/delta_t": 0.0, "loop/skipped": 1.0, "coach/updated": 0.0, **self._timing_metrics()}

    def _log(self, data: dict[str, float], step: int) -> None:
        if self.logger is not None:
            self.logger.log(data=data, step=step)
