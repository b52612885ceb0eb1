"""Waiting in tests for what another process does: poll until it holds, or fail saying what."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], what: str, timeout_s: float = 20.0, every_s: float = 0.05) -> Any:
    """The first truthy value of `predicate()`, or an AssertionError naming `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out waiting for {what}")
