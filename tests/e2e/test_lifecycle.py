"""Admission timing and the live stream, through the real processes."""

from __future__ import annotations

import itertools
import json
from typing import Any

import dramatiq
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from pipeline.admission import ADMISSION_TIMER
from pipeline.names import ADMISSION_QUEUE
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script
from workers.broker import make_broker


def test_an_admission_timer_fails_a_session_that_never_connected(
    stack: Stack, client: Client, services: Services
) -> None:
    """The admission timeout, delivered as a delayed message, fails a session still waiting
    to connect, with a durable incident; connecting afterwards is refused."""
    session = client.create_session("Be brief.")
    broker = make_broker(services.redis_url, namespace=stack.namespace)
    broker.declare_queue(ADMISSION_QUEUE)
    timer: dramatiq.Message[Any] = dramatiq.Message(
        queue_name=ADMISSION_QUEUE,
        actor_name="session_timer",
        args=(),
        kwargs={"session_id": session["id"], "name": ADMISSION_TIMER},
        options={},
    )
    broker.enqueue(timer, delay=100)

    record = client.wait_for_status(session["id"], timeout_s=30)
    assert (record["status"], record["end_reason"]) == ("failed", "admission_timeout")
    assert [incident["code"] for incident in record["incidents"]] == ["admission_timeout"]
    status, answer = client.request("POST", f"/v1/sessions/{session['id']}/connect", {"sdp": "v=0"})
    assert (status, answer["error"]["code"]) == (409, "session_ended")
    broker.close()


def test_the_live_stream_carries_transcripts_and_controls_and_needs_the_token(
    stack: Stack, client: Client
) -> None:
    """A subscriber sees growing transcript deltas, each final, each control as sent and the
    close; a subscriber without the token is refused with 401."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    session = client.create_session("You are the order desk.")
    url = f"{stack.live_url}/v1/sessions/{session['id']}/live"
    try:
        connect(url)
    except InvalidStatus as refused:
        assert refused.response.status_code == 401
    else:
        raise AssertionError("a live stream without a token was accepted")

    messages: list[dict[str, Any]] = []
    with connect(url, additional_headers={"Authorization": f"Bearer {stack.api_token}"}) as live:
        client.connect(session["id"])
        for raw in live:
            messages.append(json.loads(raw))
            if messages[-1]["type"] == "session.closed":
                break

    kinds = [message["type"] for message in messages]
    assert kinds[-1] == "session.closed"
    finals = [(m["role"], m["text"]) for m in messages if m["type"] == "transcript.final"]
    assert finals[0] == ("user", "Hi, I'd like to check on an order.")
    assert len(finals) == 6
    for final in (m for m in messages if m["type"] == "transcript.final"):
        grown = [
            m["text"]
            for m in messages
            if m["type"] == "transcript.delta" and m["item_id"] == final["item_id"]
        ]
        assert grown, final
        assert all(earlier == later[: len(earlier)] for earlier, later in itertools.pairwise(grown))
        assert grown[-1] == final["text"]
    controls = [m["control"]["type"] for m in messages if m["type"] == "control"]
    assert controls == ["session.update", "response.create", "response.create", "response.create"]
