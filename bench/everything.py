"""`switchboard bench`: the latency bench and the capacity bench in one run, side by side.

Both run on the same services, one after the other, so their figures (and the floor each
measures) come from the same machine at the same time; `--json` prints one object,
`{"latency": {...}, "capacity": {...}, "summary": {...}}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.capacity import capacity_figures
from bench.capacity import render as render_capacity
from bench.latency import latency_figures
from bench.latency import render as render_latency
from bench.running import Log, on_services, report
from pipeline.config import Settings

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
    def both(database_url: str, redis_url: str, log: Log) -> dict[str, Any]:
        latency = latency_figures(database_url, redis_url, load_calls=load_calls, log=log)
        capacity = capacity_figures(database_url, redis_url, max_calls=max_calls, log=log)
        return {"latency": latency, "capacity": capacity, "summary": summary(latency, capacity)}

    figures = on_services(settings, both)
    if save is not None:
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(json.dumps(figures))
    return report(figures, as_json=as_json, render=render)


def render(figures: dict[str, Any]) -> str:
    return "\n\n".join(
        (
            render_latency(figures["latency"]),
            render_capacity(figures["capacity"]),
            render_summary(figures["summary"]),
        )
    )


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
    # A phone call's admission (webhook → accept), measured by the latency bench.
    rows.update(latency.get("admission_targets") or {})
    return rows


def render_summary(rows: dict[str, Any]) -> str:
    lines = ["targets (this run):"]
    for name, row in rows.items():
        verdict = {True: "met", False: "missed", None: "not measured"}[row["met"]]
        label = name.replace("_", " ")
        lines.append(f"  {label:22} target {row['target']:>7}  measured {row['measured']!s:>8}  {verdict}")
    return "\n".join(lines)
