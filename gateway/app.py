"""The gateway process: HTTP API, provider sidebands, live transcripts, control consumer."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import threading
import time
import uuid
from typing import Any

import dramatiq
import redis
from kombu import Connection, Exchange, Queue  # type: ignore[attr-defined]
from pydantic import ValidationError
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request as WsRequest
from websockets.http11 import Response as WsResponse

from gateway.live import LiveHub
from gateway.provider import RealtimeProvider
from gateway.sink import EventSink
from gateway.sockets import CallSocket
from pipeline import compaction
from pipeline.api import ConnectRequest, EndRequest, SessionSpec, TypedText
from pipeline.config import Settings
from pipeline.envelope import CloseCall, OpenSideband, OutboundBatch, Reply, SendControl
from pipeline.errors import BadInput, MalformedRequest, ProviderUnavailable
from pipeline.limits import (
    API_REPLY_TIMEOUT_MS,
    COMPACTION_REPLY_TIMEOUT_MS,
    GATEWAY_DEAD_AFTER_MS,
    GATEWAY_HEARTBEAT_MS,
    TYPED_MESSAGES_PER_MINUTE,
)
from pipeline.names import control_queue
from pipeline.wire import FrameKind, classify_frame, function_call_id, holds_unstorable
from switchboard.http import Request, Response, serve_http

logger = logging.getLogger(__name__)

# After a control-queue connection failure, the consumer waits this long before reconnecting.
CONTROL_QUEUE_RECONNECT_S = 0.5
# A gateway's claim on a dead peer's sessions lapses after this, so a failed takeover is retried.
TAKEOVER_CLAIM_MS = 30_000

_SESSION_PATH = re.compile(
    r"^/v1/sessions/(?P<id>[A-Za-z0-9_\-]{1,64})(?P<action>/connect|/end|/compact|/say|/interrupt|/live)?$"
)
_USER_TRANSCRIPT_PREFIX = "conversation.item.input_audio_transcription."
_ASSISTANT_AUDIO_DELTA = "response.output_audio_transcript.delta"
_LIVE_STATUSES = ("connected", "listening", "responding")


class Gateway:
    def __init__(
        self,
        settings: Settings,
        redis_url: str,
        kombu_url: str,
        broker: dramatiq.Broker,
        provider: RealtimeProvider,
    ) -> None:
        self.settings = settings
        self.gateway_id = settings.gateway_id
        self.provider = provider
        self._kombu_url = kombu_url
        self.sink = EventSink(redis_url, broker, self.gateway_id, settings.broker_namespace)
        self._redis = redis.Redis.from_url(redis_url)
        self.live = LiveHub()
        self.sockets: dict[str, CallSocket] = {}
        self._pending: dict[str, asyncio.Future[tuple[int, dict[str, Any]]]] = {}
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._stopping = threading.Event()
        self._http: asyncio.Server | None = None
        self._ws: Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._consumer: threading.Thread | None = None
        self.http_port = 0
        self.ws_port = 0

    # ── lifecycle ──────────────────────────────────────────────────────────────────────

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._http = await serve_http(
            self._handle_http, self.settings.gateway_host, self.settings.gateway_port
        )
        self.http_port = self._http.sockets[0].getsockname()[1]
        self._ws = await serve(
            self._serve_live,
            self.settings.gateway_host,
            self.settings.gateway_ws_port,
            process_request=self._authorize_live,
        )
        self.ws_port = next(iter(self._ws.sockets)).getsockname()[1]
        ready = threading.Event()
        self._consumer = threading.Thread(
            target=self._consume_controls, args=(loop, ready), name="control-consumer", daemon=True
        )
        self._consumer.start()
        await asyncio.to_thread(ready.wait, 10)
        self._tasks.append(loop.create_task(self._dispatch_outbound(), name="outbound"))
        self._tasks.append(loop.create_task(self._keep_alive(), name="keep-alive"))

    async def stop(self) -> None:
        self._stopping.set()
        # A stopping gateway is as good as dead to its peers: one takes its calls over at once.
        with contextlib.suppress(redis.RedisError):
            await asyncio.to_thread(self._redis.delete, self._alive_key(self.gateway_id))
        for socket in list(self.sockets.values()):
            await socket.close()
        for task in self._tasks:
            task.cancel()
        if self._http is not None:
            self._http.close()
        if self._ws is not None:
            self._ws.close()
        if self._consumer is not None:
            await asyncio.to_thread(self._consumer.join, 5)
        self.sink.close()
        self._redis.close()

    # ── liveness and takeover ──────────────────────────────────────────────────────────

    async def _keep_alive(self) -> None:
        """Renew this gateway's liveness key; take over the sessions of a gateway whose key
        expired (and, once at start, those this gateway's id held in a previous life)."""
        first = True
        while True:
            try:
                dead = await asyncio.to_thread(self._beat_and_look)
                if first:
                    dead = [self.gateway_id, *dead]
                    first = False
                for gateway_id in dead:
                    await self._take_over(gateway_id)
            except redis.RedisError as error:
                logger.warning("gateway heartbeat failed: %r", error)
            await asyncio.sleep(GATEWAY_HEARTBEAT_MS / 1000)

    def _beat_and_look(self) -> list[str]:
        """One heartbeat; answers the gateways found dead that this one claimed to take over."""
        registry = f"{self.settings.broker_namespace}:gateways"
        beat = self._redis.pipeline()
        beat.set(self._alive_key(self.gateway_id), "1", px=GATEWAY_DEAD_AFTER_MS)
        beat.sadd(registry, self.gateway_id)
        beat.smembers(registry)
        *_, members = beat.execute()
        claimed = []
        for member in members:
            gateway_id = member.decode()
            if gateway_id == self.gateway_id or self._redis.exists(self._alive_key(gateway_id)):
                continue
            # One live gateway wins each dead one; the claim lapses if its takeover fails.
            claim = f"{self.settings.broker_namespace}:gateway-takeover:{gateway_id}"
            if self._redis.set(claim, self.gateway_id, nx=True, px=TAKEOVER_CLAIM_MS):
                claimed.append(gateway_id)
        return claimed

    async def _take_over(self, dead_gateway: str) -> None:
        status, body = await self._rpc(
            "take_over", timeout_ms=TAKEOVER_CLAIM_MS, dead_gateway=dead_gateway, now=time.time()
        )
        if status != 200:
            logger.warning("takeover of %s's sessions failed: %s %s", dead_gateway, status, body)
            return
        sessions = body["sessions"]
        if dead_gateway != self.gateway_id:
            await asyncio.to_thread(
                self._redis.srem, f"{self.settings.broker_namespace}:gateways", dead_gateway
            )
        if sessions or dead_gateway != self.gateway_id:
            logger.warning("took over %d sessions of gateway %s", len(sessions), dead_gateway)

    def _alive_key(self, gateway_id: str) -> str:
        return f"{self.settings.broker_namespace}:gateway-alive:{gateway_id}"

    # ── provider frames ────────────────────────────────────────────────────────────────

    def _on_frame(self, socket: CallSocket, frame: str | bytes, received_at: float) -> None:
        try:
            classified = classify_frame(frame)
        except BadInput as error:
            preview = frame[:200] if isinstance(frame, str) else frame[:200].decode(errors="replace")
            logger.warning("bad frame on %s: %s", socket.session_id, error)
            self.sink.submit_incident(
                socket.session_id, error.code, str(error), {"frame_preview": preview, "bytes": len(frame)}
            )
            return
        event = classified.event
        if socket.is_unspoken(event.get("response_id")):
            # A maintenance response's text is a compaction summary, not something said.
            if classified.kind is FrameKind.DURABLE:
                self.sink.submit_event(socket.session_id, socket.generation, event, received_at)
            return
        if classified.kind is FrameKind.LIVE:
            role = "user" if classified.type.startswith(_USER_TRANSCRIPT_PREFIX) else "assistant"
            if classified.type == _ASSISTANT_AUDIO_DELTA:
                socket.heard_delta(event["item_id"], str(event.get("response_id", "")), time.monotonic())
            self.live.delta(socket.session_id, role, event["item_id"], event.get("delta", ""))
            return
        if classified.kind is FrameKind.IGNORED:
            return
        call_id = function_call_id(event)
        if call_id is not None and not socket.first_sight_of_call(call_id):
            # The provider names each function call twice (arguments done, then the item done);
            # one durable event is enough, and the workers take a call up once anyway.
            return
        if classified.type == "input_audio_buffer.speech_started":
            # The workers decide on a barge-in; only the gateway knows what was playing. A
            # provider's own "playback" field is never trusted.
            event = {key: value for key, value in event.items() if key != "playback"}
            playback = socket.playback(time.monotonic())
            if playback is not None:
                event["playback"] = playback
        if classified.type == "response.created" and compaction.is_maintenance_metadata(
            (event.get("response") or {}).get("metadata")
        ):
            socket.mark_unspoken(str(event["response"].get("id")))
        self.sink.submit_event(socket.session_id, socket.generation, event, received_at)
        self._project_final(socket.session_id, event)

    def _project_final(self, session_id: str, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "conversation.item.input_audio_transcription.completed":
            self.live.final(session_id, "user", event["item_id"], event.get("transcript", ""))
        elif kind in ("response.output_audio_transcript.done", "response.output_text.done"):
            text = event.get("transcript", event.get("text", ""))
            self.live.final(session_id, "assistant", event["item_id"], text)

    def _on_host_event(self, socket: CallSocket, event: dict[str, Any]) -> None:
        if event["type"] == "switchboard.sideband_closed" and self.sockets.get(socket.session_id) is socket:
            del self.sockets[socket.session_id]
        self.sink.submit_event(socket.session_id, socket.generation, event, time.time())

    # ── outbound: controls and directives from the workers ─────────────────────────────

    def _consume_controls(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        """The control queue's consumer thread: it outlives connection failures (a Redis
        restart), reconnecting until the gateway stops."""
        while not self._stopping.is_set():
            try:
                self._drain_control_queue(loop, ready)
            except Exception:  # any failure of the connection: log, wait, reconnect
                logger.exception("control queue consumer failed; reconnecting")
                self._stopping.wait(CONTROL_QUEUE_RECONNECT_S)
        ready.set()

    def _drain_control_queue(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        name = control_queue(self.gateway_id)
        with Connection(self._kombu_url) as connection:
            # Acknowledged on receipt (no_ack): the batch is handed to the event loop at once, and
            # a separate ack would cost a Redis round trip per batch for no added safety. It must
            # be given to SimpleQueue itself: its consumer ignores the Queue's own no_ack, so each
            # batch went into kombu's unacked hash (two writes and a new client per batch) and,
            # never acked, would be delivered again when that hash's visibility timeout ran out.
            queue = connection.SimpleQueue(
                Queue(name, exchange=Exchange("", type="direct"), routing_key=name, no_ack=True),
                no_ack=True,
            )
            ready.set()
            try:
                while not self._stopping.is_set():
                    try:
                        message = queue.get(block=True, timeout=1)
                    except queue.Empty:
                        continue
                    loop.call_soon_threadsafe(self._inbox.put_nowait, message.payload)
            finally:
                queue.close()

    async def _dispatch_outbound(self) -> None:
        while True:
            payload = await self._inbox.get()
            try:
                batch = OutboundBatch.model_validate(payload)
                await self._carry_out(batch)
            except Exception:
                logger.exception("outbound batch failed")

    async def _carry_out(self, batch: OutboundBatch) -> None:
        if batch.applied_seq is not None:
            self.sink.applied(batch.session_id, batch.applied_seq)
        for item in batch.items:
            if isinstance(item, Reply):
                future = self._pending.pop(item.request_id, None)
                if future is not None and not future.done():
                    future.set_result((item.status, item.body))
            elif isinstance(item, SendControl):
                socket = self.sockets.get(batch.session_id)
                # A control for another generation belongs to a superseded sideband.
                if socket is None or socket.generation != batch.generation:
                    continue
                if await socket.send(item.id, item.control):
                    self.live.publish(batch.session_id, {"type": "control", "control": item.control})
            elif isinstance(item, OpenSideband):
                self._open_sideband(batch.session_id, item.call_id, batch.generation)
            elif isinstance(item, CloseCall):
                await self._close_call(batch.session_id, item)

    def _open_sideband(self, session_id: str, call_id: str, generation: int) -> None:
        existing = self.sockets.get(session_id)
        if existing is not None and existing.generation == generation:
            return
        socket = CallSocket(
            session_id,
            call_id,
            generation,
            self.provider.sideband_url(call_id),
            self.provider.sideband_headers(),
            self._on_frame,
            self._on_host_event,
        )
        self.sockets[session_id] = socket
        socket.start()

    async def _close_call(self, session_id: str, directive: CloseCall) -> None:
        socket = self.sockets.pop(session_id, None)
        if socket is not None:
            await socket.close()
        if directive.hangup and directive.call_id:
            try:
                await self.provider.hangup(directive.call_id)
            except ProviderUnavailable as error:
                logger.warning("hangup of %s failed: %s", directive.call_id, error)
        self.live.publish(session_id, {"type": "session.closed", "reason": directive.reason})
        self.live.forget(session_id)
        self.sink.forget(session_id)

    # ── API ────────────────────────────────────────────────────────────────────────────

    async def _handle_http(self, request: Request) -> Response:
        if request.path == "/healthz":
            return Response.json(200, {"status": "ok", "gateway": self.gateway_id})
        if not self._authorized(request.headers.get("authorization", "")):
            return Response.json(
                401,
                _error("unauthorized", "a valid bearer token is required"),
                {"WWW-Authenticate": 'Bearer realm="switchboard"'},
            )
        if request.path == "/v1/sessions":
            if request.method != "POST":
                return Response.json(405, _error("method_not_allowed", "use POST"))
            return await self._create_session(request)
        match = _SESSION_PATH.match(request.path)
        if match is None:
            return Response.json(404, _error("not_found", f"no route {request.path}"))
        session_id, action = match["id"], match["action"]
        expected = "GET" if action is None else "POST"
        if request.method != expected or action == "/live":
            return Response.json(405, _error("method_not_allowed", f"use {expected}"))
        if action is None:
            return await self._rpc_response(
                "describe_session", session_id=session_id, with_events=request.query.get("events") == "1"
            )
        if action == "/connect":
            return await self._connect(session_id, request)
        if action == "/compact":
            return await self._compact(session_id, request)
        if action == "/say":
            return await self._say(session_id, request)
        if action == "/interrupt":
            return await self._interrupt(session_id, request)
        return await self._end(session_id, request)

    async def _create_session(self, request: Request) -> Response:
        try:
            spec = SessionSpec.model_validate(_json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        session_id = f"sess_{uuid.uuid4().hex}"
        return await self._rpc_response(
            "create_session", session_id=session_id, spec=spec.model_dump(mode="json"), now=time.time()
        )

    async def _connect(self, session_id: str, request: Request) -> Response:
        try:
            sdp = _sdp_offer(request)
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        status, body = await self._rpc("begin_admission", session_id=session_id, now=time.time())
        if status != 200:
            return Response.json(status, body)
        session: dict[str, Any] = {"instructions": body["instructions"]}
        if body.get("tools"):
            session["tools"] = body["tools"]
        try:
            call = await self.provider.create_call(sdp, session)
        except ProviderUnavailable as error:
            code = "provider_rejected_call" if getattr(error, "status", None) else "provider_unavailable"
            await self._rpc(
                "admission_failed", session_id=session_id, code=code, detail=str(error), now=time.time()
            )
            return Response.json(502, _error(code, str(error)))
        status, body = await self._rpc(
            "attach_call", session_id=session_id, call_id=call.call_id, now=time.time()
        )
        if status != 200:
            return Response.json(status, body)
        if "application/json" in request.headers.get("accept", ""):
            return Response.json(
                201, {"session_id": session_id, "call_id": call.call_id, "sdp": call.sdp_answer}
            )
        return Response(
            201,
            call.sdp_answer.encode(),
            {"Content-Type": "application/sdp", "X-Switchboard-Call-Id": call.call_id},
        )

    async def _end(self, session_id: str, request: Request) -> Response:
        try:
            end = EndRequest.model_validate(_json_body(request) if request.body else {})
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        status, body = await self._rpc("describe_session", session_id=session_id)
        if status != 200:
            return Response.json(status, body)
        if body["status"] in ("ended", "failed"):
            return Response.json(409, _error("session_ended", f"session is {body['status']}"))
        event = {"type": "switchboard.end_requested", "reason": end.reason}
        generation = int(body["generation"])
        self.sink.submit_event(session_id, generation, event, time.time())
        return Response.json(202, {"session_id": session_id, "status": "ending", "reason": end.reason})

    async def _live_session(self, session_id: str) -> tuple[dict[str, Any] | None, Response | None]:
        """The session's record if its call is live, else the answer that says why not."""
        status, body = await self._rpc("describe_session", session_id=session_id)
        if status != 200:
            return None, Response.json(status, body)
        if body["status"] not in _LIVE_STATUSES:
            return None, Response.json(409, _error("session_not_live", f"session is {body['status']}"))
        return body, None

    async def _say(self, session_id: str, request: Request) -> Response:
        """Typed text into a live call: answered like speech. Trimmed, non-empty, bounded, and
        at most TYPED_MESSAGES_PER_MINUTE a minute per session."""
        try:
            typed = TypedText.model_validate(_json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        record, refusal = await self._live_session(session_id)
        if record is None:
            assert refusal is not None
            return refusal
        if not await asyncio.wrap_future(self.sink.within_rate(session_id, "say", TYPED_MESSAGES_PER_MINUTE)):
            message = f"at most {TYPED_MESSAGES_PER_MINUTE} typed messages a minute per session"
            return Response.json(429, _error("rate_limited", message), {"Retry-After": "60"})
        item_id = f"item_typed_{uuid.uuid4().hex[:16]}"
        event = {"type": "switchboard.text_injected", "item_id": item_id, "text": typed.text}
        self.sink.submit_event(session_id, int(record["generation"]), event, time.time())
        return Response.json(202, {"session_id": session_id, "item_id": item_id, "status": "queued"})

    async def _interrupt(self, session_id: str, request: Request) -> Response:
        """Stop the response that is playing, as if the caller had talked over it."""
        if request.body.strip() not in (b"", b"{}"):
            return Response.json(422, _error("malformed_request", "interrupt takes no parameters"))
        record, refusal = await self._live_session(session_id)
        if record is None:
            assert refusal is not None
            return refusal
        event: dict[str, Any] = {"type": "switchboard.interrupt_requested"}
        socket = self.sockets.get(session_id)
        if socket is not None:
            # Only the gateway holding the sideband knows what is playing.
            event["playback"] = socket.playback(time.monotonic())
        self.sink.submit_event(session_id, int(record["generation"]), event, time.time())
        return Response.json(202, {"session_id": session_id, "status": "interrupting"})

    async def _compact(self, session_id: str, request: Request) -> Response:
        """Force a compaction: answered when its cycle ends (compacted or not, and why), or
        202 if it is still running when the wait is over (the session record then tells)."""
        if request.body.strip() not in (b"", b"{}"):
            return Response.json(422, _error("malformed_request", "compact takes no parameters"))
        status, body = await self._rpc("describe_session", session_id=session_id)
        if status != 200:
            return Response.json(status, body)
        if body["status"] in ("ended", "failed"):
            return Response.json(409, _error("session_ended", f"session is {body['status']}"))
        request_id = uuid.uuid4().hex
        event = {
            "type": "switchboard.compaction_requested",
            "request_id": request_id,
            "gateway_id": self.gateway_id,
        }
        reply = self._expect_reply(request_id)
        self.sink.submit_event(session_id, int(body["generation"]), event, time.time())
        answer = await self._await_reply(request_id, reply, COMPACTION_REPLY_TIMEOUT_MS)
        if answer is None:
            message = "the compaction is still running; its outcome will be in the session record"
            return Response.json(202, {"session_id": session_id, "status": "compacting", "message": message})
        return Response.json(*answer)

    async def _rpc(
        self, actor_name: str, timeout_ms: int = API_REPLY_TIMEOUT_MS, **kwargs: Any
    ) -> tuple[int, dict[str, Any]]:
        request_id = uuid.uuid4().hex
        reply = self._expect_reply(request_id)
        self.sink.submit_request(actor_name, request_id=request_id, gateway_id=self.gateway_id, **kwargs)
        answer = await self._await_reply(request_id, reply, timeout_ms)
        if answer is None:
            return 503, _error("reply_timeout", f"no worker answered {actor_name} in time")
        return answer

    def _expect_reply(self, request_id: str) -> asyncio.Future[tuple[int, dict[str, Any]]]:
        future: asyncio.Future[tuple[int, dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        return future

    async def _await_reply(
        self, request_id: str, future: asyncio.Future[tuple[int, dict[str, Any]]], timeout_ms: int
    ) -> tuple[int, dict[str, Any]] | None:
        try:
            return await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            return None
        finally:
            self._pending.pop(request_id, None)

    async def _rpc_response(self, actor_name: str, **kwargs: Any) -> Response:
        status, body = await self._rpc(actor_name, **kwargs)
        return Response.json(status, body)

    def _authorized(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), self.settings.api_token)

    # ── live transcripts ───────────────────────────────────────────────────────────────

    def _authorize_live(self, connection: ServerConnection, request: WsRequest) -> WsResponse | None:
        path, _, query = request.path.partition("?")
        match = _SESSION_PATH.match(path)
        if match is None or match["action"] != "/live":
            return connection.respond(404, "no such live endpoint\n")
        token = dict(part.partition("=")[::2] for part in query.split("&") if part).get("token", "")
        header = request.headers.get("Authorization", f"Bearer {token}")
        if not self._authorized(header):
            return WsResponse(
                401, "Unauthorized", Headers([("WWW-Authenticate", "Bearer")]), b"unauthorized\n"
            )
        return None

    async def _serve_live(self, connection: ServerConnection) -> None:
        assert connection.request is not None
        match = _SESSION_PATH.match(connection.request.path.partition("?")[0])
        assert match is not None
        await self.live.serve(match["id"], connection)


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _invalid(error: Exception) -> Response:
    if isinstance(error, ValidationError):
        problems = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()]
        return Response.json(422, {"error": {"code": "malformed_request", "message": "; ".join(problems)}})
    return Response.json(422, _error(getattr(error, "code", "malformed_request"), str(error)))


def _json_body(request: Request) -> Any:
    try:
        body = json.loads(request.body or b"null")
    except ValueError as error:
        raise MalformedRequest(f"body is not JSON: {error}") from error
    if holds_unstorable(body):
        raise MalformedRequest("body holds U+0000 or a lone surrogate, which cannot be stored")
    return body


def _sdp_offer(request: Request) -> str:
    if request.headers.get("content-type", "").startswith("application/sdp"):
        return ConnectRequest(sdp=request.body.decode(errors="replace")).sdp
    return ConnectRequest.model_validate(_json_body(request)).sdp
