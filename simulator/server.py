"""The simulated provider: Realtime call control over HTTP and the sideband over WebSocket.

REST (PROTOCOL.md §1.1-1.2), on the HTTP port, Bearer auth required:
    POST /v1/realtime/calls                  SDP offer (multipart sdp+session, or application/sdp)
                                             → 201, SDP answer, Location: /v1/realtime/calls/rtc_…
    POST /v1/realtime/calls/{id}/hangup      → 200; closes the sideband with 1000 (404 if gone)
    POST /v1/realtime/calls/{id}/accept      → 200 (a JSON session config sets the call's session);
                                             400 call_already_accepted the second time
    POST /v1/realtime/calls/{id}/reject      → 200 {status_code?}; ends the call
    POST /v1/realtime/calls/{id}/refer       → 200 {target_uri}; the caller goes there, the call ends
A session config (a create's or an accept's) naming a model, transcription model or voice the
simulator does not serve, or reasoning settings for a model without them, is 400 with the field
as `param` (simulator.models); `session.update` on the sideband is refused the same way.
Control API, on the same port, no auth:
    PUT  /_sim/script                        the call script for calls created from now on
    GET  /_sim/calls                         {"calls": [call ids]}
    GET  /_sim/calls/{id}                    the call log (see CallLog)
    GET  /_sim/calls/{id}/status             {"call_id", "status"}: cheap to poll
    POST /_sim/calls/{id}/drop?code=1011     close the sideband without ending the call (a fault);
                                             &refuse=1 also refuses every later sideband of it;
                                             &end=1 then ends the call (its caller hung up unheard)
    POST /_sim/calls/{id}/inject             {"frames": [raw text, ...]} sent verbatim (a fault)
    POST /_sim/sip/calls                     a phone call rings: {to, from, webhook_url, secret,
                                             duplicates?, retries?, …} (see simulator.sip) → 201
                                             {call_id, webhook_id}; the signed webhook is delivered
Sideband (§1.3), on the WebSocket port: GET /v1/realtime?call_id=… with Bearer auth.

The Live API (GPT-Live) is a second mode on the same ports: /v1/live/… and /_sim/live/…, and
the sideband /v1/live/sessions/{id}/attach (see simulator.live).
"""

from __future__ import annotations

import asyncio
import email.policy
import json
import logging
import secrets
import socket
import time
from email.parser import BytesParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import uvicorn
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request as HandshakeRequest
from websockets.http11 import Response as HandshakeResponse

from simulator.call import CallLog, IdMint, SimulatedCall
from simulator.conversation import default_session, merge_session
from simulator.judge import judge_completion
from simulator.live import LiveProvider, is_live_path
from simulator.live_dial import RINGING_LIMIT_MS, DialPlan
from simulator.live_script import LiveScript
from simulator.models import ModelRefusal, realtime_session_refusal
from simulator.oracle import wire_errors
from simulator.playback import GATE_TIMEOUT_S
from simulator.recording import Recording, read_recording
from simulator.script import CallScript, load_script, parse_script
from simulator.sip import PlaceCall, Ringing, announce

logger = logging.getLogger(__name__)

# input_audio_buffer.append may carry up to 15 MiB of base64 (PROTOCOL.md §3); leave headroom.
MAXIMUM_SIDEBAND_MESSAGE_BYTES = 16 * 1024 * 1024
# Sent since the beta shutdown to a client that still asks for the beta shape (§1).
BETA_SHAPE_CLOSE_CODE = 4000
CALL_ACTIONS = ("hangup", "accept", "reject", "refer")


# Injected faults stay below the sideband's own message limit (16 MiB).
MAXIMUM_INJECTED_FRAME_BYTES = 8 * 1024 * 1024
# REST bodies (an SDP offer and a session, a script, a batch of injected frames) stay far
# below this; a larger one is refused before it is read.
MAXIMUM_REST_BODY_BYTES = 1024 * 1024


def _sdp_answer() -> str:
    """A plausible WebRTC answer: one Opus audio line and a data channel, fresh ICE credentials."""
    fingerprint = ":".join(f"{b:02X}" for b in secrets.token_bytes(32))
    ice = f"a=ice-ufrag:{secrets.token_hex(4)}\r\na=ice-pwd:{secrets.token_hex(12)}\r\n"
    return (
        "v=0\r\n"
        f"o=- {secrets.randbits(62)} 2 IN IP4 127.0.0.1\r\n"
        "s=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\na=msid-semantic: WMS realtime\r\n"
        "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=rtcp:9 IN IP4 0.0.0.0\r\n"
        f"{ice}a=fingerprint:sha-256 {fingerprint}\r\na=setup:active\r\na=mid:0\r\n"
        "a=sendrecv\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\n"
        "a=fmtp:111 minptime=10;useinbandfec=1\r\n"
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\n"
        f"{ice}a=fingerprint:sha-256 {fingerprint}\r\na=setup:active\r\na=mid:1\r\n"
        "a=sctp-port:5000\r\n"
    )


