"""Bad input gets a clear, typed answer and loses nothing else (DESIGN invariant 8)."""

from __future__ import annotations

import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from switchboard.client import Client
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import SCRIPTS, set_script, simulator_call
from tests.support.http import raw_request


def _raw(
    stack: Stack, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, Any]:
    return raw_request(stack.api_url, method, path, body, headers)


def _code(answer: Any) -> str:
    return str(answer["error"]["code"])


def test_requests_without_a_valid_bearer_token_get_401(stack: Stack) -> None:
    """No token and a wrong token are both 401, with a typed error and a challenge."""
    status, body = _raw(stack, "POST", "/v1/sessions", b'{"instructions": "x"}', {})
    assert (status, _code(body)) == (401, "unauthorized")
    status, body = _raw(stack, "GET", "/v1/sessions/sess_x", None, {"Authorization": "Bearer wrong"})
    assert (status, _code(body)) == (401, "unauthorized")


def test_malformed_api_requests_get_typed_4xx_answers(stack: Stack, client: Client) -> None:
    """Bad bodies are 422, unknown things 404, wrong methods 405, oversized bodies 413."""
    auth = {"Authorization": f"Bearer {stack.api_token}", "Content-Type": "application/json"}
    cases: list[tuple[str, str, bytes | None, int, str | None]] = [
        ("POST", "/v1/sessions", b"{not json", 422, "malformed_request"),
        ("POST", "/v1/sessions", b'{"instructions": ""}', 422, "malformed_request"),
        ("POST", "/v1/sessions", b'{"instructions": "x", "colour": "blue"}', 422, "malformed_request"),
        (
            "POST",
            "/v1/sessions",
            b'{"instructions": "x", "limits": {"max_output_tokens": 9000}}',
            422,
            "malformed_request",
        ),
        ("GET", "/v1/sessions/sess_does_not_exist", None, 404, "session_not_found"),
        ("GET", "/v1/nothing/here", None, 404, "not_found"),
        ("DELETE", "/v1/sessions", None, 405, "method_not_allowed"),
        ("POST", "/v1/sessions/sess_x/connect", b'{"sdp": ""}', 422, "malformed_request"),
    ]
    for method, path, body, status, code in cases:
        got, answer = _raw(stack, method, path, body, auth)
        assert (got, _code(answer)) == (status, code), (method, path, body)
    got, answer = _raw(stack, "POST", "/v1/sessions", b"x" * (1024 * 1024 + 1), auth)
    assert (got, _code(answer)) == (413, "body_too_large")


def test_an_offer_that_is_not_sdp_is_refused_before_the_provider_and_the_session_stays(
    stack: Stack, client: Client
) -> None:
    """An offer not starting `v=0` is 422 and the session stays `created` (it used to fail it, 502)."""
    session = client.create_session("Be brief.")
    path = f"/v1/sessions/{session['id']}/connect"
    auth = {"Authorization": f"Bearer {stack.api_token}"}
    for body, content_type in ((b'{"sdp": "0"}', "application/json"), (b"hello", "application/sdp")):
        got, answer = _raw(stack, "POST", path, body, {**auth, "Content-Type": content_type})
        assert (got, _code(answer)) == (422, "malformed_request"), content_type
    assert client.session(session["id"])["status"] == "created"


def test_connecting_twice_and_ending_twice_are_refused(stack: Stack, client: Client) -> None:
    """A second connect is 409 admission_refused; ending an ended session is 409 session_ended."""
    set_script(stack, {"name": "silent", "caller": [], "model": []})
    session = client.create_session("Be brief.")
    client.connect(session["id"])
    status, answer = client.request("POST", f"/v1/sessions/{session['id']}/connect", {"sdp": "v=0"})
    assert (status, _code(answer)) == (409, "admission_refused")
    assert client.end(session["id"])["status"] == "ending"
    assert client.wait_for_status(session["id"], timeout_s=30)["status"] == "ended"
    status, answer = client.request("POST", f"/v1/sessions/{session['id']}/end", {})
    assert (status, _code(answer)) == (409, "session_ended")


