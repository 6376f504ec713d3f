"""The command lines' `--help`: every option says what it does, each default is printed once, and
`python -m cpmobius.plots` answers `--help` and a missing run with one line instead of a traceback."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def _eval_parser() -> argparse.ArgumentParser:
    from cpmobius.eval.cli import build_parser

    return build_parser()


def _grading_parser() -> argparse.ArgumentParser:
    from cpmobius.grading.__main__ import build_parser

    return build_parser()


@pytest.mark.parametrize("make_parser", [_eval_parser, _grading_parser], ids=["eval", "grading"])
def test_every_option_has_help_and_one_default(make_parser):
    parser = make_parser()
    for action in _options(parser):
        assert action.help and len(action.help) > 8, f"{action.option_strings or action.dest}: no help text"
    text = parser.format_help()
    # argparse wraps lines: compare on the text with white space collapsed.
    flat = re.sub(r"\s+", " ", text)
    assert not re.search(r"\(default: [^)]*\)\s*\(default:", flat), "a default printed twice"
    assert "(default: None)" not in flat and "(default: [])" not in flat


def test_eval_help_names_the_builtin_demo_and_where_data_comes_from():
    flat = re.sub(r"\s+", " ", _eval_parser().format_help())
    assert "`demo` is built in" in flat and "scripts/fetch_benchmarks.py" in flat


ENTRY_POINTS = [
    "cpmobius.main",
    "cpmobius.eval",
    "cpmobius.plots",
    "cpmobius.grading",
    "cpmobius.run_report",
    "cpmobius.models",
    "cpmobius.warmup",
]
# Runs a module with arguments (default --help) as `python -m` does, then names the heavy libraries it imported.
HELP_PROBE = r"""
import contextlib, io, runpy, sys
sys.argv = [sys.argv[1], *(sys.argv[2:] or ["--help"])]
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as stop:
    code = stop.code or 0
heavy = sorted(name for name in ("torch", "verl", "ray", "transformers", "vllm") if name in sys.modules)
print(out.getvalue() + "\n---\n" + repr((code, heavy)))
"""


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_help_is_ours_exits_zero_and_loads_no_heavy_library(module):
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, module], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    text, _, outcome = result.stdout.rpartition("\n---\n")
    assert text.startswith(f"usage: python -m {module}"), text[:200]
    assert eval(outcome) == (0, []), outcome  # no torch, verl, Ray: the help comes at once


def test_plots_on_a_folder_without_metrics_is_one_line_and_exit_2(tmp_path, capsys):
    from cpmobius.plots import main

    assert main([str(tmp_path / "no_run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no metrics.jsonl rows in") and err.count("\n") == 1


@pytest.mark.parametrize("override", ["filter.quota=0", "player.vote=exact", "trainer.total_training_steps=0"])
def test_a_config_error_comes_before_verl_ray_or_torch_is_imported(override):
    result = subprocess.run(
        [sys.executable, "-c", HELP_PROBE, "cpmobius.main", override],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    _, _, outcome = result.stdout.rpartition("\n---\n")
    assert result.stderr.startswith(f"config error: {override.split('=')[0]}"), result.stderr[-2000:]
    assert eval(outcome) == (2, []), outcome


def test_the_loggers_checked_without_verl_are_ones_verl_knows():
    from verl.utils.tracking import Tracking

    from cpmobius.config import COMMON_LOGGERS

    assert COMMON_LOGGERS <= set(Tracking.supported_backend)
