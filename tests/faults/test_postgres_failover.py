"""The PostgreSQL primary killed mid-call and its standby promoted, under calls that go on through
the same multi-host URL (docs/scaling.md's topology on private ports, switchboard.standby).

So that the failover really meets commits the standby lacks, the link to the standby is frozen
(the primary's WAL sender stopped) for a moment before the primary dies:

- synchronous replication: no commit returns while the standby lacks it, so the workers' commits
  of that moment fail with the primary, their messages wait out the failover (pipeline.platform.outages)
  and are applied on the promoted standby: nothing is lost;
- asynchronous replication: the primary commits what the standby will never have; the workers
  sent those events' controls and the gateway released them. Each such event is lost: its seq is
  a gap, declared lost after the gap timeout with an `event_lost` warning, and the calls go on.
  The test counts exactly which events are gone, and that each has its warning."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pipeline.realtime.events import DURABLE_TYPES
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from switchboard.standby import PostgresPair
from tests.e2e.conftest import simulator_call
from tests.faults.calls import place, verify

CALLS = 6
TURNS = 4
# How long the standby hears nothing before the primary dies: commits of this moment are the
# ones the asynchronous standby lacks.
HELD_S = 0.4


@pytest.fixture(params=[True, False], ids=["synchronous", "asynchronous"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PostgresPair]:
    servers = PostgresPair(tmp_path / "pg", synchronous=request.param)
    try:
        yield servers
    finally:
        servers.stop()


def test_the_primary_killed_and_its_standby_promoted_mid_call(
    pair: PostgresPair, services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    mode = "synchronous" if pair.synchronous else "asynchronous"
    with Stack(pair.url, services.redis_url, namespace=f"{namespace}-pgfail-{mode}") as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        # A caller waits out a lost event's gap timeout (20 s) and the failover.
        calls = place(stack, client, CALLS, TURNS, wait_ms=90_000)
        took: list[float] = []

        def failover() -> None:
            time.sleep(1.5)  # mid-call: the first turns are answered
            pair.hold_replication()
            time.sleep(HELD_S)
            pair.kill_primary()
            took.append(pair.promote())

        started = time.monotonic()
        injector = threading.Thread(target=failover, daemon=True)
        injector.start()
        if pair.synchronous:
            outcome = verify(stack, client, calls, TURNS, timeout_s=180)
        else:
            lost, warned, stored_lines = _account(stack, client, calls)
            took_s = time.monotonic() - started
        injector.join(60)
        waited = [
            line for worker in stack.workers for line in worker.lines if "the message waits for it" in line
        ]

    assert took, "the failover never happened"
    assert waited, "no worker met the failover: the test proved nothing"
    if pair.synchronous:
        figure(
            f"PostgreSQL primary killed, synchronous standby promoted ({took[0]:.2f} s) during "
            f"{CALLS} calls × {TURNS} turns: {len(waited)} messages waited for it, 0 events lost, "
            f"0 controls twice, all complete; turn stall p50 {outcome.median_ms:.0f} ms, "
            f"longest {outcome.longest_ms:.0f} ms"
        )
        return
    # Asynchronous: what is lost is exactly what the primary committed alone, each lost event has
    # its warning, and every caller's line was still answered (its control went out before the
    # primary died).
    assert sorted(warned) == sorted(seq for _type, seq in lost), (lost, warned)
    figure(
        f"PostgreSQL primary killed, asynchronous standby promoted ({took[0]:.2f} s) during "
        f"{CALLS} calls × {TURNS} turns, the standby {HELD_S * 1000:.0f} ms behind: "
        f"{len(lost)} events lost ({', '.join(sorted({t for t, _ in lost})) or 'none'}), each an "
        f"event_lost warning; {CALLS * TURNS * 2 - stored_lines} of {CALLS * TURNS * 2} transcript "
        f"lines missing; 0 controls twice, every line answered, all complete in {took_s:.0f} s"
    )


def _account(
    stack: Stack, client: Client, calls: list, timeout_s: float = 180
) -> tuple[list[tuple[str, int]], list[int], int]:
    """What an asynchronous failover lost, call by call: the durable events the provider sent that
    the session's log lacks (type and seq), the seqs warned as lost, and the transcript lines
    kept. Everything else holds as in `verify`: every call ends normally, every line is answered
    once, no control is sent twice."""
    lost: list[tuple[str, int]] = []
    warned: list[int] = []
    stored = 0
    for call in calls:
        record = client.wait_for_status(call.session_id, timeout_s=timeout_s)
        assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up"), record
        full = client.session(call.session_id, events=True)
        assert full["applied_seq"] == full["logged_seq"], "a logged event was never applied"
        sim = simulator_call(stack, call.call_id)
        assert sim["errors"] == []
        ids = [entry["control"]["event_id"] for entry in sim["controls"]]
        assert len(ids) == len(set(ids)), "a control was sent twice"
        kinds = [entry["control"]["type"] for entry in sim["controls"]]
        assert kinds == ["session.update"] + ["response.create"] * TURNS, kinds
        logged = {entry["payload"].get("event_id") for entry in full["log"]}
        markers = {
            entry["seq"] for entry in full["log"] if entry["payload"].get("type") == "switchboard.seq_lost"
        }
        missing = [
            e["event"]
            for e in sim["events"]
            if e["event"]["type"] in DURABLE_TYPES and e["event"]["event_id"] not in logged
        ]
        lost += [(event["type"], seq) for event, seq in zip(missing, sorted(markers), strict=False)]
        assert len(missing) == len(markers), (missing, markers)
        warned += [
            incident["context"]["seq"] for incident in full["incidents"] if incident["code"] == "event_lost"
        ]
        stored += len(full["transcript"])
    return lost, warned, stored
