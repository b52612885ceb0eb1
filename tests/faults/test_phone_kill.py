"""kill -9 of workers while phone calls ring at the SIP front door. The kill that matters lands
after a worker committed a call's row and session under its claim and before the gateway heard
the decision (so before the provider's accept): the accept then comes from the dead worker's
message run again (the same claim, the same decision), once, never twice, never not at all.

That window is a millisecond or two wide, and a kill at random almost never lands in it. So
each kill is aimed: once a worker has recorded a delivery of the call announced last, Redis's
writes are paused (CLIENT PAUSE WRITE), and the worker deciding the call commits it and then
waits on Redis to reply; if the call is committed and not accepted, both workers are killed
there (the one holding it is one of them), else one at random. Then Redis goes on, and
replacements start."""

from __future__ import annotations

import contextlib
import random
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from models.db import connect
from switchboard.client import ApiError, Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.faults.servers import PrivateRedis
from tests.support.phone import ring

CALLS = 30
# The ringing goes on past CALLS, up to this many, until the faults it is after have happened.
MOST_CALLS = 3 * CALLS
# Every third call is also delivered 3 more times at once (a provider that delivers twice).
DUPLICATED_EVERY = 3
DUPLICATES = 3
KILLS_AT_MOST = 30
# The kills the ringing outlasts, one of them caught between a commit and its accept: it rings
# on until they happened, however slow the machine is, instead of hoping it is quick enough.
KILLS_WHILE_RINGING = 3
NUMBER = "+18005550090"
# Spread over a few seconds, so the burst outlasts several kills (a replacement worker takes
# about a second to start, and the killer waits for it).
RING_GAP_S = (0.1, 0.3)
# A kill waits this long for the next call to be announced, and then for a worker to record
# its delivery (a call is recorded, decided and accepted about 12 ms after it is announced).
AIM_WAIT_S = 1.0
# Long enough for a worker deciding a call when Redis paused to commit it (and block on Redis).
PAUSED_S = 0.15
# A delivery slower than this waited on a dead worker (its heartbeat timeout plus a sweep);
# one no worker died under is answered in well under a second.
STALLED_S = 2.0
# A kill's stall is about 3.5 s; a delivery's reply timeout is 10 s; the provider backs off.
SETTLE_TIMEOUT_S = 60.0
# The caller hangs up soon after the sideband opens, so every accepted call ends by itself.
SCRIPT: dict[str, Any] = {"name": "ring", "caller": [{"hangup": True, "after_ms": 1_500}], "model": []}


def _answered_2xx(stack: Stack, call_id: str) -> bool:
    """The provider stopped delivering: its first delivery (or a retry of it) was answered 2xx."""
    log = simulator_call(stack, call_id)
    return any(200 <= d["status"] < 300 for d in log["deliveries"])


def _recorded(database: Any, call_id: str) -> None:
    """Wait (a little) until a worker recorded a delivery of the call: it is deciding it now.
    Looked for without a pause between looks, as the decision takes only a few milliseconds."""
    deadline = time.monotonic() + AIM_WAIT_S
    while time.monotonic() < deadline:
        found = database.execute_sql(
            "SELECT 1 FROM webhook_deliveries WHERE call_id = %s", (call_id,)
        ).fetchone()
        if found:
            return


def _committed_not_accepted(stack: Stack, database: Any, call_id: str) -> bool:
    """The call's row and session are committed under a claim, and the provider has not
    accepted it: the decision is in the worker that made it (Redis is paused)."""
    row = database.execute_sql(
        "SELECT action = 'accept' AND claimed_by IS NOT NULL FROM phone_calls WHERE call_id = %s",
        (call_id,),
    ).fetchone()
    return bool(row and row[0]) and not simulator_call(stack, call_id)["accepts"]


