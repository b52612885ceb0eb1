"""The gateway's and the worker's CPU per call turn, idle (one call) and under load (concurrent
calls), on one stack: the figure an A/B of two builds compares (run it in each build's
checkout, alternating). Prints one JSON line.

    python -m bench.cpu_per_turn [calls]
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import psutil

from bench.latency import IDLE_TURNS, LOAD_TURNS, METRICS_ON, idle_script, load_script, measure, percentiles
from bench.running import Log, on_services
from models.db import connect
from models.migrate import migrate
from pipeline.platform.config import settings_from
from switchboard.stack import Stack

LOAD_CALLS = 20


def cpu_per_turn(database_url: str, redis_url: str, log: Log, calls: int = LOAD_CALLS) -> dict[str, Any]:
    migrate(connect(database_url))
    figures: dict[str, Any] = {}
    with Stack(database_url, redis_url, extra_env=METRICS_ON, simulator_args=("--lenient",)) as stack:
        stack.start(workers=1)
        assert stack.gateway is not None
        processes = {
            "gateway": psutil.Process(stack.gateway.popen.pid),
            "worker": psutil.Process(stack.workers[0].popen.pid),
        }
        for name, script, count, turns in (
            ("idle", idle_script(IDLE_TURNS), 1, IDLE_TURNS),
            ("load", load_script(LOAD_TURNS), calls, LOAD_TURNS * calls),
        ):
            log(f"{name}: {count} call(s), {turns} turns in all")
            before = {each: _cpu_s(process) for each, process in processes.items()}
            latencies = percentiles(measure(stack, script, count))
            figures[name] = {
                "calls": count,
                "p50_ms": latencies["p50_ms"],
                "p99_ms": latencies["p99_ms"],
                **{
                    f"{each}_cpu_ms_per_turn": round((_cpu_s(process) - before[each]) * 1000 / turns, 3)
                    for each, process in processes.items()
                },
            }
    return figures


def _cpu_s(process: psutil.Process) -> float:
    # User and system time, which /proc counts in 10 ms ticks.
    times = process.cpu_times()
    return float(times.user + times.system)


if __name__ == "__main__":
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else LOAD_CALLS
    figures = on_services(
        settings_from(os.environ), lambda db, redis, log: cpu_per_turn(db, redis, log, calls)
    )
    print(json.dumps(figures))
