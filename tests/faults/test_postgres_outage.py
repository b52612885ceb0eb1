"""PostgreSQL away far longer than Dramatiq's retries last (about 6 s) while calls talk: every
call's message waits for the database (pipeline.platform.outages) instead of becoming a dead letter, and
every line the callers said during the outage is answered once it is back.

The suite stops the database for 20 s; `FAULT_POSTGRES_DOWN_S=60` runs the same
test for the minute docs/reliability.md reports (a soak, by hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from switchboard.client import Client
from switchboard.stack import Stack
from tests.faults.calls import place, verify
from tests.faults.servers import PrivatePostgres, PrivateRedis

CALLS = 8
TURNS = 4
CALL_ACTORS = {
    "admission_event",
    "transcript_event",
    "tool_event",
    "compaction_event",
    "session_timer",
    "take_over_session",
}
DOWN_S = float(os.environ.get("FAULT_POSTGRES_DOWN_S", "20"))


def test_postgresql_away_longer_than_any_retry_turns_no_event_into_a_dead_letter(
    private: tuple[PrivatePostgres, PrivateRedis], figure: Callable[[str], None]
) -> None:
    postgres, redis_server = private
    with Stack(
        postgres.url,
        redis_server.url,
        namespace="faults-pg-away",
        extra_env={"SWITCHBOARD_WORKER_HEALTH_PORT": "0"},
    ) as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        # A caller waits for an answer longer than the database is away.
        calls = place(stack, client, CALLS, TURNS, wait_ms=int(DOWN_S * 1000) + 60_000)
        outage = threading.Thread(target=lambda: (time.sleep(1.5), postgres.down_for(DOWN_S)), daemon=True)
        outage.start()
        # What a worker's readiness probe says meanwhile.
        probed: list[str] = []
        prober = threading.Thread(
            target=_probe_while, args=(stack.workers[0].ready["health"], outage, probed), daemon=True
        )
        prober.start()
        outcome = verify(stack, client, calls, TURNS, timeout_s=DOWN_S + 180)
        outage.join(DOWN_S + 60)
        assert not outage.is_alive()
        prober.join(10)
        assert "database_unreachable" in probed, probed
        assert _readiness(stack.workers[0].ready["health"]) == "ready"
        waited = [
            line for worker in stack.workers for line in worker.lines if "the message waits for it" in line
        ]
        assert waited, "no message found the database away: the outage proved nothing"
        letters = subprocess.run(
            [sys.executable, "-m", "switchboard", "dlq", "list", "--json"],
            env=stack.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        # No message of a call became a dead letter, nor did the API's reads made meanwhile (the
        # callers' status polls): a read that finds the database away is answered 503 at once.
        dead = [letter["actor"] for letter in json.loads(letters.stdout)]
        assert [actor for actor in dead if actor in CALL_ACTORS] == [], "a call's message is a dead letter"
        assert dead == [], f"dead letters left by the outage: {dead}"
        lines = [line for worker in stack.workers for line in worker.lines]
        assert any("a read found the database away" in line for line in lines)
    figure(
        f"PostgreSQL stopped {DOWN_S:.0f} s during {CALLS} calls × {TURNS} turns: {len(waited)} messages "
        f"waited for it, 0 dead letters, 0 events lost, 0 controls twice, all complete; "
        f"turn stall p50 {outcome.median_ms:.0f} ms, longest {outcome.longest_ms:.0f} ms"
    )


def _readiness(port: str) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as answer:
            return str(json.loads(answer.read())["status"])
    except urllib.error.HTTPError as error:
        return str(json.loads(error.read())["status"])


def _probe_while(port: str, outage: threading.Thread, probed: list[str]) -> None:
    while outage.is_alive():
        probed.append(_readiness(port))
        time.sleep(0.5)
