"""A gateway frozen (SIGSTOP) longer than the liveness window while a peer runs: the peer takes
its calls over and re-attaches their sidebands; when the frozen gateway wakes, what its sockets
still held arrives numbered with the superseded generation, and every caller line among it is
answered by the call's new owner (issue 11, item 4: 10 of 80 heard lines went unanswered)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

from pipeline.realtime.events import DURABLE_TYPES
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import simulator_call
from tests.faults.calls import FINAL, place

CALLS = 10
TURNS = 8
# Into the calls before the freeze, so every call is mid-conversation when its gateway stops.
SETTLE_S = 2.0
# Longer than the 3 s liveness window, so the peer finds the frozen gateway dead.
FREEZE_S = 6.0
# The freeze is held past FREEZE_S until the peer has taken every call over (a loaded box is
# slower), so what the frozen gateway delivers on waking is really of a superseded generation.
TAKEOVER_WAIT_S = 90.0
# Each caller waits up to 60 s for an answer (tests.faults.calls.script), so even a line left
# unanswered ends its call, well within this.
END_WAIT_S = 300.0


def _superseded(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events applied after the takeover that carry the generation it superseded: what the
    frozen gateway's socket held, numbered when it woke."""
    lost = next(e for e in log if e["kind"] == "switchboard.gateway_lost")
    return [
        e
        for e in log
        if (e["applied_order"] or 0) > lost["applied_order"] and e["generation"] <= lost["generation"]
    ]


def _unanswered_lines(log: list[dict[str, Any]], received: set[str]) -> list[int]:
    """The seqs of caller lines the session heard (applied or logged late: either way the line is
    in the transcript) that no response.create answered before the caller's next line. The
    caller is patient (it speaks again only once answered, or after 60 s without an answer), so
    in the order the session took events up, each line is followed by a response.create the
    provider received before the next line comes."""
    taken_up = sorted((e for e in log if e["applied_order"] is not None), key=lambda e: e["applied_order"])
    unanswered: list[int] = []
    waiting: int | None = None
    for event in taken_up:
        if event["kind"] == FINAL:
            if waiting is not None:
                unanswered.append(waiting)
            waiting = event["seq"]
        for control in event["controls"] or []:
            body = control.get("control") or {}
            if body.get("type") == "response.create" and body.get("event_id") in received:
                waiting = None
    if waiting is not None:
        unanswered.append(waiting)
    return unanswered


def test_a_frozen_gateways_calls_are_taken_over_and_every_heard_line_answered(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-frozen") as stack:
        stack.start(workers=2)
        peer = stack.add_gateway()
        first = Client(stack.api_url, stack.api_token, stack.live_url)
        second = Client(f"http://127.0.0.1:{peer.ready['http']}", stack.api_token)
        calls = place(stack, first, CALLS, TURNS)
        time.sleep(SETTLE_S)
        frozen = stack.gateway
        assert frozen is not None

        def all_taken_over() -> bool:
            return all(second.session(c.session_id)["owning_gateway"] == peer.ready["id"] for c in calls)

        frozen.popen.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            time.sleep(FREEZE_S)
            taken_over = wait_until(all_taken_over, TAKEOVER_WAIT_S, interval_s=0.5)
        finally:
            frozen.popen.send_signal(signal.SIGCONT)
        frozen_s = time.monotonic() - stopped_at
        assert taken_over, "the peer did not take the frozen gateway's calls over"

        heard = answered = late = stale_lines = stale_done = 0
        for call in calls:
            record = second.wait_for_status(call.session_id, timeout_s=END_WAIT_S)
            assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up"), record
            # The woken gateway does not take its calls back: it is not restarting, and the
            # peer's takeover moved them for good.
            assert record["owning_gateway"] == peer.ready["id"]
            codes = [i["code"] for i in record["incidents"]]
            # A seq the gateway numbered just before it froze waits for it to wake; only a freeze
            # held past the 20 s gap timeout (a very loaded box) would skip it as lost.
            assert codes.count("gateway_lost") == 1 and set(codes) <= {"gateway_lost", "event_lost"}, codes
            full = second.session(call.session_id, events=True)
            log = full["log"]
            assert full["applied_seq"] == full["logged_seq"], "a logged event was never applied"
            connected = [e["generation"] for e in log if e["kind"] == "switchboard.sideband_connected"]
            assert connected == [1, 2], connected

            sim = simulator_call(stack, call.call_id)
            assert sim["errors"] == []
            ids = [entry["control"]["event_id"] for entry in sim["controls"]]
            assert len(ids) == len(set(ids)), "a control was sent twice"
            # A freeze loses nothing: what the provider sent the frozen gateway waited in its
            # socket, and arrived when it woke.
            logged = {e["payload"].get("event_id") for e in log}
            sent = [e["event"] for e in sim["events"] if e["event"]["type"] in DURABLE_TYPES]
            lost = [e["type"] for e in sent if e["event_id"] not in logged]
            assert lost == [], f"{len(lost)} durable events lost: {lost[:5]}"

            unanswered = _unanswered_lines(log, set(ids))
            assert unanswered == [], f"caller lines at seqs {unanswered} were heard but never answered"
            lines = [t for t in record["transcript"] if t["role"] == "user"]
            finals = [e for e in log if e["kind"] == FINAL and e["disposition"] in ("applied", "late")]
            assert len(finals) == len(lines), "a caller line in the transcript is missing from the log"
            heard += len(lines)
            answered += len(lines) - len(unanswered)
            late += sum(e["disposition"] == "late" for e in log)
            stale = _superseded(log)
            stale_lines += sum(e["kind"] == FINAL and e["disposition"] == "applied" for e in stale)
            stale_done += sum(e["kind"] == "response.done" and e["disposition"] == "applied" for e in stale)

    # Without a caller line delivered by the superseded sideband, this test would prove nothing.
    assert stale_lines >= 1, "no caller line of the superseded generation arrived after the takeover"
    figure(
        f"gateway frozen {frozen_s:.0f} s (SIGSTOP) with a peer running, {CALLS} calls × {TURNS} turns: "
        f"all {CALLS} taken over by the peer and completed; {heard}/{CALLS * TURNS} caller lines heard, "
        f"{answered} answered ({stale_lines} of them heard by the frozen gateway and delivered with the "
        f"superseded generation after the takeover; {stale_done} stale response.done settled a turn); "
        f"{late} stale events logged late; 0 controls twice"
    )