def _error(
    status: int,
    message: str,
    code: str | None,
    kind: str = "invalid_request_error",
    param: str | None = None,
) -> Response:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": code, "param": param}}, status_code=status
    )


def _refused_model(refusal: ModelRefusal, where: str) -> Response:
    """A session config naming a model (or voice, or setting) the service would not take."""
    return _error(400, refusal.message, refusal.code, param=where + refusal.field)


def has_bearer(authorization: str | None) -> bool:
    """Whether an Authorization header carries a non-empty Bearer token (any token will do)."""
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


class Simulator:
    """A local Realtime provider: start it, point the host at `http_url` / `ws_url`, read `calls`.

    `script` drives every call created while it is set (PUT /_sim/script replaces it); with a
    `recording`, calls replay it instead, at `speed` (0 = as fast as possible), closed loop unless
    `closed_loop` is off (docs/recordings.md). With `strict`,
    every event sent is checked against the wire oracle and violations land in the call's errors.
    The Live mode takes its own `live_script`, and for outbound calls a `dial_plan`, whether the
    organization may place them (`outbound_enabled`) and how long a number may ring
    (`ringing_limit_ms`).
    """

    def __init__(
        self,
        script: CallScript | str | Path | None = None,
        *,
        recording: Recording | str | Path | None = None,
        speed: float = 1.0,
        strict: bool = True,
        closed_loop: bool = True,
        gate_timeout_s: float = GATE_TIMEOUT_S,
        live_script: LiveScript | str | Path | None = None,
        dial_plan: DialPlan | str | Path | None = None,
        outbound_enabled: bool = True,
        ringing_limit_ms: int = RINGING_LIMIT_MS,
    ) -> None:
        if speed < 0:
            raise ValueError(f"speed must be >= 0, got {speed}")
        self.script = (
            script
            if isinstance(script, CallScript)
            else (load_script(script) if script is not None else CallScript())
        )
        self.recording = (
            recording
            if isinstance(recording, Recording) or recording is None
            else (read_recording(recording))
        )
        self.speed = speed
        self.strict = strict
        # Closed loop: a recorded event that answered the host waits for the host's own control.
        self.closed_loop = closed_loop
        self.gate_timeout_s = gate_timeout_s
        # The Live API mode: its own sessions, scripts and routes on the same ports. A recording
        # of a Live call (its header's session says so) is played by Live sessions instead.
        live_recording = None
        if self.recording is not None and (self.recording.header.session or {}).get("provider") == "live":
            live_recording, self.recording = self.recording, None
        self.live = LiveProvider(
            live_script,
            sdp_answer=_sdp_answer,
            strict=strict,
            recording=live_recording,
            speed=speed,
            closed_loop=closed_loop,
            gate_timeout_s=gate_timeout_s,
            dial_plan=dial_plan,
            outbound_enabled=outbound_enabled,
            ringing_limit_ms=ringing_limit_ms,
        )
        self._mint = IdMint()
        self._calls: dict[str, SimulatedCall] = {}
        self._announcing: set[asyncio.Task[None]] = set()
        self._http: uvicorn.Server | None = None
        self._ws: Server | None = None
        self.http_url = ""
        self.ws_url = ""

    @property
    def calls(self) -> dict[str, CallLog]:
        """Every call's log by call id, in creation order."""
        return {call_id: call.log for call_id, call in self._calls.items()}

    async def start(self, host: str = "127.0.0.1", http_port: int = 0, ws_port: int = 0) -> None:
        """Listen for REST on `http_port` and sidebands on `ws_port` (0 picks free ports)."""
        # The oracle's validators are built on first use (about 60 ms): built now, the first
        # call's accept is not measured slower than the rest.
        wire_errors({"type": "session.update", "session": {"type": "realtime"}}, direction="client")
        self.live.warm_up()
        self._http, http_bound = await _serve_rest(
            Starlette(routes=[Route("/{path:path}", self._route, methods=["GET", "POST", "PUT", "DELETE"])]),
            host,
            http_port,
        )
        self._ws = await serve(
            self._serve_sideband,
            host,
            ws_port,
            process_request=self._check_handshake,
            max_size=MAXIMUM_SIDEBAND_MESSAGE_BYTES,
        )
        ws_bound = next(iter(self._ws.sockets)).getsockname()[1]
        self.http_url = f"http://{host}:{http_bound}/v1"
        self.ws_url = f"ws://{host}:{ws_bound}/v1"

    async def stop(self) -> None:
        """End every call (sidebands close with 1001) and stop listening."""
        for call in self._calls.values():
            await call.end(1001, "simulator stopping")
        await self.live.stop()
        if self._ws is not None:
            self._ws.close()
            await self._ws.wait_closed()
        if self._http is not None:
            await self._http.shutdown()

    def create_call(self, session: dict[str, Any] | None = None) -> str:
        """Open a call as `POST /v1/realtime/calls` does, and answer its id."""
        call_id = f"rtc_{secrets.token_hex(16)}"
        self._calls[call_id] = SimulatedCall(
            call_id,
            script=self.script,
            mint=self._mint,
            session=session,
            recording=self.recording,
            speed=self.speed,
            strict=self.strict,
            closed_loop=self.closed_loop,
            gate_timeout_s=self.gate_timeout_s,
        )
        return call_id

    def place_sip_call(self, place: PlaceCall) -> tuple[str, str]:
        """A phone call rings: announced to the host's webhook (retried, maybe duplicated);
        it is talked on once the host accepts it and attaches the sideband."""
        call_id = f"rtc_sip_{secrets.token_hex(14)}"
        self._calls[call_id] = SimulatedCall(
            call_id,
            script=self.script,
            mint=self._mint,
            recording=self.recording,
            speed=self.speed,
            strict=self.strict,
            closed_loop=self.closed_loop,
            gate_timeout_s=self.gate_timeout_s,
        )
        ringing = Ringing(webhook_id=f"wh_{secrets.token_hex(12)}")
        # The call's log lists the deliveries as they happen.
        ringing.deliveries = self._calls[call_id].log.deliveries
        task = asyncio.get_running_loop().create_task(announce(call_id, place, ringing))
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)
        return call_id, ringing.webhook_id

    # ── REST ────────────────────────────────────────────────────────────────────

    async def _route(self, request: Request) -> Response:
        declared = request.headers.get("content-length", "0")
        if not declared.isdigit() or int(declared) > MAXIMUM_REST_BODY_BYTES:
            return _error(413, f"The body exceeds {MAXIMUM_REST_BODY_BYTES} bytes.", "body_too_large")
        path = request.url.path
        parts = [part for part in path.split("/") if part]
        if parts[:2] == ["_sim", "live"]:
            return await self.live.control(request, parts[2:])
        if parts[:1] == ["_sim"]:
            return await self._control(request, parts[1:])
        if parts[:3] not in (
            ["v1", "realtime", "calls"],
            ["v1", "live", "sessions"],
            ["v1", "chat", "completions"],
        ):
            return _error(404, f"Unknown path {path}", "not_found")
        if not has_bearer(request.headers.get("authorization")):
            return _error(
                401, "You didn't provide an API key in the Authorization header.", "missing_api_key"
            )
        if parts[1] == "chat":
            return await self._judge(request)
        if parts[1] == "live":
            return await self.live.rest(request, parts[3:])
        if request.method != "POST":
            return _error(405, f"{request.method} is not allowed here", "method_not_allowed")
        if len(parts) == 3:
            return self._create_call(request.headers.get("content-type", ""), await request.body())
        if len(parts) == 5 and parts[4] in CALL_ACTIONS:
            return await self._act_on_call(parts[3], parts[4], await request.body())
        return _error(404, f"Unknown path {path}", "not_found")

    async def _judge(self, request: Request) -> Response:
        """An eval's judge model: answered from the call script's evidence (simulator.judge)."""
        if request.method != "POST":
            return _error(405, f"{request.method} is not allowed here", "method_not_allowed")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "The body is not JSON.", "invalid_json")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "messages: a list is required.", "invalid_request")
        return JSONResponse(judge_completion(body, self.script.judge, f"chatcmpl_{secrets.token_hex(12)}"))

    def _create_call(self, content_type: str, body: bytes) -> Response:
        try:
            offer, session = _read_offer(content_type, body)
        except ValueError as exc:
            return _error(400, str(exc), "invalid_offer")
        if session is not None:
            problems = wire_errors({"type": "session.update", "session": session}, direction="client")
            if problems:
                return _error(400, f"Invalid session: {'; '.join(problems)}", "invalid_session")
            refusal = realtime_session_refusal(merge_session(default_session("sess"), session))
            if refusal is not None:
                return _refused_model(refusal, "session.")
        if not offer.lstrip().startswith("v=0"):
            return _error(400, "The SDP offer must start with 'v=0'.", "invalid_offer")
        call_id = self.create_call(session)
        return Response(
            _sdp_answer().encode(),
            status_code=201,
            media_type="application/sdp",
            headers={"Location": f"/v1/realtime/calls/{call_id}"},
        )

    async def _act_on_call(self, call_id: str, action: str, body: bytes) -> Response:
        call = self._calls.get(call_id)
        if call is None or call.has_ended:
            return _error(404, f"Call '{call_id}' not found or already ended.", "call_not_found")
        if action == "accept" and body:
            try:
                session = json.loads(body)
            except ValueError:
                return _error(400, "The body must be a JSON session config.", "invalid_json")
            problems = wire_errors({"type": "session.update", "session": session}, direction="client")
            if problems:
                return _error(400, f"Invalid session: {'; '.join(problems)}", "invalid_session")
            # The accept body is the session itself: its fields are named from the top.
            refusal = realtime_session_refusal(merge_session(call.session, session))
            if refusal is not None:
                return _refused_model(refusal, "")
            call.accept(session)
        if action == "accept":
            call.log.accepts.append(time.time())
            if len(call.log.accepts) > 1:
                return _error(400, f"Call '{call_id}' was already accepted.", "call_already_accepted")
        if action == "reject":
            try:
                status_code = json.loads(body or b"{}").get("status_code", 603)
            except (ValueError, AttributeError):
                return _error(400, "The body must be JSON.", "invalid_json")
            call.log.rejected_with = int(status_code)
        if action == "refer":
            try:
                target = json.loads(body).get("target_uri")
            except (ValueError, AttributeError):
                target = None
            if not isinstance(target, str) or not target.startswith(("tel:", "sip:")):
                return _error(400, "target_uri must be a tel: or sip: URI.", "invalid_target_uri")
            # The caller's leg goes to the target; this call (and its sideband) ends.
            call.log.referred_to = target
        if action in ("hangup", "reject", "refer"):
            await call.end(1000)
        return Response(status_code=200)

    async def _control(self, request: Request, parts: list[str]) -> Response:
        if parts == ["script"] and request.method == "PUT":
            try:
                self.script = parse_script(await request.body())
            except ValidationError as exc:
                return JSONResponse(
                    {"error": {"message": "invalid call script", "details": json.loads(exc.json())}},
                    status_code=400,
                )
            return JSONResponse({"script": self.script.name})
        if parts == ["calls"] and request.method == "GET":
            return JSONResponse({"calls": list(self._calls)})
        if parts == ["sip", "calls"] and request.method == "POST":
            try:
                place = PlaceCall.model_validate_json(await request.body())
            except ValidationError as exc:
                return JSONResponse(
                    {"error": {"message": "invalid call", "details": json.loads(exc.json())}}, status_code=400
                )
            call_id, webhook_id = self.place_sip_call(place)
            return JSONResponse({"call_id": call_id, "webhook_id": webhook_id}, status_code=201)
        call = self._calls.get(parts[1]) if len(parts) >= 2 and parts[0] == "calls" else None
        if call is None:
            return _error(404, f"Unknown path {request.url.path}", "not_found")
        if len(parts) == 2 and request.method == "GET":
            return JSONResponse(call.log.as_json())
        if parts[2:] == ["status"] and request.method == "GET":
            # Cheap to poll: a whole call log is large, and serializing it is not.
            return JSONResponse({"call_id": call.call_id, "status": call.log.status})
        if parts[2:] == ["drop"] and request.method == "POST":
            code = request.query_params.get("code", "1011")
            if not code.isdigit():
                return _error(400, "code must be a close code", "invalid_value")
            # refuse=1: later sideband handshakes for this call are refused (a provider that
            # will not let the host re-attach).
            call.refuses_sideband = request.query_params.get("refuse") == "1"
            await call.drop_sideband(int(code))
            if request.query_params.get("end") == "1":
                # end=1: the caller hangs up at that moment, which the host, its sideband gone,
                # does not hear: a re-attach finds no such call (404).
                await call.end(1000)
            return JSONResponse({"dropped": call.call_id, "refusing": call.refuses_sideband})
        if parts[2:] == ["requests"] and request.method == "POST":
            try:
                kind = json.loads(await request.body())["type"]
            except (ValueError, KeyError, TypeError):
                return _error(400, 'The body must be {"type": str}.', "invalid_json")
            if not isinstance(kind, str) or not kind:
                return _error(400, "type must be a request's type", "invalid_value")
            call.request_made(kind)
            return JSONResponse({"requested": kind})
        if parts[2:] == ["inject"] and request.method == "POST":
            try:
                frames = json.loads(await request.body())["frames"]
            except (ValueError, KeyError, TypeError):
                return _error(400, 'The body must be {"frames": [str, ...]}.', "invalid_json")
            if not isinstance(frames, list) or not all(_is_injectable(f) for f in frames):
                return _error(
                    400,
                    'frames must be strings or {"event": {...}, "pad_to_bytes": N} objects',
                    "invalid_value",
                )
            call.inject_raw([_injected_frame(frame) for frame in frames])
            return JSONResponse({"injected": len(frames)})
        return _error(404, f"Unknown path {request.url.path}", "not_found")

    # ── the sideband ────────────────────────────────────────────────────────────

    def _check_handshake(
        self, connection: ServerConnection, request: HandshakeRequest
    ) -> HandshakeResponse | None:
        url = urlsplit(request.path)
        if url.path.rstrip("/") != "/v1/realtime" and not is_live_path(url.path):
            return connection.respond(404, "Not Found\n")
        if not has_bearer(request.headers.get("Authorization")):
            return connection.respond(401, "Missing bearer token\n")
        if is_live_path(url.path):
            return self.live.check_handshake(connection, request)
        call_id = parse_qs(url.query).get("call_id", [""])[0]
        call = self._calls.get(call_id)
        if call is None or call.has_ended:
            return connection.respond(404, f"Call '{call_id}' not found\n")
        if call.refuses_sideband:
            return connection.respond(403, f"Call '{call_id}' refuses a new sideband\n")
        return None

    async def _serve_sideband(self, socket: ServerConnection) -> None:
        request = socket.request
        assert request is not None  # the handshake is done before the handler runs
        if is_live_path(urlsplit(request.path).path):
            await self.live.serve_sideband(socket)
            return
        if _asks_for_beta(request.headers):
            await socket.close(BETA_SHAPE_CLOSE_CODE, "invalid_request_error.beta_api_shape_disabled")
            return
        call_id = parse_qs(urlsplit(request.path).query)["call_id"][0]
        await self._calls[call_id].serve_sideband(socket)


