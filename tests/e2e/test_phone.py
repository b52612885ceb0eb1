"""Phone calls through the SIP front door, end to end: the simulated provider announces each
call with a signed webhook (retried and duplicated as the provider may), the gateway checks it,
a worker decides once per call id, and the call is accepted (and talked on, transferred, ended)
or rejected with a SIP status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.support.phone import ring
from tests.support.waiting import wait_for

DANA = {"id": "sup_dana", "name": "Dana"}


def _settled(stack: Stack, call_id: str, deliveries: int) -> dict[str, Any]:
    """The simulator's log of a call once `deliveries` deliveries were made and the last 2xx or
    refused for good."""

    def done() -> dict[str, Any] | None:
        log = simulator_call(stack, call_id)
        made = log["deliveries"]
        return log if len(made) >= deliveries else None

    return dict(wait_for(done, f"{deliveries} deliveries of {call_id}"))


def test_a_routed_phone_call_is_answered_talked_on_and_ended(stack: Stack, client: Client) -> None:
    """A call to a routed number is accepted once with its route's session, greeted, talked on,
    and ended by the caller's hangup; the call log says who called which number."""
    set_script(
        stack,
        {
            "name": "phone",
            "caller": [
                {"say": "Hi, I'd like to change my address.", "after_ms": 200},
                {"hangup": True, "after_ms": 300},
            ],
            "model": [{"say": "Thanks for calling Acme."}, {"say": "Of course. What's the new address?"}],
        },
    )
    route = client.add_route(
        "+18005551212",
        {"instructions": "You are Acme's front desk.", "greeting": {"say": "Thanks for calling Acme."}},
        max_calls=5,
    )
    call_id = ring(stack, "+18005551212", **{"from": "+14155550100"})

    answered = wait_for(
        lambda: client.phone_call(call_id) if _known(client, call_id) else None, "the call's record"
    )
    assert answered["action"] == "accept" and answered["route_id"] == route["id"]
    record = client.wait_for_status(answered["session_id"], timeout_s=30)
    assert (record["end_reason"], record["ended_by"]) == ("caller_hung_up", "caller")

    log = simulator_call(stack, call_id)
    assert len(log["accepts"]) == 1 and log["errors"] == []
    assert [d["status"] for d in log["deliveries"]] == [200]
    for entry in log["controls"]:
        assert wire_errors(entry["control"], direction="client") == [], entry
    story = client.call_log(answered["session_id"])["entries"]
    assert story[0]["kind"] == "call.started"
    assert (
        story[0]["data"] | {"medium": "sip", "caller": "+14155550100", "dialled": "+18005551212"}
        == story[0]["data"]
    )
    assert [e["kind"] for e in story][1:] == ["turn.agent", "turn.user", "turn.agent", "call.ended"]
    listed = client.routes()
    [mine] = [r for r in listed["routes"] if r["id"] == route["id"]]
    assert mine["calls"]["answered"] >= 1


def _known(client: Client, call_id: str) -> bool:
    status, _ = client.request("GET", f"/v1/phone-calls/{call_id}")
    return status == 200


def test_an_unknown_number_is_rejected_with_404_and_counted(stack: Stack, client: Client) -> None:
    call_id = ring(stack, "+19990000000")
    log = _settled(stack, call_id, 1)
    wait_for(lambda: simulator_call(stack, call_id)["rejected_with"] == 404, "the reject")
    record = client.phone_call(call_id)
    assert (record["action"], record["sip_status"], record["reason"], record["session_id"]) == (
        "reject",
        404,
        "unknown_number",
        None,
    )
    assert log["accepts"] == []
    assert client.routes()["refused"]["unknown_number"] >= 1


def test_forged_stale_and_unsigned_deliveries_are_refused_and_create_nothing(
    stack: Stack, client: Client
) -> None:
    client.add_route("+18005550001", {"instructions": "Be brief."})
    forged = ring(stack, "+18005550001", sign_with="whsec_" + "A" * 32, retries=0)
    stale = ring(stack, "+18005550001", timestamp_offset_s=-400, retries=0)
    for call_id in (forged, stale):
        log = _settled(stack, call_id, 1)
        assert [d["status"] for d in log["deliveries"]] == [400]
        assert log["accepts"] == [] and log["rejected_with"] is None
        status, body = client.request("GET", f"/v1/phone-calls/{call_id}")
        assert (status, body["error"]["code"]) == (404, "call_not_found")
    status, body = client.request("POST", "/v1/webhooks/openai", {"type": "realtime.call.incoming"})
    assert (status, body["error"]["code"]) == (400, "invalid_signature")
    assert client.routes()["refused"]["webhook_invalid_signature"] >= 3


def test_the_same_webhook_twenty_times_at_once_is_one_session_and_one_accept(
    stack: Stack, client: Client
) -> None:
    set_script(stack, {"name": "quiet", "caller": [{"hangup": True, "after_ms": 1_500}], "model": []})
    client.add_route("+18005550020", {"instructions": "Be brief."})

    call_id = ring(stack, "+18005550020", duplicates=19)

    log = _settled(stack, call_id, 20)
    wait_for(lambda: client.phone_call(call_id)["outcome"] == "accepted", "the accept to be recorded")
    record = client.phone_call(call_id)
    log = simulator_call(stack, call_id)
    assert len(log["accepts"]) == 1
    assert all(d["status"] in (200, 409) for d in log["deliveries"]), log["deliveries"]
    assert record["deliveries"] >= 20
    client.wait_for_status(record["session_id"], timeout_s=30)


