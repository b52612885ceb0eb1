"""The code stays checkable: ruff's rules and mypy --strict (with the scoped overrides in
pyproject.toml) pass on every package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["pipeline", "models", "workers", "gateway", "simulator", "switchboard", "bench"]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_ruff_finds_nothing() -> None:
    """ruff check passes on the whole tree."""
    finished = _run(sys.executable, "-m", "ruff", "check", ".")
    assert finished.returncode == 0, finished.stdout + finished.stderr


def test_mypy_strict_finds_nothing() -> None:
    """mypy --strict passes on every package."""
    finished = _run(sys.executable, "-m", "mypy", *PACKAGES)
    assert finished.returncode == 0, finished.stdout + finished.stderr