async def _serve_rest(app: Starlette, host: str, port: int) -> tuple[uvicorn.Server, int]:
    """Serve the REST app with uvicorn in the running loop; answers the server and its port."""
    config = uvicorn.Config(
        app, lifespan="off", log_config=None, access_log=False, ws="none", timeout_keep_alive=5
    )
    config.load()
    listener = socket.create_server((host, port), reuse_port=False)
    listener.setblocking(False)
    server = uvicorn.Server(config)
    # What Server.serve() does before startup(), without taking over the process's signals.
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[listener])
    return server, listener.getsockname()[1]


def _is_injectable(frame: Any) -> bool:
    if isinstance(frame, str):
        return True
    return (
        isinstance(frame, dict)
        and isinstance(frame.get("event"), dict)
        and isinstance(frame.get("pad_to_bytes"), int)
        and 0 <= frame["pad_to_bytes"] <= MAXIMUM_INJECTED_FRAME_BYTES
    )


def _injected_frame(frame: str | dict[str, Any]) -> str:
    """A raw frame as given, or an event padded with a `pad` field to a size (an oversized
    frame cannot travel through the 1 MiB control API itself)."""
    if isinstance(frame, str):
        return frame
    text = json.dumps({**frame["event"], "pad": ""})
    missing = max(frame["pad_to_bytes"] - len(text.encode()), 0)
    return json.dumps({**frame["event"], "pad": "x" * missing})


def _asks_for_beta(headers: Headers) -> bool:
    return "openai-beta" in {name.lower() for name in headers}


def _read_offer(content_type: str, body: bytes) -> tuple[str, dict[str, Any] | None]:
    """The SDP offer and session config of a create-call body, whichever form it takes."""
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == "application/sdp":
        return body.decode("utf-8", "replace"), None
    if media_type != "multipart/form-data":
        raise ValueError("Send multipart/form-data (sdp, session) or an application/sdp body.")
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1")
    message = BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise ValueError("The multipart body could not be read.")
    fields: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = payload
    if "sdp" not in fields:
        raise ValueError("The multipart body has no 'sdp' part.")
    session = None
    if "session" in fields:
        try:
            session = json.loads(fields["session"])
        except ValueError:
            raise ValueError("The 'session' part is not JSON.") from None
        if not isinstance(session, dict):
            raise ValueError("The 'session' part must be a JSON object.")
    return fields["sdp"].decode("utf-8", "replace"), session
