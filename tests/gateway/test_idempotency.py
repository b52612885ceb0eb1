"""The gateway's Idempotency-Key wrapper, driven as an ASGI app with a stand-in for the workers:
which requests it touches, what it stores and when, and what a replay sends."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from gateway.idempotency import idempotent
from gateway.keys import DEPLOYMENT_TOKEN
from pipeline.idempotency import fingerprint


class _Workers:
    """Answers the two idempotency actors as told, and keeps what it was asked."""

    def __init__(self, verdict: str = "proceed", answer: dict[str, Any] | None = None) -> None:
        self.verdict = verdict
        self.answer = answer
        self.asked: list[tuple[str, dict[str, Any]]] = []
        # What the client had been sent when the answer was stored.
        self.sent: list[Any] = []
        self.sent_when_stored: int | None = None

    async def call(self, actor_name: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        self.asked.append((actor_name, kwargs))
        if actor_name == "claim_idempotency_key":
            return 200, {"verdict": self.verdict, "answer": self.answer}
        self.sent_when_stored = len(self.sent)
        return 200, {"kept": True}


class _Route:
    """A route that answers 201 with the body it read, or raises."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.runs = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.runs += 1
        message = await receive()
        if self.fails:
            raise RuntimeError("a bug in a handler")
        body = json.dumps({"read": message["body"].decode()}).encode()
        await send({"type": "http.response.start", "status": 201, "headers": [(b"x-call-id", b"call_1")]})
        await send({"type": "http.response.body", "body": body})


def _run(
    app: Any,
    method: str = "POST",
    path: str = "/v1/sessions",
    key: str | None = "k1",
    sent: list[Any] | None = None,
) -> list[Any]:
    """The messages `app` sent for one request (into `sent`, when given)."""
    headers = [(b"idempotency-key", key.encode())] if key is not None else []
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": b"",
        "headers": headers,
        "identity": DEPLOYMENT_TOKEN,
    }
    incoming = [{"type": "http.request", "body": b'{"instructions": "Hi"}', "more_body": False}]
    sent = [] if sent is None else sent

    async def receive() -> Any:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def test_requests_without_a_key_and_other_methods_are_not_touched() -> None:
    """No key, a GET, or an excluded path (the provider's webhook): the route runs, no worker is asked."""
    workers = _Workers()
    route = _Route()
    app = idempotent(route, workers, excluded=frozenset({"/v1/webhooks/openai"}))  # type: ignore[arg-type]
    _run(app, key=None)
    _run(app, method="GET")
    _run(app, path="/v1/webhooks/openai")
    assert (route.runs, workers.asked) == (3, [])


def test_the_first_request_acts_and_its_answer_is_stored_under_its_claim() -> None:
    """The route runs once; the claim names the sender and the request's fingerprint; the answer
    stored is what the client got, headers and body, and it is stored before it is sent."""
    workers = _Workers()
    route = _Route()
    sent = _run(idempotent(route, workers), key="k1", sent=workers.sent)  # type: ignore[arg-type]
    assert (workers.sent_when_stored, len(sent)) == (0, 2)
    (claim, claimed), (finish, finished) = workers.asked
    assert (claim, finish, route.runs) == ("claim_idempotency_key", "finish_idempotency_key", 1)
    assert (claimed["owner"], claimed["key"]) == (DEPLOYMENT_TOKEN.key_id, "k1")
    assert claimed["fingerprint"] == fingerprint("POST", "/v1/sessions", b'{"instructions": "Hi"}')
    assert finished["claim_id"] == claimed["claim_id"]
    answer = finished["answer"]
    assert (answer["status"], answer["headers"]) == (201, [("x-call-id", "call_1")])
    assert base64.b64decode(answer["body"]) == sent[1]["body"]
    assert json.loads(sent[1]["body"]) == {"read": '{"instructions": "Hi"}'}


def test_a_replay_sends_the_stored_answer_and_says_so() -> None:
    """A replay runs nothing: the stored status, headers and body, with Idempotent-Replayed."""
    stored = {"status": 201, "headers": [["x-call-id", "call_1"]], "body": base64.b64encode(b"{}").decode()}
    workers = _Workers("replay", stored)
    route = _Route()
    start, body = _run(idempotent(route, workers))  # type: ignore[arg-type]
    assert route.runs == 0 and [name for name, _ in workers.asked] == ["claim_idempotency_key"]
    assert start["status"] == 201 and body["body"] == b"{}"
    assert set(start["headers"]) == {
        (b"x-call-id", b"call_1"),
        (b"content-length", b"2"),
        (b"idempotent-replayed", b"true"),
    }


@pytest.mark.parametrize(
    ("verdict", "status", "code"),
    [("reused", 422, "idempotency_key_reused"), ("in_progress", 409, "request_in_progress")],
)
def test_a_refused_duplicate_runs_nothing(verdict: str, status: int, code: str) -> None:
    """Another body under the key, or the first still running: a typed error, the route untouched."""
    workers = _Workers(verdict)
    route = _Route()
    start, body = _run(idempotent(route, workers))  # type: ignore[arg-type]
    assert route.runs == 0 and start["status"] == status
    assert json.loads(body["body"])["error"]["code"] == code


def test_a_malformed_key_is_refused_before_any_worker_is_asked() -> None:
    """A key past 255 characters is 422 `malformed_idempotency_key`."""
    workers = _Workers()
    start, body = _run(idempotent(_Route(), workers), key="x" * 256)  # type: ignore[arg-type]
    assert (start["status"], workers.asked) == (422, [])
    assert json.loads(body["body"])["error"]["code"] == "malformed_idempotency_key"


def test_a_route_that_fails_lets_its_claim_go() -> None:
    """A route that raises stored nothing: its claim is released (finished without an answer)."""
    workers = _Workers()
    with pytest.raises(RuntimeError):
        _run(idempotent(_Route(fails=True), workers))  # type: ignore[arg-type]
    assert workers.asked[-1][0] == "finish_idempotency_key" and workers.asked[-1][1]["answer"] is None