def test_malformed_oversized_and_unknown_frames_become_incidents_and_lose_no_good_event(
    stack: Stack, client: Client
) -> None:
    """Bad provider frames mid-call are typed incidents, an unknown event type is logged, and
    the call around them completes with every transcript."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    session = client.create_session("You are the order desk.")
    call_id = client.connect(session["id"])["call_id"]
    assert wait_until(lambda: simulator_call(stack, call_id)["status"] == "active", 10)
    frames: list[Any] = [
        "{this is not json",
        "[1, 2, 3]",
        '{"event_id": "ev_no_type"}',
        '{"type": "response.done", "event_id": "ev_bad_done"}',
        '{"type": "switchboard.end_requested", "reason": "spoofed"}',
        json.dumps({"type": "response.output_text.delta", "event_id": "e", "item_id": 7, "delta": "x"}),
        json.dumps({"type": "foo.bar", "event_id": "ev_unknown", "detail": 1}),
        {"event": {"type": "foo.bar", "event_id": "ev_huge"}, "pad_to_bytes": 1024 * 1024 + 10},
        # The incident about each of these quotes what PostgreSQL refuses (a raw U+0000, JSON
        # nested past the stack): it must be stored all the same.
        '{"type": "response.done", "event_id": "ev_nul", "response": "\x00"}',
        '{"type": "foo.deep", "x": ' + "[" * 5_000 + "]" * 5_000 + "}",
    ]
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/calls/{call_id}/inject", data=json.dumps({"frames": frames}).encode(), method="POST"
    )
    urllib.request.urlopen(request, timeout=10).close()

    record = client.wait_for_status(session["id"], timeout_s=60)
    assert record["status"] == "ended"
    assert record["end_reason"] == "caller_hung_up"
    assert len(record["transcript"]) == 6
    assert wait_until(lambda: len(client.session(session["id"])["incidents"]) >= 9, 10)
    full = client.session(session["id"], events=True)
    codes = sorted(incident["code"] for incident in full["incidents"])
    assert codes == ["malformed_provider_frame"] * 8 + ["oversized_provider_frame"]
    unknown = [event for event in full["log"] if event["kind"] == "foo.bar"]
    assert [(event["disposition"], event["controls"]) for event in unknown] == [("applied", [])]
    assert set(full["events"]) == {"applied"}
    assert simulator_call(stack, call_id)["errors"] == []


def test_a_bearer_token_with_non_ascii_characters_is_a_401_everywhere(stack: Stack) -> None:
    """A token holding 'é' is refused with 401 on the API and the live stream (comparing it as
    str raised, and every route answered 500)."""
    token = f"Bearer {stack.api_token}é".encode().decode("latin-1")
    for method, path in (("GET", "/v1/sessions/sess_x"), ("POST", "/v1/sessions")):
        status, body = _raw(stack, method, path, b"{}", {"Authorization": token})
        assert (status, _code(body)) == (401, "unauthorized"), path
    try:
        connect(
            f"{stack.live_url}/v1/sessions/sess_x/live",
            additional_headers={"Authorization": f"Bearer {stack.api_token}é"},
        )
    except InvalidStatus as refused:
        assert refused.response.status_code == 401
    else:
        raise AssertionError("a live stream with a non-ASCII token was accepted")


def test_json_nested_without_end_is_a_422(stack: Stack) -> None:
    """A body nested 400 (or 100,000) levels deep is a typed 422, not a 500."""
    auth = {"Authorization": f"Bearer {stack.api_token}", "Content-Type": "application/json"}
    for depth in (400, 100_000):
        body = b'{"instructions": "x", "tools": ' + b"[" * depth + b"]" * depth + b"}"
        status, answer = _raw(stack, "POST", "/v1/sessions", body, auth)
        assert (status, _code(answer)) == (422, "malformed_request"), depth
        assert "nested deeper" in answer["error"]["message"]


def test_limits_are_numbers_and_bounded(stack: Stack) -> None:
    """`max_output_tokens: true` is not 1, a numeric string is not a number, and the usage
    budget has an upper bound: each is a 422 naming the field."""
    auth = {"Authorization": f"Bearer {stack.api_token}", "Content-Type": "application/json"}
    for limits in (
        {"max_output_tokens": True},
        {"max_session_seconds": "60"},
        {"usage_budget_tokens": 10**12},
    ):
        body = json.dumps({"instructions": "x", "limits": limits}).encode()
        status, answer = _raw(stack, "POST", "/v1/sessions", body, auth)
        assert (status, _code(answer)) == (422, "malformed_request"), limits
        assert next(iter(limits)) in answer["error"]["message"]


def test_two_concurrent_ends_are_told_apart(stack: Stack, client: Client) -> None:
    """Of two ends sent at once, the one applied first is 202 and the other 409 session_ended:
    the worker that applies each in the call's order answers it."""
    set_script(stack, {"name": "silent", "caller": [], "model": []})
    for _ in range(3):
        session = client.create_session("Be brief.")
        client.connect(session["id"])
        path = f"/v1/sessions/{session['id']}/end"
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda end_path: client.request("POST", end_path, {}), [path] * 2))
        statuses = sorted(status for status, _ in answers)
        assert statuses == [202, 409], answers
        refused = next(body for status, body in answers if status == 409)
        assert _code(refused) == "session_ended"
