"""Cumulative counters after a kill and a resume: ``loop/engine_switches`` goes on from the checkpoint, as an
uninterrupted run's would. The loop's real `fit`, `save` and `try_resume` run with a scripted Player (no Ray,
no model); each step only counts engine wakes on the shared guard."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import OmegaConf

from cpmobius.engine.sharing import EngineGuard
from cpmobius.loop import CoachPlayerLoop
from cpmobius.settings import load_settings
from cpmobius.validation import ValidationSet

WAKES_PER_STEP = {1: 3, 2: 5, 3: 4}  # engine wakes step k makes (attempts differ from step to step)


class SavedPlayer:
    """A policy with no model: answers every validation prompt alike, saves and loads an empty folder."""

    def __init__(self, guard: EngineGuard) -> None:
        self.guard, self.global_steps, self.generation_calls = guard, 0, 0

    def activate(self) -> None:
        pass

    def generate(self, prompts, n=1, validate=False, greedy=False):
        import torch

        return type("Batch", (), {"batch": {"response_mask": torch.ones(len(prompts) * n, 3)}})()

    def decode_responses(self, batch):
        rows = len(batch.batch["response_mask"])
        return ["\\boxed{1}"] * rows, [False] * rows

    def save(self, path: str) -> None:
        Path(path).mkdir(parents=True)

    def load(self, path: str, global_steps=None) -> None:
        self.global_steps = global_steps


def make_loop(run_dir: Path, total_steps: int) -> tuple[CoachPlayerLoop, list[tuple[int, dict]]]:
    cfg = OmegaConf.create(
        {
            "seed": 0,
            "trainer": {
                "default_local_dir": str(run_dir),
                "total_training_steps": total_steps,
                "save_freq": 1,
                "resume_mode": "auto",
            },
        }
    )
    settings = load_settings(
        OmegaConf.create(
            {"coach": {}, "filter": {}, "validation": {"greedy": True}, "player": {"n": 4, "answer_format": "template"}}
        )
    )
    guard = EngineGuard()  # one guard for both policies, as `build_loop` makes it
    coach, player = SavedPlayer(guard), SavedPlayer(guard)
    val_set = ValidationSet("v", ["0", "1"], ["q?", "q?"], ["1", "1"])
    loop = CoachPlayerLoop(cfg, settings, coach, player, val_set=val_set)
    logged: list[tuple[int, dict]] = []
    loop._log = lambda data, step: logged.append((step, data))

    def counted_step():
        guard.switches += WAKES_PER_STEP[loop.state.step + 1]
        return {}

    loop.step = counted_step
    return loop, logged


def switches_by_step(logged: list[tuple[int, dict]]) -> dict[int, float]:
    return {step: data["loop/engine_switches"] for step, data in logged if "loop/engine_switches" in data}


def test_engine_switches_after_a_kill_and_a_resume_equal_an_uninterrupted_runs(tmp_path):
    loop, logged = make_loop(tmp_path / "straight", 3)
    loop.fit()
    uninterrupted = switches_by_step(logged)
    assert uninterrupted == {1: 3.0, 2: 8.0, 3: 12.0}

    first, _ = make_loop(tmp_path / "killed", 1)
    first.fit()  # step 1 and its checkpoint
    first.player.guard.switches += WAKES_PER_STEP[2]  # step 2 ran, then SIGKILL before its checkpoint
    resumed, resumed_logged = make_loop(tmp_path / "killed", 3)  # a new process: a new guard at 0
    resumed.fit()
    assert switches_by_step(resumed_logged) == {2: 8.0, 3: 12.0}
    saved = json.loads((tmp_path / "killed" / "global_step_3" / "loop_state.json").read_text())
    assert saved["engine_switches"] == 12


def test_a_checkpoint_without_the_counter_resumes_it_from_zero(tmp_path):
    from cpmobius.loop_state import LoopState

    saved = {key: value for key, value in LoopState(step=2).__dict__.items() if key != "engine_switches"}
    assert LoopState.from_saved(saved).engine_switches == 0
