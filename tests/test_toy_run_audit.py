"""The toy runs' audit (`benchmarks/toy_run_audit.py`): its counts over a hand-made run folder."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "toy_run_audit", Path(__file__).resolve().parents[1] / "benchmarks" / "toy_run_audit.py"
)
toy_run_audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(toy_run_audit)


def write_run(run: Path) -> None:
    steps = [
        {"step": 0, "data": {"val/accuracy": 0.2}},
        {"step": 1, "data": {"val/delta_t": 0.0, "coach/updated": 0.0}},
        {"step": 2, "data": {"val/delta_t": 0.05, "coach/updated": 1.0, "coach/actor/grad_norm": 3.0}},
        {"step": 3, "data": {"val/delta_t": -0.01, "coach/updated": 1.0, "coach/actor/grad_norm": 0.5}},
    ]
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in steps))
    archive = [
        {"text": "What is 7 - 3?", "valid": True, "pass_rate": 1.0, "kept": False, "drop_reason": "above_band"},
        {"text": "What is (7 - 3)?", "valid": True, "pass_rate": 0.625, "kept": True, "drop_reason": None},
        {"text": "What is ((2 * 4))?", "valid": True, "pass_rate": 0.0, "kept": False, "drop_reason": "no_answer"},
        {"text": "What is ((2 * 4))?", "valid": True, "pass_rate": 0.75, "kept": True, "drop_reason": None},
        {"text": "7 - 3 = 4", "valid": True, "pass_rate": 0.75, "kept": True, "drop_reason": None},
        {"text": "What is", "valid": False, "reject_reason": "no_question"},  # never rolled out
    ]
    (run / "problems").mkdir()
    (run / "problems" / "step_000001.jsonl").write_text("".join(json.dumps(row) + "\n" for row in archive))


def test_the_audit_counts_zero_delta_t_clipped_coach_updates_kept_pass_rates_and_levels(tmp_path):
    write_run(tmp_path / "run")
    figures = toy_run_audit.audit([tmp_path / "run"], clip=1.0)
    assert (figures["steps"], figures["delta_t_zero"], figures["coach_updates"], figures["clipped"]) == (3, 1, 2, 1)
    assert figures["grad_norm_median"] == pytest.approx(1.75)
    assert figures["groups"] == 5
    assert dict(figures["kept_pass_rates"]) == {0.625: 1, 0.75: 2}
    assert dict(figures["drop_reasons"]) == {"above_band": 1, "no_answer": 1}
    assert dict(figures["levels"]) == {0: 1, 1: 1, 2: 2, "other": 1}
    assert dict(figures["kept_levels"]) == {1: 1, 2: 1, "other": 1}
    text = toy_run_audit.format_audit(figures, 1.0, runs=1)
    assert "Δt = 0 on 1 steps" in text and "kept pass rates: 0.625: 1, 0.75: 2" in text
    assert "levels kept: 1: 1, 2: 1, other: 1" in text


def test_a_folder_that_is_no_run_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="is .* a run folder"):
        toy_run_audit.audit([tmp_path])
