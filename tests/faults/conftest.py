"""Fault tests: real processes, a fault injected, and the figure each one measures — printed at
the end of the run (pytest's terminal summary), so every run of the suite reports them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

_FIGURES: list[str] = []


@pytest.fixture
def figure() -> Callable[[str], None]:
    """Report one measured figure of this fault test."""
    return _FIGURES.append


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FIGURES:
        terminalreporter.section("fault figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)
