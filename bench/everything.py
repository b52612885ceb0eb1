"""`switchboard bench`: the latency bench and the capacity bench in one run, side by side.

Both run on the same services, one after the other, so their figures (and the floor each
measures) come from the same machine at the same time; `--json` prints one object,
`{"latency": {...}, "capacity": {...}, "summary": {...}}`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.capacity import capacity_figures
from bench.capacity import render as render_capacity
from bench.latency import latency_figures
from bench.latency import render as render_latency
from pipeline.config import Settings
from switchboard.services import resolve_services

# The targets set for this 2-core machine: the summary says how each run compares.
TARGETS = {
    "idle_p50_ms": 5.0,
    "idle_p99_ms": 10.0,
    "calls_100_p99_ms": 20.0,
    "held_calls": 500,
    "idle_vs_floor": 1.5,
}


def run_everything(
    settings: Settings, *, as_json: bool, load_calls: int, max_calls: int, save: Path | None = None
) -> int:
    log = lambda message: print(f"bench: {message}", file=sys.stderr, flush=True)  # noqa: E731
    services = resolve_services(settings.database_url, settings.redis_url, settings.data_dir, log=log)
    try:
        latency = latency_figures(services.database_url, services.redis_url, load_calls=load_calls, log=log)
        capacity = capacity_figures(services.database_url, services.redis_url, max_calls=max_calls, log=log)
    finally:
        services.stop()
    figures = {"latency": latency, "capacity": capacity, "summary": summary(latency, capacity)}
    if save is not None:
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(json.dumps(figures))
    if as_json:
        print(json.dumps(figures))
    else:
        print(
            "\n\n".join(
                (render_latency(latency), render_capacity(capacity), render_summary(figures["summary"]))
            )
        )
    return 0


def summary(latency: dict[str, Any], capacity: dict[str, Any]) -> dict[str, Any]:
    """Each target beside what this run measured."""
    idle = latency.get("idle") or {}
    at_100: dict[str, Any] = next(
        (level for level in capacity.get("levels", []) if level["calls"] == 100), {}
    )
    held = capacity.get("held") or {}
    measured = {
        "idle_p50_ms": idle.get("p50_ms"),
        "idle_p99_ms": idle.get("p99_ms"),
        "calls_100_p99_ms": at_100.get("p99_ms"),
        "held_calls": held.get("most_live_at_once"),
        "idle_vs_floor": (latency.get("ratios") or {}).get("idle_vs_floor"),
    }
    lost = sum(level.get("lost_events", 0) for level in [*capacity.get("levels", []), held] if level)
    rows = {}
    for name, target in TARGETS.items():
        value = measured[name]
        # held_calls is a minimum; every other target is a maximum.
        met = None if value is None else (value >= target if name == "held_calls" else value <= target)
        rows[name] = {"target": target, "measured": value, "met": met}
    rows["lost_events"] = {"target": 0, "measured": lost, "met": lost == 0}
    return rows


def render_summary(rows: dict[str, Any]) -> str:
    lines = ["targets (this run):"]
    for name, row in rows.items():
        verdict = {True: "met", False: "missed", None: "not measured"}[row["met"]]
        label = name.replace("_", " ")
        lines.append(f"  {label:22} target {row['target']:>7}  measured {row['measured']!s:>8}  {verdict}")
    return "\n".join(lines)
