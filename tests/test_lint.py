"""The tree passes ruff's lint and format checks (configured in pyproject.toml: line length 120).

Fix with ``ruff check --fix . && ruff format .``; ruff comes with the test extra (``pip install -e ".[test]"``).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed (test extra)")


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_passes(command):
    result = subprocess.run([sys.executable, "-m", "ruff", *command, "."], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff {' '.join(command)} .:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"
