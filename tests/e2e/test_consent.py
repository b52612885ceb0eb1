"""Recording consent end to end (issue 25, step 7): the notice is said before the greeting; the
caller declines with the decline key on a phone call, or by telling the model, which calls its
built-in decline_recording tool; from then on the call is kept as metadata, and once it is over
the retention sweep erases its content (tests/workers/test_erasure.py drives that sweep)."""

from __future__ import annotations

import secrets
from typing import Any

from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call
from tests.support.phone import ring
from tests.support.waiting import wait_for

NOTICE = "This call is recorded. Press nine if you would rather it were not."


def _instructions_asked(stack: Stack, call_id: str) -> list[str]:
    return [
        str(entry["control"]["response"].get("instructions", ""))
        for entry in simulator_call(stack, call_id)["controls"]
        if entry["control"]["type"] == "response.create"
    ]


def _session_of_phone_call(client: Client, call_id: str) -> str | None:
    status, body = client.request("GET", f"/v1/phone-calls/{call_id}")
    return str(body["session_id"]) if status == 200 and body.get("session_id") else None


def _entries(client: Client, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [entry for entry in client.call_log(session_id)["entries"] if entry["kind"] == kind]


def test_a_caller_who_presses_the_decline_key_is_kept_as_metadata(stack: Stack, client: Client) -> None:
    set_script(
        stack,
        {
            "name": "consent-key",
            "timing": {"response_wait_ms": 500},
            "caller": [
                {"say": "Hello?", "after_ms": 100},
                {"dtmf": "9", "after_ms": 200},
                {"say": "Thanks. I need help with my order.", "after_ms": 300},
                {"hangup": True, "after_ms": 800},
            ],
            "model": [{"say": "Hello!"}, {"say": "Of course."}],
        },
    )
    number = f"+1800556{secrets.randbelow(9000) + 1000}"
    session = {
        "instructions": "You are the order desk.",
        "greeting": {"say": "Welcome to the order desk."},
        "privacy": {"consent": {"say": NOTICE, "decline_key": "9"}},
    }
    client.add_route(number, session, keys={"0": "attention"})
    call_id = ring(stack, number)
    session_id = wait_for(lambda: _session_of_phone_call(client, call_id), "the session", timeout_s=30)
    record = client.wait_for_status(session_id, timeout_s=60)
    assert record["status"] == "ended", record

    # The notice came first, then the greeting's words, said as one greeting.
    greeting = _instructions_asked(stack, call_id)[0]
    assert NOTICE in greeting and greeting.index(NOTICE) < greeting.index("Welcome to the order desk.")
    [declined] = wait_for(lambda: _entries(client, session_id, "consent.declined"), "the decline")
    assert declined["data"] == {"by": "key"}
    # The decline key is one the boundary keeps pressed (it means something on this call).
    assert [entry["data"]["key"] for entry in _entries(client, session_id, "call.key")] == ["9"]
    assert record["storage"] == "metadata"
    assert record["privacy"]["consent"] == {"say": NOTICE, "decline_key": "9"}
    assert record["privacy"]["retention_days"] is None


def test_a_caller_who_tells_the_model_is_kept_as_metadata(stack: Stack, client: Client) -> None:
    set_script(
        stack,
        {
            "name": "consent-model",
            "timing": {"response_wait_ms": 20_000},
            "caller": [
                {"say": "Please don't record this call.", "after_ms": 100},
                {"hangup": True, "after_ms": 500},
            ],
            "model": [
                {"say": "Hello."},
                {"function_call": {"name": "decline_recording", "arguments": {}}},
                {"say": "Understood, this call will not be kept."},
            ],
        },
    )
    session = client.create_session(
        "You are the order desk.", privacy={"consent": {"say": NOTICE}}, greeting={"say": "Hi there."}
    )
    call_id = client.connect(session["id"])["call_id"]
    record = client.wait_for_status(session["id"], timeout_s=60)
    assert record["status"] == "ended", record
    tools = [
        tool["name"]
        for entry in simulator_call(stack, call_id)["controls"]
        if entry["control"]["type"] == "session.update"
        for tool in entry["control"]["session"].get("tools", [])
    ]
    assert "decline_recording" in tools
    [declined] = _entries(client, session["id"], "consent.declined")
    assert declined["data"] == {"by": "model"}
    assert record["storage"] == "metadata"
    # The model was told, and the call went on to its answer.
    said = [item["text"] for item in record["transcript"] if item["role"] == "assistant"]
    assert "Understood, this call will not be kept." in said


def test_a_session_created_as_metadata_says_so_and_a_bad_policy_is_refused(
    stack: Stack, client: Client
) -> None:
    created = client.create_session(
        "You are the order desk.", storage="metadata", privacy={"retention_days": 30}
    )
    record = client.session(created["id"])
    assert record["storage"] == "metadata" and record["privacy"]["retention_days"] == 30
    for body, field in (
        ({"instructions": "x", "storage": "none"}, "storage"),
        (
            {"instructions": "x", "privacy": {"consent": {"say": "Recorded.", "decline_key": "x"}}},
            "decline_key",
        ),
        ({"instructions": "x", "privacy": {"redact": ["e-mail"]}}, "redact"),
        ({"instructions": "x", "privacy": {"retention_days": 0}}, "retention_days"),
    ):
        status, answer = client.request("POST", "/v1/sessions", body)
        assert status == 422, (body, answer)
        assert field in str(answer), answer
