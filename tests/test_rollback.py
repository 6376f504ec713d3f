"""The released Player rollback: the running best starts at V₀, and Δt restarts from a fresh measurement.

The loop's real `fit`, `validate` and `maybe_roll_back` run with a fake Player whose validation
accuracy is scripted; only the Coach/filter/update part of a step is replaced by "the Player's
weights became w".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from stand_ins import ScriptedPolicy

from cpmobius import checkpoint
from cpmobius.loop import CoachPlayerLoop
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet

PROBLEMS = 20  # validation accuracy moves in steps of 0.05


class ScriptedPlayer(ScriptedPolicy):
    """A Player whose weights are one number w: it answers round(w·20) of the 20 problems right; its checkpoints
    hold w. ``noise`` holds extra accuracy for the next validation passes (a lucky or unlucky sample)."""

    def __init__(self, weight: float) -> None:
        super().__init__(self.answers)
        self.weight, self.noise = weight, []
        self.loads: list[float] = []

    def generate(self, prompts, n=1, validate=False, greedy=False):
        accuracy = self.weight + (self.noise.pop(0) if self.noise else 0.0)
        self.right = round(accuracy * PROBLEMS)  # of this pass's rows, in order
        return super().generate(prompts, n, validate, greedy)

    def answers(self, prompt: str, index: int) -> list[str]:
        return ["\\boxed{1}" if index < self.right else "\\boxed{0}"]

    def save(self, path: str) -> None:
        Path(path).mkdir(parents=True)
        (Path(path) / "w.json").write_text(json.dumps(self.weight))

    def load(self, path: str, global_steps=None) -> None:
        self.weight = json.loads((Path(path) / "w.json").read_text())
        self.loads.append(self.weight)


def make_loop(tmp_path, weights: list[float], noise: dict[int, float] | None = None, patience: int = 2):
    cfg = OmegaConf.create(
        {
            "trainer": {
                "default_local_dir": str(tmp_path),
                "total_training_steps": len(weights),
                "save_freq": 0,
                "resume_mode": "disable",
            }
        }
    )
    settings = load_settings(
        OmegaConf.create(
            {
                "coach": {},
                "filter": {},
                "validation": {"greedy": True},
                # the scripted Player has no tokenizer: its prompts carry no answer-format instruction
                "player": {
                    "n": 4,
                    "answer_format": "template",
                    "rollback": {"enabled": True, "patience": patience, "begin_step": 0},
                },
            }
        )
    )
    player = ScriptedPlayer(0.5)
    coach = ScriptedPlayer(0.0)
    val_set = ValidationSet("v", [str(i) for i in range(PROBLEMS)], ["q?"] * PROBLEMS, ["1"] * PROBLEMS)
    loop = CoachPlayerLoop(cfg, settings, coach, player, val_set=val_set)
    logged = []
    loop.save = lambda: None
    loop._log = lambda data, step: logged.append((step, data))

    def scripted_step():
        player.weight = weights[loop.state.step]
        player.noise = [noise.get(loop.state.step, 0.0)] if noise else []
        delta_t, val_metrics = loop.validate()
        return {**val_metrics, **loop.maybe_roll_back(val_metrics["val/accuracy"]), "val/delta_t": delta_t}

    loop.step = scripted_step
    return loop, player, logged


def test_the_running_best_starts_at_the_initial_score(tmp_path):
    # V₀ = 0.50; the Player only gets worse: 0.45, 0.40. With patience 2 it must go back to the
    # initial Player (the release's running best starts at V₀). With an empty start, step 1's 0.45
    # would have become "best" and the rollback would restore a worse Player.
    loop, player, logged = make_loop(tmp_path, [0.45, 0.40])
    loop.fit()
    assert logged[0][1]["val/accuracy"] == pytest.approx(0.50)
    assert player.loads == [0.5]  # restored the initial weights
    assert loop.state.rollbacks == 1 and loop.state.best_val == pytest.approx(0.50)
    assert checkpoint.read_best_record(tmp_path / "best_player") == {"score": 0.5, "step": 0}


def test_no_rollback_while_the_player_improves(tmp_path):
    loop, player, _ = make_loop(tmp_path, [0.55, 0.60, 0.65])
    loop.fit()
    assert player.loads == [] and loop.state.best_val == pytest.approx(0.65)


def test_delta_t_restarts_from_a_fresh_measurement_of_the_restored_player(tmp_path):
    # Step 1: weights 0.55, but a lucky pass measures 0.65 → best_val 0.65 (the max of noisy passes).
    # Steps 2–3 fall to 0.45, 0.40 → rollback to the 0.55 weights, re-measured at 0.55 (no luck now).
    # Step 4 keeps the restored weights (0.55): Δt must be 0.55 − 0.55 = 0, not 0.55 − 0.65 = −0.10.
    loop, player, logged = make_loop(tmp_path, [0.55, 0.45, 0.40, 0.55], noise={0: 0.10})
    loop.fit()
    assert player.loads == [0.55] and loop.state.best_val == pytest.approx(0.65)
    rollback_step = dict(logged)[3]
    assert rollback_step["player/restored_val"] == pytest.approx(0.55)
    assert dict(logged)[4]["val/delta_t"] == pytest.approx(0.0)
    assert loop.state.delta_t_history == pytest.approx([0.15, -0.20, -0.05, 0.0])


def test_patience_counts_ties_as_non_improving_and_rolls_back_on_the_next_drop(tmp_path):
    # Released `==` test: if the patience-th non-improving step ties the best, the counter passes the
    # patience and no rollback ever happens until the next improvement. Ours (>=) rolls back at the
    # next step that is below the best.
    loop, player, _ = make_loop(tmp_path, [0.50, 0.50, 0.45], patience=2)
    loop.fit()
    assert player.loads == [0.5] and loop.state.rollbacks == 1


def test_a_broken_best_copy_is_never_loaded_and_the_run_goes_on(tmp_path, capsys):
    # As the first test, but the best copy's weights file is rewritten after it was saved (a damaged disk,
    # another hand): its manifest no longer matches, so the rollback is skipped and nothing of it is read.
    loop, player, logged = make_loop(tmp_path, [0.45, 0.40, 0.35])
    real_step = loop.step

    def damaged_step():
        if loop.state.step == 1:
            (tmp_path / "best_player" / "w.json").write_text("0.9")  # "0.5" saved: same size, other bytes
        return real_step()

    loop.step = damaged_step
    loop.fit()
    assert player.loads == [] and loop.state.rollbacks == 0
    assert dict(logged)[2]["player/rollback_skipped"] == 1.0
    out = capsys.readouterr().out
    assert "no rollback: the best Player's copy is broken" in out and "w.json does not match its SHA-256" in out
