"""What a synchronous standby costs Switchboard's hot path: a PostgreSQL primary with a streaming
standby (switchboard/standby.py, on private ports), and the same calls run against it with the
standby synchronous and asynchronous, alternately, on the same servers (a reload switches it).

Two figures per setting: one commit's round trip (a single-row INSERT, what every durable event
pays once), and the turn latency a caller meets (the caller's final transcript → the host's
`response.create`) over concurrent calls at conversational pace. A synchronous commit waits for
the standby to flush it: on one machine that is a local round trip and an fsync; across hosts,
add the network's round trip.

Last, the primary is killed and the standby promoted, and a round of calls runs on it through the
same multi-host URL. Run: `python -m bench.replication` (one JSON object on stdout).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg2

from bench.latency import load_script, measure, percentiles
from switchboard.services import LOCAL_REDIS, find_or_start_redis
from switchboard.stack import Stack
from switchboard.standby import PostgresPair

COMMITS = 500
CALLS = 6
TURNS = 6
ROUNDS = 2


def commit_ms(url: str, commits: int = COMMITS) -> dict[str, Any]:
    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE IF NOT EXISTS bench_commits (n bigint)")
            connection.commit()
            samples = []
            for n in range(commits):
                started = time.perf_counter()
                cursor.execute("INSERT INTO bench_commits VALUES (%s)", (n,))
                connection.commit()
                samples.append((time.perf_counter() - started) * 1000)
    finally:
        connection.close()
    return percentiles(samples)


def run(redis_url: str, root: Path) -> dict[str, Any]:
    pair = PostgresPair(root, synchronous=True)
    figures: dict[str, dict[str, list[float]]] = {
        "synchronous": {"commit_p50_ms": [], "turn_p50_ms": [], "turn_p99_ms": []},
        "asynchronous": {"commit_p50_ms": [], "turn_p50_ms": [], "turn_p99_ms": []},
    }
    try:
        with Stack(pair.url, redis_url, simulator_args=("--lenient",)) as stack:
            stack.start(workers=2)
            for _round in range(ROUNDS):
                for synchronous in (True, False):
                    pair.set_synchronous(synchronous)
                    name = "synchronous" if synchronous else "asynchronous"
                    commits = commit_ms(pair.server_url(pair.primary_port, "switchboard"))
                    turns = percentiles(measure(stack, load_script(TURNS), CALLS))
                    figures[name]["commit_p50_ms"].append(commits["p50_ms"])
                    figures[name]["turn_p50_ms"].append(turns["p50_ms"])
                    figures[name]["turn_p99_ms"].append(turns["p99_ms"])
                    print(f"bench: {name}: commit {commits}, turns {turns}", file=sys.stderr)
            # Then the failover itself, synchronous: the primary killed between two rounds of
            # calls, the standby promoted, and a round of calls on it through the same URL.
            pair.set_synchronous(True)
            pair.kill_primary()
            promoted_s = pair.promote()
            after = measure(stack, load_script(TURNS), CALLS)
            failover = {
                "promoted_in_s": round(promoted_s, 2),
                "turns_answered_after": len(after),
                "turns_expected_after": CALLS * TURNS,
                "turn_p50_after_ms": percentiles(after)["p50_ms"],
            }
    finally:
        pair.stop()
    medians = {
        name: {figure: round(statistics.median(values), 2) for figure, values in by_figure.items()}
        for name, by_figure in figures.items()
    }
    sync, asynchronous = medians["synchronous"], medians["asynchronous"]
    return {
        **medians,
        "commit_ratio": round(sync["commit_p50_ms"] / asynchronous["commit_p50_ms"], 2),
        "turn_p50_ratio": round(sync["turn_p50_ms"] / asynchronous["turn_p50_ms"], 2),
        "failover": failover,
        "calls": CALLS,
        "turns": TURNS,
        "rounds": ROUNDS,
    }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="switchboard-replication-") as folder:
        redis_url, stop_redis = find_or_start_redis(Path(folder) / "redis", LOCAL_REDIS, log=print)
        try:
            print(json.dumps(run(redis_url, Path(folder) / "pair")))
        finally:
            if stop_redis is not None:
                stop_redis()
