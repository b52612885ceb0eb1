"""Live phone calls at the SIP front door, as an attacker and an unreliable provider would send
them: `live.transport.incoming` forged, stale, unsigned or malformed; the same call announced
twenty times at once; a number nobody routes; a route full; and a Live announcement of a call
whose route answers on Realtime."""

from __future__ import annotations

import json
from typing import Any

from switchboard.client import Client
from switchboard.stack import Stack
from tests.support.live import live_session, ring_live, set_live_script
from tests.support.waiting import wait_for

LIVE_ROUTE = {"instructions": "Be brief.", "provider": "live", "live": {"delegation": "echo_task"}}
# The caller hangs up soon after the sideband attaches, so every accepted call ends by itself.
QUIET = {"caller": [{"hangup": True, "after_ms": 1_500}], "model": []}


def _settled(stack: Stack, session_id: str, deliveries: int) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        log = live_session(stack, session_id)
        return log if len(log["deliveries"]) >= deliveries else None

    return dict(wait_for(done, f"{deliveries} deliveries of {session_id}"))


def _record(client: Client, session_id: str) -> tuple[int, dict[str, Any]]:
    status, body = client.request("GET", f"/v1/phone-calls/{session_id}")
    return status, dict(body)


def test_forged_stale_and_malformed_live_deliveries_are_refused_and_create_nothing(
    stack: Stack, client: Client
) -> None:
    """A delivery not signed with the deployment's secret, or too old, is 400 and the ringing
    session is never answered; a body that is not a Live announcement is 400 too."""
    client.add_route("+18005557101", LIVE_ROUTE)
    forged = ring_live(stack, "+18005557101", sign_with="whsec_" + "A" * 32, retries=0)
    stale = ring_live(stack, "+18005557101", timestamp_offset_s=-400, retries=0)
    for session_id in (forged, stale):
        log = _settled(stack, session_id, 1)
        assert [d["status"] for d in log["deliveries"]] == [400]
        assert log["accepts"] == [] and log["rejected_with"] is None and log["status"] == "ringing"
        status, body = _record(client, session_id)
        assert (status, body["error"]["code"]) == (404, "call_not_found")
    status, body = client.request("POST", "/v1/webhooks/openai", {"type": "live.transport.incoming"})
    assert (status, body["error"]["code"]) == (400, "invalid_signature")


def test_the_same_live_call_announced_twenty_times_at_once_is_one_session_and_one_accept(
    stack: Stack, client: Client
) -> None:
    set_live_script(stack, QUIET)
    client.add_route("+18005557102", LIVE_ROUTE)

    session_id = ring_live(stack, "+18005557102", duplicates=19)

    _settled(stack, session_id, 20)
    wait_for(lambda: _record(client, session_id)[1].get("outcome") == "accepted", "the accept")
    log = live_session(stack, session_id)
    assert len(log["accepts"]) == 1, log["accepts"]
    assert all(d["status"] in (200, 409) for d in log["deliveries"]), log["deliveries"]
    _, record = _record(client, session_id)
    assert record["deliveries"] >= 20
    assert client.wait_for_status(record["session_id"], timeout_s=30)["status"] == "ended"


def test_an_unrouted_number_is_rejected_404_and_a_full_route_486_through_the_live_api(
    stack: Stack, client: Client
) -> None:
    nobody = ring_live(stack, "+19990007103")
    wait_for(lambda: live_session(stack, nobody)["rejected_with"] == 404, "the reject")
    assert _record(client, nobody)[1]["reason"] == "unknown_number"

    set_live_script(stack, {"caller": [{"hangup": True, "after_ms": 20_000}], "model": []})
    client.add_route("+18005557104", LIVE_ROUTE, max_calls=1)
    first = ring_live(stack, "+18005557104")
    wait_for(lambda: _record(client, first)[1].get("outcome") == "accepted", "the first call's accept")
    second = ring_live(stack, "+18005557104")
    wait_for(lambda: live_session(stack, second)["rejected_with"] == 486, "the busy reject")
    assert _record(client, second)[1]["reason"] == "route_busy"
    client.end(_record(client, first)[1]["session_id"])


def test_a_live_announcement_of_a_realtime_routes_call_is_left_to_realtime(
    stack: Stack, client: Client
) -> None:
    """The same call may be announced on both surfaces, each with its own id; the route says
    which answers it, so the other announcement is acknowledged and nothing is done with it (a
    reject could turn the caller away)."""
    client.add_route("+18005557105", {"instructions": "Be brief."})
    session_id = ring_live(stack, "+18005557105")
    log = _settled(stack, session_id, 1)
    assert [d["status"] for d in log["deliveries"]] == [200]
    assert log["accepts"] == [] and log["rejected_with"] is None and log["status"] == "ringing"
    status, _ = _record(client, session_id)
    assert status == 404


def test_a_live_session_refuses_what_live_cannot_do(stack: Stack, client: Client) -> None:
    """Typed text, an interrupt, a tools change, a take-over and a compaction are typed 409s on a
    Live call; a spec asking Live for tools or hangup, or naming no registered handler, is 422."""
    set_live_script(stack, {"caller": [{"hangup": True, "after_ms": 20_000}], "model": []})
    for spec, code in (
        ({"tools": ["echo"]}, "malformed_request"),
        ({"hangup": {"when": "the caller says bye"}}, "malformed_request"),
        ({"live": {"delegation": "nobody_registered_this"}}, "unknown_delegation_handler"),
    ):
        status, body = client.request(
            "POST", "/v1/sessions", {"instructions": "x", "provider": "live", **spec}
        )
        assert (status, body["error"]["code"]) == (422, code), body
    status, body = client.request("POST", "/v1/sessions", {"instructions": "x", "live": {}})
    assert status == 422, body

    session = client.create_session("Be brief.", provider="live", live={"delegation": "echo_task"})
    client.connect(session["id"])
    wait_for(lambda: client.session(session["id"])["status"] == "listening", "the call to listen")
    base = f"/v1/sessions/{session['id']}"
    for method, path, body in (
        ("POST", "/caller/text", {"text": "hello"}),
        ("POST", "/interrupt", None),
        ("PUT", "/tools", {"tools": ["echo"]}),
        ("POST", "/supervisor", {"by": {"id": "sup_1"}, "verb": {"type": "take_over"}}),
        ("POST", "/compact", None),
    ):
        status, answer = client.request(method, base + path, body)
        assert (status, answer["error"]["code"]) == (409, "not_supported_on_live"), (path, answer)
    too_long = "x" * 2_000
    status, answer = client.request("POST", base + "/agent/reply", {"instructions": too_long})
    assert (status, answer["error"]["code"]) == (422, "too_long_for_live")
    assert client.end(session["id"])["status"] == "ending"
    record = client.wait_for_status(session["id"], timeout_s=30)
    assert (record["status"], record["end_reason"]) == ("ended", "app_ended")
    log = live_session(stack, client.session(session["id"])["provider_call_id"])
    assert log["close_reason"] == "close_requested" and log["close_code"] == 1000
    assert [entry["control"]["type"] for entry in log["controls"]] == ["session.update", "session.close"]
    assert json.dumps(log["errors"]) == "[]"
    # session.closed came after the call ended here: nothing acts on it, but its usage counts.
    [closed] = [e["event"] for e in log["events"] if e["event"]["type"] == "session.closed"]
    wait_for(
        lambda: client.session(session["id"])["usage"]["seconds"] == closed["usage"]["seconds"],
        "the final usage to be recorded",
    )
