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
from pipeline.api.idempotency import derived_id, fingerprint, fingerprint_key

KEY = fingerprint_key(b"the deployment's secret")


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
    app = idempotent(route, workers, KEY, excluded=frozenset({"/v1/webhooks/openai"}))  # type: ignore[arg-type]
    _run(app, key=None)
    _run(app, method="GET")
    _run(app, path="/v1/webhooks/openai")
    assert (route.runs, workers.asked) == (3, [])


def test_the_first_request_acts_and_its_answer_is_stored_under_its_claim() -> None:
    """The route runs once; the claim names the sender and the request's fingerprint; the answer
    stored is what the client got, headers and body, and it is stored before it is sent."""
    workers = _Workers()
    route = _Route()
    sent = _run(idempotent(route, workers, KEY), key="k1", sent=workers.sent)  # type: ignore[arg-type]
    assert (workers.sent_when_stored, len(sent)) == (0, 2)
    (claim, claimed), (finish, finished) = workers.asked
    assert (claim, finish, route.runs) == ("claim_idempotency_key", "finish_idempotency_key", 1)
    assert (claimed["owner"], claimed["key"]) == (DEPLOYMENT_TOKEN.key_id, "k1")
    assert claimed["fingerprint"] == fingerprint("POST", "/v1/sessions", b'{"instructions": "Hi"}', KEY)
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
    start, body = _run(idempotent(route, workers, KEY))  # type: ignore[arg-type]
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
    start, body = _run(idempotent(route, workers, KEY))  # type: ignore[arg-type]
    assert route.runs == 0 and start["status"] == status
    assert json.loads(body["body"])["error"]["code"] == code


def test_a_malformed_key_is_refused_before_any_worker_is_asked() -> None:
    """A key past 255 characters is 422 `malformed_idempotency_key`."""
    workers = _Workers()
    start, body = _run(idempotent(_Route(), workers, KEY), key="x" * 256)  # type: ignore[arg-type]
    assert (start["status"], workers.asked) == (422, [])
    assert json.loads(body["body"])["error"]["code"] == "malformed_idempotency_key"


def test_a_route_that_fails_lets_its_claim_go() -> None:
    """A route that raises stored nothing: its claim is released (finished without an answer)."""
    workers = _Workers()
    with pytest.raises(RuntimeError):
        _run(idempotent(_Route(fails=True), workers, KEY))  # type: ignore[arg-type]
    assert workers.asked[-1][0] == "finish_idempotency_key" and workers.asked[-1][1]["answer"] is None


class _LosingWorkers(_Workers):
    """The claim is taken but its answer lost (503), and the first `lost` releases are too."""

    def __init__(self, lost: int) -> None:
        super().__init__()
        self.lost = lost

    async def call(self, actor_name: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
        self.asked.append((actor_name, kwargs))
        if actor_name == "claim_idempotency_key":
            return 503, {"error": {"code": "reply_timeout", "message": "no worker answered"}}
        if self.lost > 0:
            self.lost -= 1
            return 503, {"error": {"code": "reply_timeout", "message": "no worker answered"}}
        return 200, {"kept": False}


def test_a_claim_whose_answer_was_lost_is_let_go_once_a_worker_answers(monkeypatch: Any) -> None:
    """A Redis blip lost the claim's answer: the client is told 503 at once, and the claim (which
    a worker may have taken) is released as soon as a worker takes the release, instead of
    answering every retry 409 request_in_progress until the claim goes stale."""
    monkeypatch.setattr("gateway.idempotency.RELEASE_EVERY_S", 0.01)
    workers = _LosingWorkers(lost=3)
    route = _Route()
    sent: list[Any] = []

    async def scenario() -> None:
        app = idempotent(route, workers, KEY)  # type: ignore[arg-type]
        headers = [(b"idempotency-key", b"k1")]
        scope = {"type": "http", "method": "POST", "path": "/v1/sessions", "query_string": b""}
        incoming = [{"type": "http.request", "body": b"{}", "more_body": False}]

        async def receive() -> Any:
            return incoming.pop(0) if incoming else {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            sent.append(message)

        await app({**scope, "headers": headers, "identity": DEPLOYMENT_TOKEN}, receive, send)
        for _ in range(500):
            if workers.lost == 0 and workers.asked[-1][0] == "finish_idempotency_key":
                break
            await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert sent[0]["status"] == 503 and route.runs == 0
    [claim_id] = {kwargs["claim_id"] for name, kwargs in workers.asked if name == "claim_idempotency_key"}
    releases = [kwargs for name, kwargs in workers.asked if name == "finish_idempotency_key"]
    assert len(releases) == 4 and all(r["claim_id"] == claim_id and r["answer"] is None for r in releases)


class _Unavailable(_Route):
    """A create that answers 503 (a worker did not answer in time), with the id it was given."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.runs += 1
        await receive()
        seed = scope.get("idempotency_seed")
        body = json.dumps({"error": {"code": "reply_timeout"}, "seed": seed}).encode()
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": body})


def test_a_create_answered_5xx_is_not_kept_and_its_retry_makes_the_same_ids() -> None:
    """A keyed create that answered 503 lets its claim go (kept, the 503 was replayed for a day),
    and its ids derive from the key: the retry finds what the first run made, if anything."""
    workers = _Workers()
    route = _Unavailable()
    reruns = frozenset({"/v1/sessions"})
    first = _run(idempotent(route, workers, KEY, reruns_safely=reruns))  # type: ignore[arg-type]
    again = _run(idempotent(route, workers, KEY, reruns_safely=reruns))  # type: ignore[arg-type]
    other = _run(idempotent(route, workers, KEY, reruns_safely=reruns), key="k2")  # type: ignore[arg-type]
    assert first[0]["status"] == 503 and route.runs == 3
    finished = [kwargs for name, kwargs in workers.asked if name == "finish_idempotency_key"]
    assert [f["answer"] for f in finished] == [None, None, None]
    seeds = [json.loads(sent[1]["body"])["seed"] for sent in (first, again, other)]
    assert seeds[0] == seeds[1] != seeds[2]
    assert derived_id(seeds[0], "sess") == derived_id(seeds[1], "sess") != derived_id(seeds[0], "call")
    # Anywhere else, a 5xx is kept: it may have acted, and running it again could act twice.
    kept = _Workers()
    _run(idempotent(_Unavailable(), kept, KEY), path="/v1/sessions/sess_1/agent/say")  # type: ignore[arg-type]
    assert kept.asked[-1][1]["answer"]["status"] == 503