def _read(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A read through a worker; 503 while the worker that took it is dead and not yet replaced."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        try:
            return read()
        except ApiError as error:
            if error.status != 503 or time.monotonic() > deadline:
                raise


def _wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_workers_killed_while_phone_calls_ring_each_call_is_accepted_once(
    services: Services, namespace: str, tmp_path: Path, figure: Callable[[str], None]
) -> None:
    """Two workers; every 0.2 to 0.6 s a kill -9 aimed at a call being decided (see above), the
    dead replaced, while 30 phone calls ring (every third delivered 4 times at once; more ring
    until three kills happened and one was caught between a commit and its accept). Each call
    is accepted exactly once at the provider, with one session that ends; its webhook is
    finally answered 2xx."""
    ringer_chance, killer_chance = random.Random(30), random.Random(31)
    # A Redis of the test's own: pausing it pauses nobody else.
    redis_server = PrivateRedis(tmp_path / "redis")
    pauser = redis.Redis.from_url(redis_server.url)
    stack = Stack(services.database_url, redis_server.url, namespace=f"{namespace}-faultphone")
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(redis_server.stop)
        cleanup.callback(pauser.close)
        cleanup.enter_context(stack)
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        set_script(stack, SCRIPT)
        client.add_route(NUMBER, {"instructions": "Be brief."})
        database = connect(services.database_url)

        done = threading.Event()
        rung = threading.Event()
        call_ids: list[str] = []
        kills: list[str] = []
        caught: list[str] = []

        def killer() -> None:
            while not done.wait(killer_chance.uniform(0.2, 0.6)) and len(kills) < KILLS_AT_MOST:
                rung.clear()
                aimed_at = call_ids[-1] if rung.wait(AIM_WAIT_S) else None
                if aimed_at is not None:
                    _recorded(database, aimed_at)
                pauser.execute_command("CLIENT", "PAUSE", 2_000, "WRITE")
                try:
                    time.sleep(PAUSED_S)
                    if aimed_at is not None and _committed_not_accepted(stack, database, aimed_at):
                        caught.append(aimed_at)
                        victims = stack.workers[-2:]
                    else:
                        victims = [killer_chance.choice(stack.workers[-2:])]
                    for victim in victims:
                        victim.kill()
                        kills.append(victim.name)
                finally:
                    pauser.execute_command("CLIENT", "UNPAUSE")
                for _ in victims:
                    stack.add_worker()

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        started = time.monotonic()
        try:
            index = 0
            while index < CALLS or ((len(kills) < KILLS_WHILE_RINGING or not caught) and index < MOST_CALLS):
                duplicates = DUPLICATES if index % DUPLICATED_EVERY == 0 else 0
                call_ids.append(ring(stack, NUMBER, duplicates=duplicates))
                rung.set()
                time.sleep(ringer_chance.uniform(*RING_GAP_S))
                index += 1
            # The kills go on until every call's ringing is over (its webhook answered 2xx).
            _wait_for(lambda: all(_answered_2xx(stack, c) for c in call_ids), "every webhook answered 2xx")
        finally:
            done.set()
            thread.join(30)
        ringing_s = time.monotonic() - started

        records: dict[str, dict[str, Any]] = {}
        logs: dict[str, dict[str, Any]] = {}
        for call_id in call_ids:
            _wait_for(
                lambda call_id=call_id: _read(lambda: client.phone_call(call_id))["outcome"] is not None,
                f"the answer of {call_id} to be recorded",
            )
            record = _read(lambda call_id=call_id: client.phone_call(call_id))
            assert (record["action"], record["outcome"]) == ("accept", "accepted"), record
            assert record["session_id"], record
            session = client.wait_for_status(record["session_id"], timeout_s=SETTLE_TIMEOUT_S)
            assert session["status"] == "ended", (call_id, session)
            records[call_id] = record
            logs[call_id] = simulator_call(stack, call_id)
        # When each call's claim (the one it was accepted under) was committed with its session.
        claimed_at = dict(
            database.execute_sql(
                "SELECT call_id, extract(epoch FROM claimed_at)::float FROM phone_calls"
                " WHERE call_id = ANY(%s)",
                (call_ids,),
            ).fetchall()
        )
        # A decision a kill cut short is rolled back whole: no session without its call.
        [[sessions]] = database.execute_sql(
            "SELECT count(*) FROM sessions WHERE namespace = %s", (stack.namespace,)
        ).fetchall()

    twice = [c for c, log in logs.items() if len(log["accepts"]) > 1]
    never = [c for c, log in logs.items() if not log["accepts"]]
    assert not twice and not never, {c: logs[c]["deliveries"] for c in twice + never}
    calls = len(call_ids)
    assert len({r["session_id"] for r in records.values()}) == calls, "two calls share a session"
    assert sessions == calls, f"{sessions} sessions for {calls} calls"
    for call_id, log in logs.items():
        assert log["errors"] == [], (call_id, log["errors"][:5])
        # The provider stopped on a 2xx, not for want of retries (duplicates are attempt 0 too).
        final = max(d["attempt"] for d in log["deliveries"])
        assert 200 in {d["status"] for d in log["deliveries"] if d["attempt"] == final}, (
            call_id,
            log["deliveries"],
        )
    assert len(kills) >= KILLS_WHILE_RINGING, f"only {len(kills)} kills happened while the calls rang"
    assert caught, "no kill landed between a call's commit and its accept"

    deliveries = [d for log in logs.values() for d in log["deliveries"]]
    retries = sum(max(d["attempt"] for d in log["deliveries"]) for log in logs.values())
    # A ring stalled by a kill: a delivery of it waited on a dead worker, or was answered 5xx
    # (or 409, its claim held by a request a dead worker had) and delivered again.
    stalled = [
        c
        for c, log in logs.items()
        if any(d["t"] - d["sent_at"] > STALLED_S or d["attempt"] > 0 for d in log["deliveries"])
    ]
    # A `ring` message run again after its worker died counts its delivery twice.
    rerun = sum(max(0, r["deliveries"] - len(logs[c]["deliveries"])) for c, r in records.items())
    # The kills this test is after: the call's row and session committed under a claim, and the
    # accept under that claim seconds later (when the dead worker's message ran again).
    committed_then_killed = sum(log["accepts"][0] - claimed_at[c] > STALLED_S for c, log in logs.items())
    to_accept = [
        (log["accepts"][0] - min(d["sent_at"] for d in log["deliveries"])) * 1000 for log in logs.values()
    ]
    once = calls - len(never) - len(twice)
    figure(
        f"worker kill -9 while {calls} phone calls ring ({ringing_s:.0f} s): {len(kills)} kills, "
        f"{len(caught)} calls caught committed and not yet accepted; "
        f"{len(stalled)} rings stalled or retried ({retries} retries of {len(deliveries)} deliveries); "
        f"{rerun} ring messages run again after their delivery was recorded, "
        f"{committed_then_killed} calls accepted seconds after their claim and session were committed; "
        f"{once}/{calls} calls accepted exactly once, {len(twice)} twice; webhook → accept "
        f"p50 {statistics.median(to_accept):.0f} ms, longest {max(to_accept):,.0f} ms"
    )
