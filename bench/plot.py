"""Draw the capacity figures (`switchboard bench --save F`, or `bench capacity --json`) as a
PNG: turn latency p50/p95/p99 against concurrent calls, with the 50 ms line the sweep stops
at, and the held calls (500 calls at a slower pace) as points of their own."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.capacity import P99_LIMIT_MS, render


def plot(figures: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no screen here
    import matplotlib.pyplot as plt

    figures = figures.get("capacity", figures)  # the whole run's object, or capacity's alone
    levels = list(figures["levels"])
    # The one-worker scaling run is a load level too (the sweep may have stopped below it).
    seen = {level["calls"] for level in levels}
    levels += [row for row in figures.get("scaling", []) if row["workers"] == 1 and row["calls"] not in seen]
    levels.sort(key=lambda level: level["calls"])
    calls = [level["calls"] for level in levels]
    figure, axes = plt.subplots(figsize=(7, 4.2), dpi=120)
    for key, label, style in (("p50_ms", "p50", "o-"), ("p95_ms", "p95", "s--"), ("p99_ms", "p99", "^-")):
        axes.plot(calls, [level[key] for level in levels], style, label=label)
    held = figures.get("held")
    if held and held.get("p99_ms") is not None:
        calls.append(held["calls"])
        pace = "a caller line every 20 s"
        axes.plot([held["calls"]], [held["p50_ms"]], "kD", label=f"{held['calls']} held calls ({pace}), p50")
        axes.plot([held["calls"]], [held["p99_ms"]], "rD", label=f"{held['calls']} held calls ({pace}), p99")
    axes.axhline(P99_LIMIT_MS, color="grey", linewidth=0.8, linestyle=":", label=f"{P99_LIMIT_MS:.0f} ms")
    axes.set_xscale("log")
    axes.set_xticks(calls, [str(c) for c in calls])
    axes.set_xlabel("concurrent calls (one gateway, one worker process, 2 cores)")
    axes.set_ylabel("caller's final → response.create (ms)")
    axes.set_title("Switchboard: event → control latency against load")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    figure.savefig(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m bench.plot FIGURES.json OUT.png", file=sys.stderr)
        return 2
    figures = json.loads(Path(argv[0]).read_text())
    print(render(figures.get("capacity", figures)))
    plot(figures, Path(argv[1]))
    print(f"plot: {argv[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