def test_a_supervisor_transfers_a_phone_call_cold_once(stack: Stack, client: Client) -> None:
    set_script(stack, {"name": "hold-on", "caller": [{"hangup": True, "after_ms": 60_000}], "model": []})
    client.add_route("+18005550030", {"instructions": "Be brief."}, transfer_targets=["tel:+14155550123"])
    call_id = ring(stack, "+18005550030")
    session_id = wait_for(
        lambda: client.phone_call(call_id)["session_id"] if _known(client, call_id) else None, "the session"
    )
    wait_for(lambda: client.session(session_id)["status"] == "listening", "the call to listen")

    assert (
        client.supervise(session_id, DANA, {"type": "transfer", "to": "tel:+14155550123"})["status"]
        == "transferring"
    )

    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["end_reason"], record["ended_by"]) == ("transferred", "supervisor")
    assert simulator_call(stack, call_id)["referred_to"] == "tel:+14155550123"
    kinds = [e["kind"] for e in client.call_log(session_id)["entries"]]
    assert kinds[-3:] == ["supervisor.transferred", "call.transferred", "call.ended"]


def test_routes_from_the_cli(stack: Stack, client: Client) -> None:
    """`switchboard routes add|list|remove` through the gateway's API; a bad number is refused."""

    def cli(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "switchboard", "routes", *arguments, "--api", stack.api_url],
            env={**os.environ, "SWITCHBOARD_API_TOKEN": stack.api_token},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    added = cli(
        "add", "+4420*", "--instructions", "You answer London.", "--max-calls", "3", "--key", "0=attention"
    )
    assert added.returncode == 0, added.stderr
    route = json.loads(added.stdout)
    assert (route["number"], route["max_calls"], route["keys"]) == ("+4420*", 3, {"0": "attention"})
    listed = cli("list")
    assert route["id"] in listed.stdout
    bad = cli("add", "not-a-number", "--instructions", "x")
    assert bad.returncode == 1 and "malformed_request" in bad.stderr
    assert cli("remove", route["id"]).returncode == 0
    gone = cli("remove", route["id"])
    assert gone.returncode == 1 and "route_not_found" in gone.stderr


def test_a_key_press_asks_for_a_person_and_silences_end_the_call(stack: Stack, client: Client) -> None:
    """DTMF `0` on a route that maps it asks for a person (the caller is held); on another
    route, two silences make the agent ask, then say goodbye and hang up (`caller_silent`)."""
    set_script(
        stack,
        {
            "name": "keypad",
            "caller": [
                {"say": "Can I talk to a person?", "after_ms": 100},
                {"dtmf": "0", "after_ms": 200},
                {"hangup": True, "after_ms": 1_500},
            ],
            "model": [{"say": "Let me see."}],
        },
    )
    client.add_route("+18005550040", {"instructions": "Be brief."}, keys={"0": "attention"})
    keyed = ring(stack, "+18005550040")
    session_id = wait_for(
        lambda: client.phone_call(keyed)["session_id"] if _known(client, keyed) else None, "the session"
    )
    client.wait_for_status(session_id, timeout_s=30)
    kinds = [e["kind"] for e in client.call_log(session_id)["entries"]]
    at = kinds.index("call.key")
    assert kinds[at : at + 3] == ["call.key", "attention.requested", "call.line"]
    assert kinds[-2:] == ["attention.answered", "call.ended"]  # the caller hung up while waiting

    set_script(
        stack,
        {
            "name": "silent",
            "caller": [{"silent": True}, {"silent": True}, {"hangup": True, "after_ms": 20_000}],
            "model": [{"say": "Are you still there?"}, {"say": "I can't hear anyone, goodbye!"}],
        },
    )
    client.add_route("+18005550050", {"instructions": "Be brief."}, silences=2, silence_ms=600)
    quiet = ring(stack, "+18005550050")
    session_id = wait_for(
        lambda: client.phone_call(quiet)["session_id"] if _known(client, quiet) else None, "the session"
    )
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["end_reason"], record["ended_by"]) == ("caller_silent", "agent")
    story = client.call_log(session_id)["entries"]
    assert [e["data"]["count"] for e in story if e["kind"] == "call.silence"] == [1, 2]
    assert simulator_call(stack, quiet)["errors"] == []


def test_the_model_transfers_a_caller_to_a_route_target(stack: Stack, client: Client) -> None:
    set_script(
        stack,
        {
            "name": "transfer-me",
            "caller": [
                {"say": "Put me through to billing, please.", "after_ms": 100},
                {"hangup": True, "after_ms": 20_000},
            ],
            "model": [
                {
                    "function_call": {
                        "name": "transfer_call",
                        "arguments": {"target": "sip:billing@example.com"},
                    }
                }
            ],
        },
    )
    client.add_route(
        "+18005550060", {"instructions": "Be brief."}, transfer_targets=["sip:billing@example.com"]
    )
    call_id = ring(stack, "+18005550060")
    session_id = wait_for(
        lambda: client.phone_call(call_id)["session_id"] if _known(client, call_id) else None, "the session"
    )
    record = client.wait_for_status(session_id, timeout_s=30)
    assert (record["end_reason"], record["ended_by"]) == ("agent_transferred", "agent")
    assert simulator_call(stack, call_id)["referred_to"] == "sip:billing@example.com"
    story = client.call_log(session_id)["entries"]
    assert story[-1]["data"]["reason"] == "agent_transferred"
    assert [e["kind"] for e in story][-2:] == ["call.transferred", "call.ended"]
