"""10,000 broken provider frames injected into a live call, and thousands of broken API
requests: no process crashes, each bad frame is a durable incident (or, for an unknown type, a
logged event nothing acts on), each bad request a typed 4xx, and the good events and requests
around them are unaffected."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from typing import Any

from models.db import connect
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.faults.fuzz import bad_frames, bad_requests
from tests.support.http import raw_request

FRAMES = 10_000
REQUESTS = 3_000
CHUNK = 500
LINES = [f"Question {n}: where is order {4410 + n}?" for n in range(4)]


def _inject(stack: Stack, call_id: str, frames: list[Any]) -> None:
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/calls/{call_id}/inject",
        data=json.dumps({"frames": frames}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read())["injected"] == len(frames)


def _count(database: Any, sql: str, *parameters: Any) -> Any:
    return database.execute_sql(sql, parameters).fetchall()


def test_ten_thousand_broken_frames_and_thousands_of_broken_requests(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    corpus = bad_frames(seed=5, count=FRAMES)
    database = connect(services.database_url)
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-fuzz") as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        set_script(
            stack,
            {
                "name": "fuzzed-call",
                "timing": {
                    "delta_interval_ms": 10,
                    "chars_per_delta": 16,
                    "speech_ms": 200,
                    "response_wait_ms": 60000,
                },
                "caller": [{"say": line, "after_ms": 1200} for line in LINES]
                + [{"hangup": True, "after_ms": 300}],
                "model": [{"say": f"Order {4410 + n} ships on day {n + 1}."} for n in range(len(LINES))],
            },
        )
        session = client.create_session("You are the order desk.")
        call_id = client.connect(session["id"])["call_id"]
        started = time.monotonic()

        def inject_all() -> None:
            for start in range(0, len(corpus.frames), CHUNK):
                _inject(stack, call_id, corpus.frames[start : start + CHUNK])
                time.sleep(0.2)

        injector = threading.Thread(target=inject_all)
        injector.start()
        record = client.wait_for_status(session["id"], timeout_s=180)
        injector.join(60)

        # The good events were unaffected: every line heard and answered, the call ended normally.
        assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up")
        said = [t["text"] for t in record["transcript"] if t["role"] == "user"]
        answered = [t["text"] for t in record["transcript"] if t["role"] == "assistant"]
        assert said == LINES and answered == [f"Order {4410 + n} ships on day {n + 1}." for n in range(4)]
        sim = simulator_call(stack, call_id)
        assert [entry["control"]["type"] for entry in sim["controls"]] == ["session.update"] + [
            "response.create"
        ] * 4

        # Each refused frame is a durable incident of the session; each unknown type is logged.
        def incidents() -> int:
            [(count,)] = _count(
                database,
                "SELECT count(*) FROM incidents WHERE session_id = %s"
                " AND code IN ('malformed_provider_frame', 'oversized_provider_frame')",
                session["id"],
            )
            return int(count)

        deadline = time.monotonic() + 120
        while incidents() < corpus.refused and time.monotonic() < deadline:
            time.sleep(0.5)
        assert incidents() == corpus.refused
        logged = Counter(
            dict(
                _count(
                    database,
                    "SELECT kind, count(*) FROM session_events WHERE session_id = %s GROUP BY kind",
                    session["id"],
                )
            )
        )
        assert {kind: logged[kind] for kind in corpus.unknown_types} == dict(corpus.unknown_types)
        frames_s = time.monotonic() - started

        # Broken API requests: a typed 4xx each, never a 5xx; good requests in between still work.
        spare = client.create_session("A session for the fuzzed requests.")
        statuses: Counter[int] = Counter()
        requests_started = time.monotonic()
        for index, bad in enumerate(
            bad_requests(seed=6, count=REQUESTS, token=stack.api_token, session_id=spare["id"])
        ):
            status, body = raw_request(stack.api_url, bad.method, bad.path, bad.body, bad.headers)
            statuses[status] += 1
            assert status < 500, (status, bad, body)
            if status >= 400:
                assert isinstance(body, dict) and body["error"]["code"], (status, bad, body)
            if index % 500 == 0:
                assert client.create_session("Still answering?")["status"] == "created"
        requests_s = time.monotonic() - requests_started
        for process in [stack.gateway, stack.simulator, *stack.workers]:
            assert process is not None and process.popen.poll() is None, (
                f"{process.name if process else '?'} died"
            )

    figure(
        f"fuzz: {FRAMES} broken frames into a live call in {frames_s:.1f} s ({corpus.refused} refused → "
        f"{corpus.refused} incidents, {sum(corpus.unknown_types.values())} unknown types logged), "
        f"the call's 4 turns all answered; {REQUESTS} broken API requests in {requests_s:.1f} s, "
        f"no 5xx, every refusal a typed error ({_tally(statuses)}); no process died"
    )


def _tally(statuses: Counter[int]) -> str:
    return ", ".join(f"{code}×{count}" for code, count in sorted(statuses.items()))
