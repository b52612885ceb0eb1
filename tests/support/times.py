"""Every point in time in an answer is RFC 3339 UTC (pipeline.platform.timestamps): a walk of its JSON."""

from __future__ import annotations

from typing import Any

from pipeline.platform.timestamps import is_rfc3339


def _is_a_moment(key: str) -> bool:
    return key in ("at", "timestamp") or key.endswith("_at")


def _moments(value: Any, where: str) -> list[tuple[str, Any]]:
    """Every (path, value) of a key naming a point in time. A logged payload is the provider's
    frame or the host's input as logged: only the stamps the gateway adds (`heard`) are ours."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{where}.{key}"
            if key == "payload" and isinstance(inner, dict):
                found += _moments(inner.get("heard"), f"{path}.heard")
            elif _is_a_moment(key) and not isinstance(inner, dict | list):
                found.append((path, inner))
            else:
                found += _moments(inner, path)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _moments(inner, f"{where}[{index}]")
    return found


def assert_times_are_rfc3339(answers: dict[str, Any]) -> list[str]:
    """Each point in time in these answers is RFC 3339 UTC or null (one not come yet); the
    paths of those checked, of which there are some."""
    moments = _moments(answers, "")
    wrong = [(path, value) for path, value in moments if value is not None and not is_rfc3339(value)]
    assert wrong == []
    written = [path for path, value in moments if value is not None]
    assert written, "no point in time was found to check"
    return written
