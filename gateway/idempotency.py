"""Idempotency-Key on every POST: one ASGI wrapper in front of the routes, so no handler
knows of it.

A POST carrying the header claims its key through a worker (`claim_idempotency_key`, a row in
PostgreSQL) before the route runs. The request that claims it runs the route and stores the
answer it gave (`finish_idempotency_key`); a duplicate gets the stored answer with
`Idempotent-Replayed: true`, 409 `request_in_progress` while the first still runs, 422
`idempotency_key_reused` for another request under the same key (`pipeline.api.idempotency`
decides). The key is its sender's: the claim names the API key of the request.

Every answer is stored, an error or a 5xx too: a request answered 503 `reply_timeout` may still
have acted, so running it again could act twice — except a create's: its ids derive from the key
(`idempotency.request_seed`), so a retry finds what an earlier run made instead of making it
again, and a 5xx of a create is not kept (kept, it was replayed for a day). A route that fails
before answering (an exception), or a claim whose answer never came, is let go, and the release
is asked for again until a worker has done it. If this gateway dies half-way, the claim stays
`running` until it is stale (`STALE_CLAIM_S`), and the next duplicate takes it over.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from typing import Any

from gateway.rpc import WorkerRpc
from gateway.web import ASGIApp, BodyRefused, Message, Receive, Scope, Send, error_response, header
from pipeline.api import idempotency
from pipeline.api.idempotency import Verdict
from pipeline.call.errors import MalformedIdempotencyKey

logger = logging.getLogger(__name__)

_HEADER = idempotency.HEADER.lower().encode()
# Recomputed when an answer is replayed; the rest of its headers are kept as they were.
_NOT_STORED = frozenset({b"content-length", b"date", b"server"})


def idempotent(
    app: ASGIApp,
    rpc: WorkerRpc,
    fingerprint_key: bytes,
    excluded: frozenset[str] = frozenset(),
    reruns_safely: frozenset[str] = frozenset(),
) -> ASGIApp:
    """`app` with Idempotency-Key honoured on every POST but those of the `excluded` paths
    (the provider's webhooks, which carry their own delivery ids). It runs after
    authentication: the request's identity (`scope["identity"]`) owns its keys. The paths of
    `reruns_safely` are creates that find what an earlier run made (their ids derive from the
    key: `scope["idempotency_seed"]`): a 5xx answer of theirs is not stored, so a retry runs."""
    releases = _Releases(rpc)

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        sent_key = header(scope, _HEADER, None) if scope["type"] == "http" else None
        identity = scope.get("identity")
        if sent_key is None or scope["method"] != "POST" or scope["path"] in excluded or identity is None:
            await app(scope, receive, send)
            return
        try:
            key = idempotency.checked_key(sent_key.decode("latin-1"))
        except MalformedIdempotencyKey as error:
            await error_response(422, error.code, str(error))(scope, receive, send)
            return
        try:
            messages, body = await _read_body(receive)
        except BodyRefused as refused:
            await error_response(refused.status_code, refused.code, str(refused.detail))(scope, receive, send)
            return
        target = scope["path"] + (
            "?" + scope["query_string"].decode("latin-1") if scope["query_string"] else ""
        )
        owner = identity.key_id
        claim_id = uuid.uuid4().hex
        status, claimed = await rpc.call(
            "claim_idempotency_key",
            owner=owner,
            key=key,
            fingerprint=idempotency.fingerprint("POST", target, body, fingerprint_key),
            claim_id=claim_id,
            now=time.time(),
        )
        if status != 200:
            # The claim may have been taken with its answer lost (a worker slow past the reply
            # timeout, a Redis restart): this claim is let go as soon as a worker can be asked,
            # or every retry would be answered request_in_progress until the claim went stale.
            releases.owe(owner, key, claim_id)
            await error_response(status, _code(claimed), "the Idempotency-Key could not be checked")(
                scope, receive, send
            )
            return
        verdict = Verdict(claimed["verdict"])
        if verdict is Verdict.REPLAY:
            await _replay(claimed["answer"], send)
            return
        if verdict is Verdict.REUSED:
            message = f"this {idempotency.HEADER} was sent with another request (method, path or body)"
            await error_response(422, "idempotency_key_reused", message)(scope, receive, send)
            return
        if verdict is Verdict.IN_PROGRESS:
            message = f"a request with this {idempotency.HEADER} is still running; retry when it has answered"
            await error_response(409, "request_in_progress", message)(scope, receive, send)
            return
        answer = _Recorded()
        scope = {**scope, "idempotency_seed": idempotency.request_seed(fingerprint_key, owner, key)}
        try:
            await app(scope, _replaying(messages, receive), answer.record)
        except BaseException:
            await releases.release(owner, key, claim_id)
            raise
        if answer.status >= 500 and scope["path"] in reruns_safely:
            # Not kept: a retry runs again and finds what this run made, if it made anything.
            await releases.release(owner, key, claim_id)
        else:
            # Stored before it is sent: a client that has its answer and asks again is replayed
            # it, never told the first is still running.
            stored, _ = await rpc.call(
                "finish_idempotency_key", owner=owner, key=key, claim_id=claim_id, answer=answer.stored()
            )
            if stored != 200:
                releases.owe(owner, key, claim_id)
        for sent in answer.messages:
            await send(sent)

    return guard


# A claim owed its release is asked for again this often, until a worker takes it or the claim
# is stale anyway (a duplicate takes a stale claim over).
RELEASE_EVERY_S = 1.0


class _Releases:
    """Claims this gateway must let go, asked for until a worker has done it: a release lost
    with Redis or a worker must not hold a key for STALE_CLAIM_S."""

    def __init__(self, rpc: WorkerRpc) -> None:
        self._rpc = rpc
        self._tasks: set[asyncio.Task[None]] = set()

    async def release(self, owner: str, key: str, claim_id: str) -> None:
        """Let the claim go now, or, if no worker takes it, owe it."""
        if not await self._released(owner, key, claim_id):
            self.owe(owner, key, claim_id)

    def owe(self, owner: str, key: str, claim_id: str) -> None:
        """Let the claim go in the background, asking until a worker has done it."""
        task = asyncio.get_running_loop().create_task(
            self._keep_asking(owner, key, claim_id), name=f"idempotency-release-{claim_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _keep_asking(self, owner: str, key: str, claim_id: str) -> None:
        given_up_at = time.monotonic() + idempotency.STALE_CLAIM_S
        while not await self._released(owner, key, claim_id) and time.monotonic() < given_up_at:
            await asyncio.sleep(RELEASE_EVERY_S)

    async def _released(self, owner: str, key: str, claim_id: str) -> bool:
        try:
            status, _ = await self._rpc.call(
                "finish_idempotency_key", owner=owner, key=key, claim_id=claim_id, answer=None
            )
        except Exception:  # noqa: BLE001 - Redis away: asked again later, as for a 5xx
            return False
        return status == 200


class _Recorded:
    """An answer kept whole (the routes answer in one piece), to be stored and then sent."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.status = 500
        self.headers: list[tuple[str, str]] = []
        self.body = bytearray()

    async def record(self, message: Message) -> None:
        self.messages.append(message)
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
            self.headers = [
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in message.get("headers", [])
                if name.lower() not in _NOT_STORED
            ]
        elif message["type"] == "http.response.body":
            self.body.extend(message.get("body", b""))

    def stored(self) -> dict[str, Any]:
        return {"status": self.status, "headers": self.headers, "body": base64.b64encode(self.body).decode()}


async def _replay(answer: dict[str, Any], send: Send) -> None:
    body = base64.b64decode(answer["body"])
    headers = [
        (str(name).encode("latin-1"), str(value).encode("latin-1")) for name, value in answer["headers"]
    ]
    headers += [
        (b"content-length", str(len(body)).encode()),
        (idempotency.REPLAYED_HEADER.lower().encode(), b"true"),
    ]
    await send({"type": "http.response.start", "status": int(answer["status"]), "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> tuple[list[Message], bytes]:
    """The request's body messages as they came (to hand on to the route) and its bytes."""
    messages: list[Message] = []
    body = bytearray()
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return messages, bytes(body)


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _code(body: dict[str, Any]) -> str:
    error = body.get("error")
    return str(error.get("code")) if isinstance(error, dict) else "idempotency_unavailable"
