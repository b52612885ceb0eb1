"""Each Live model's cap of sessions in a call, end to end through the simulator: with
gpt-live-1.1 capped at one, a second app connect on it is refused 503 `live_model_at_capacity`
before any call is made at the provider, while gpt-live-1 (a cap of its own: none) connects; the
first call's end frees its place; and a phone call to a Live route on the full model is turned
away with SIP 503."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from switchboard.client import DEMO_SDP_OFFER, Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.support.live import live_session, ring_live, set_live_script
from tests.support.waiting import wait_for

# The caller stays on the line until the test ends the call.
LINGERING = {"caller": [{"hangup": True, "after_ms": 60_000}], "model": []}
LIVE = {"provider": "live", "live": {"delegation": "echo_task"}}


@pytest.fixture(scope="module")
def stack(services: Services, namespace: str) -> Iterator[Stack]:
    extra = {"SWITCHBOARD_LIVE_MAX_SESSIONS": json.dumps({"gpt-live-1.1": 1})}
    with Stack(
        services.database_url, services.redis_url, namespace=f"{namespace}-caps", extra_env=extra
    ) as running:
        running.start(workers=1)
        yield running


@pytest.fixture
def client(stack: Stack) -> Client:
    return Client(stack.api_url, stack.api_token, stack.live_url)


def _provider_sessions(stack: Stack) -> set[str]:
    """Every Live session the simulated provider was asked to make."""
    base = stack.simulator_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/_sim/live/sessions", timeout=10) as response:
        return set(json.loads(response.read())["sessions"])


def _connect(client: Client, session_id: str) -> tuple[int, dict[str, Any]]:
    status, body = client.request(
        "POST",
        f"/v1/sessions/{session_id}/connect",
        {"sdp": DEMO_SDP_OFFER},
        headers={"Accept": "application/json"},
    )
    return status, dict(body)


def _listening(client: Client, session_id: str) -> None:
    wait_for(lambda: client.session(session_id)["status"] == "listening", f"{session_id} to listen")


def _ended(client: Client, session_id: str) -> None:
    client.end(session_id)
    assert client.wait_for_status(session_id, timeout_s=30)["status"] == "ended"


def test_a_full_model_refuses_the_next_connect_the_other_model_connects_and_an_end_frees_it(
    stack: Stack, client: Client
) -> None:
    set_live_script(stack, LINGERING)
    first = client.create_session("Be brief.", model="gpt-live-1.1", **LIVE)["id"]
    assert _connect(client, first)[0] == 201
    _listening(client, first)

    second = client.create_session("Be brief.", model="gpt-live-1.1", **LIVE)["id"]
    made = _provider_sessions(stack)
    status, body = _connect(client, second)
    assert status == 503, body
    assert body["error"]["code"] == "live_model_at_capacity"
    assert (body["error"]["model"], body["error"]["cap"]) == ("gpt-live-1.1", 1)
    refused = client.session(second)
    # Refused before a call was made at the provider: the session waits, created, to connect.
    assert (refused["status"], refused["provider_call_id"]) == ("created", None)
    assert _provider_sessions(stack) == made

    other = client.create_session("Be brief.", model="gpt-live-1", **LIVE)["id"]
    assert _connect(client, other)[0] == 201
    _listening(client, other)
    assert live_session(stack, client.session(other)["provider_call_id"])["config"]["model"] == "gpt-live-1"

    _ended(client, first)
    assert _connect(client, second)[0] == 201
    _listening(client, second)
    assert client.session(second)["model"] == "gpt-live-1.1"
    _ended(client, second)
    _ended(client, other)


def test_a_phone_call_to_a_live_route_on_a_full_model_is_turned_away_503(
    stack: Stack, client: Client
) -> None:
    set_live_script(stack, LINGERING)
    client.add_route("+18005557201", {"instructions": "Be brief.", **LIVE})
    busy = client.create_session("Be brief.", **LIVE)["id"]
    assert _connect(client, busy)[0] == 201
    _listening(client, busy)

    caller = ring_live(stack, "+18005557201")

    wait_for(lambda: live_session(stack, caller)["rejected_with"] == 503, "the call turned away")
    status, record = client.request("GET", f"/v1/phone-calls/{caller}")
    assert (status, record["reason"], record["session_id"]) == (200, "live_model_at_capacity", None)

    _ended(client, busy)
    answered = ring_live(stack, "+18005557201")
    wait_for(
        lambda: client.request("GET", f"/v1/phone-calls/{answered}")[1].get("outcome") == "accepted",
        "the next call's accept once the model had room",
    )
    _ended(client, client.request("GET", f"/v1/phone-calls/{answered}")[1]["session_id"])
