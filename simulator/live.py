"""The Live mode of the simulated provider: OpenAI's Live API (GPT-Live), LIVE_PROTOCOL.md §2.

REST, on the HTTP port beside the Realtime routes, Bearer auth required (checked by the server):
    POST /v1/live/sessions                   {session, transport: {type: "webrtc", sdp}} → 200
                                             {session: {id: "live_u7_…"}, transport: {type, sdp}}
    POST /v1/live/sessions                   {session, transport: {type: "sip", destination:
                                             "+E164", trunk: {provider_url: "sips:host[:port]",
                                             auth: {type: "digest", username, password},
                                             caller_number: "+E164"}}} → 200 {session: <the
                                             session resource>, transport: {type: "sip",
                                             destination}}: an outbound call (simulator.live_dial,
                                             simulator.live_outbound), dialled when the first
                                             sideband attaches or 2 s after the create. 403
                                             outbound_sip_not_enabled when the switch is off; an
                                             `Idempotency-Key` seen before answers the first
                                             answer again and dials nothing (400
                                             idempotency_key_reused with another body)
    POST /v1/live/sessions/{id}/accept       {session: {type: "live", model, …}} → 200 (a ringing
                                             SIP session); 400 decision_already_made the second time
    POST /v1/live/sessions/{id}/reject       {status_code: 300-699} (required) → 200; the call ends
    POST /v1/live/sessions/{id}/refer        {target_uri: tel:/sip:} → 200; the caller goes there,
                                             the session closes (remote_hangup)
    POST /v1/live/sessions/{id}/hangup       empty → 200; the session closes (close_requested),
                                             an outbound call's dial with it, ringing or not
Every body is checked strictly against the SDK's parameters (unknown keys included): a bad one
is 400 with `unknown_parameter`, `missing_required_parameter` or `invalid_value`. A session
naming a model or voice the simulator does not serve is 400 too, `param` naming the field
(`invalid_model` for a Realtime model, simulator.models).

Control API, no auth:
    PUT  /_sim/live/script                   the Live call script for sessions created from now on
                                             (and the callee of a number the dial plan lacks)
    PUT  /_sim/live/dial-plan                the dial plan (a DialPlan as JSON) for outbound calls
                                             placed from now on; GET answers the current one
    PUT  /_sim/live/outbound                 {"enabled": bool}: whether the organization may place
                                             outbound calls → {"enabled", "ringing_limit_ms"}; GET
                                             answers the same
    GET  /_sim/live/dials                    {"dials": [DialRecord], "max_concurrent",
                                             "concurrency": [[t, n]], "refused"}
    GET  /_sim/live/sessions                 {"sessions": [ids]}
    GET  /_sim/live/sessions/{id}            the session's log (see LiveCallLog)
    GET  /_sim/live/sessions/{id}/status     {"session_id", "status"}
    POST /_sim/live/sessions/{id}/drop?code=1011[&refuse=1]   drop every sideband (a fault)
    POST /_sim/live/sessions/{id}/inject     {"frames": [raw text, ...]} sent verbatim (a fault)
    POST /_sim/live/sip/calls                a phone call rings (the body of simulator.sip's
                                             PlaceCall) → 201 {session_id, webhook_id}; the signed
                                             `live.transport.incoming` webhook is delivered, retried
Sideband, on the WebSocket port: /v1/live/sessions/{id}/attach[?graceful_close=true], Bearer auth.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from openai.types.live import LiveCreateResponse
from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request as HandshakeRequest
from websockets.http11 import Response as HandshakeResponse

from simulator.call import IdMint
from simulator.live_dial import (
    RINGING_LIMIT_MS,
    AnsweredByPerson,
    Answerer,
    DialLedger,
    DialPlan,
    DialRecord,
    load_dial_plan,
    outbound_refusal,
    parse_dial_plan,
    trunk_host,
)
from simulator.live_oracle import RestBody, live_wire_problems, rest_body_problems, webhook_problems
from simulator.live_outbound import OutboundSession
from simulator.live_script import LiveScript, load_live_script, parse_live_script
from simulator.live_session import LiveSession, Transport
from simulator.models import live_session_refusal
from simulator.oracle import WireProblem
from simulator.playback import GATE_TIMEOUT_S
from simulator.recording import Recording
from simulator.sip import PlaceCall, Ringing, announce

SESSION_ACTIONS = ("accept", "reject", "refer", "hangup")
# Only a phone call is answered or transferred; any session can be hung up.
SIP_ONLY_ACTIONS = ("accept", "reject", "refer")
ATTACH_PREFIX = "/v1/live/sessions/"
# The SIP status a rejection may carry (§2).
REJECT_STATUS_RANGE = range(300, 700)
# The request header that makes an outbound create safe to repeat.
IDEMPOTENCY_HEADER = "idempotency-key"


class OutboundSwitch(BaseModel):
    """The body of `PUT /_sim/live/outbound`: whether the organization may place calls."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: StrictBool


def _error(status: int, message: str, code: str, param: str | None = None) -> Response:
    return JSONResponse(
        {"error": {"message": message, "type": "invalid_request_error", "code": code, "param": param}},
        status_code=status,
    )


def _refused_body(problems: list[WireProblem]) -> Response:
    first = problems[0]
    param = first.path.removeprefix("$.")
    if first.kind == "unknown":
        return _error(400, f"Unknown parameter: '{param}'.", "unknown_parameter", param)
    if first.kind == "missing":
        return _error(400, f"Missing required parameter: '{param}'.", "missing_required_parameter", param)
    return _error(400, f"Invalid value for '{param}': {first.message}.", "invalid_value", param)


def is_live_path(path: str) -> bool:
    """Whether a REST or WebSocket path belongs to the Live API."""
    return path.startswith("/v1/live/")


class LiveProvider:
    """The simulated Live API: its sessions, its REST, its control API and its sidebands."""

    def __init__(
        self,
        script: LiveScript | str | Path | None = None,
        *,
        sdp_answer: Callable[[], str],
        strict: bool = True,
        recording: Recording | None = None,
        speed: float = 1.0,
        closed_loop: bool = True,
        gate_timeout_s: float = GATE_TIMEOUT_S,
        dial_plan: DialPlan | str | Path | None = None,
        outbound_enabled: bool = True,
        ringing_limit_ms: int = RINGING_LIMIT_MS,
    ) -> None:
        self.script = (
            script
            if isinstance(script, LiveScript)
            else (load_live_script(script) if script is not None else LiveScript())
        )
        self.strict = strict
        # A Live recording: every session plays it back instead of running the script.
        self.recording = recording
        self.speed = speed
        self.closed_loop = closed_loop
        self.gate_timeout_s = gate_timeout_s
        self._sdp_answer = sdp_answer
        self._mint = IdMint()
        self.sessions: dict[str, LiveSession] = {}
        self._announcing: set[asyncio.Task[None]] = set()
        # Outbound calls: what happens at each number, whether the organization may call, how
        # long a number may ring, and every call placed.
        self.dial_plan = (
            dial_plan
            if isinstance(dial_plan, DialPlan)
            else (load_dial_plan(dial_plan) if dial_plan is not None else DialPlan({}))
        )
        self.outbound_enabled = outbound_enabled
        self.ringing_limit_ms = ringing_limit_ms
        self.dials = DialLedger()
        # What a create's answer waits for before it is sent, by the answer (`answer_after_ms`).
        self._answer_delays: dict[int, float] = {}

    def warm_up(self) -> None:
        """Build the oracle's validators now, so the first session is not measured slower."""
        live_wire_problems({"type": "session.close"}, direction="client")
        live_wire_problems({"type": "session.paused", "event_id": "e"}, direction="server")

    async def stop(self) -> None:
        """Close every session (sidebands let go) and stop announcing phone calls."""
        for task in list(self._announcing):
            task.cancel()
        for session in self.sessions.values():
            if session.is_ringing:
                await session.end_unanswered()
            else:
                await session.close("connection_lost")

    def create_session(self, config: dict[str, Any]) -> LiveSession:
        """Open a WebRTC session as `POST /v1/live/sessions` does (config already checked)."""
        session = self._new_session("webrtc", config)
        session.start()
        return session

    def place_outbound_call(
        self, config: dict[str, Any], transport: dict[str, Any], idempotency_key: str | None = None
    ) -> OutboundSession:
        """Place a phone call as an outbound `POST /v1/live/sessions` does (body already checked):
        the dial plan says who answers; a number it lacks is a person following the current
        Live script."""
        destination: str = transport["destination"]
        planned = self.dial_plan.resolve(destination)
        answerer: Answerer = planned or AnsweredByPerson(outcome="human", script=self.script.name)
        script = self.dial_plan.script(planned) if isinstance(planned, AnsweredByPerson) else self.script
        session_id = f"live_u7_{secrets.token_hex(16)}"
        record = DialRecord(
            session_id=session_id,
            destination=destination,
            caller_number=transport["trunk"]["caller_number"],
            trunk_host=trunk_host(transport["trunk"]["provider_url"]),
            planned=answerer.outcome,
            idempotency_key=idempotency_key,
            created_at=time.time(),
        )
        session = OutboundSession(
            session_id,
            script=script,
            mint=self._mint,
            config=config,
            answerer=answerer,
            record=record,
            ledger=self.dials,
            ringing_limit_ms=self.ringing_limit_ms,
            strict=self.strict,
        )
        self.sessions[session_id] = session
        self.dials.opened(record)
        session.start()
        return session

    def place_sip_call(self, place: PlaceCall) -> tuple[str, str]:
        """A phone call rings: its session waits for an accept, and the host's webhook is told
        (signed, retried, maybe duplicated). Answers the session id and the webhook id."""
        session = self._new_session("sip", None)
        ringing = Ringing(webhook_id=f"wh_{secrets.token_hex(12)}")
        # The session's log lists the deliveries as they happen.
        ringing.deliveries = session.log.deliveries
        event = incoming_event(session.session_id, place)
        problems = webhook_problems(event)
        if problems:
            session.log.errors.append("webhook: " + "; ".join(map(str, problems)))
        task = asyncio.get_running_loop().create_task(
            announce(session.session_id, place, ringing, event=event)
        )
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)
        return session.session_id, ringing.webhook_id

    def _new_session(self, transport: Transport, config: dict[str, Any] | None) -> LiveSession:
        session_id = f"live_u7_{secrets.token_hex(16)}"
        session = LiveSession(
            session_id,
            transport=transport,
            script=self.script,
            mint=self._mint,
            config=config,
            strict=self.strict,
            recording=self.recording,
            speed=self.speed,
            closed_loop=self.closed_loop,
            gate_timeout_s=self.gate_timeout_s,
        )
        self.sessions[session_id] = session
        return session

    # ── REST ────────────────────────────────────────────────────────────────────

    async def rest(self, request: Request, parts: list[str]) -> Response:
        """`/v1/live/sessions[/{id}/{action}]`; `parts` is what follows `sessions`."""
        if request.method != "POST":
            return _error(405, f"{request.method} is not allowed here", "method_not_allowed")
        body = await request.body()
        if not parts:
            answer = self._create(body, request.headers.get(IDEMPOTENCY_HEADER))
            delay_s = self._answer_delays.pop(id(answer), 0.0)
            if delay_s:
                await asyncio.sleep(delay_s)
            return answer
        if len(parts) == 2 and parts[1] in SESSION_ACTIONS:
            return await self._act(parts[0], parts[1], body)
        return _error(404, f"Unknown path {request.url.path}", "not_found")

    def _create(self, body: bytes, idempotency_key: str | None) -> Response:
        try:
            sip = _is_sip_create(json.loads(body or b"{}"))
        except ValueError:
            sip = False
        if sip:
            return self._create_outbound(body, idempotency_key)
        parsed, refused = _read_json(body, kind="create")
        if refused is not None:
            return refused
        if parsed["transport"]["sdp"].lstrip()[:3] != "v=0":
            return _error(400, "The SDP offer must start with 'v=0'.", "invalid_offer", "transport.sdp")
        refused = _refused_config(parsed["session"]) or _refused_delegation(parsed["session"])
        if refused is not None:
            return refused
        session = self.create_session(parsed["session"])
        answer = {
            "session": {"id": session.session_id},
            "transport": {"type": "webrtc", "sdp": self._sdp_answer()},
        }
        LiveCreateResponse.model_validate(answer, strict=True)
        return JSONResponse(answer)

    def _create_outbound(self, body: bytes, idempotency_key: str | None) -> Response:
        parsed = json.loads(body)
        if idempotency_key is not None:
            remembered = self.dials.recall(idempotency_key)
            if remembered is not None and remembered.body == parsed:
                remembered.record.repeats += 1
                return JSONResponse(remembered.answer)
            if remembered is not None:
                self.dials.refused += 1
                return _error(
                    400,
                    "This Idempotency-Key was already used with a different request body.",
                    "idempotency_key_reused",
                )
        refused = self._refuse_outbound(parsed)
        if refused is not None:
            self.dials.refused += 1
            return refused
        session = self.place_outbound_call(parsed["session"], parsed["transport"], idempotency_key)
        # The trunk and its credentials are never returned (§2.2).
        answer = {
            "session": session.resource(),
            "transport": {"type": "sip", "destination": parsed["transport"]["destination"]},
        }
        if idempotency_key is not None:
            self.dials.remember(idempotency_key, parsed, answer, session.record)
        response = JSONResponse(answer)
        planned = self.dial_plan.resolve(parsed["transport"]["destination"])
        if isinstance(planned, AnsweredByPerson) and planned.answer_after_ms:
            self._answer_delays[id(response)] = planned.answer_after_ms / 1000
        return response

    def _refuse_outbound(self, parsed: dict[str, Any]) -> Response | None:
        if not self.outbound_enabled:
            return _error(
                403,
                "Outbound SIP calling must be enabled for your organization.",
                "outbound_sip_not_enabled",
            )
        problems = rest_body_problems(parsed, kind="create_sip")
        if problems:
            return _refused_body(problems)
        refusal = outbound_refusal(parsed["transport"])
        if refusal is not None:
            return _error(400, refusal.message, "invalid_value", refusal.param)
        return _refused_config(parsed["session"]) or _refused_delegation(parsed["session"])

    async def _act(self, session_id: str, action: str, body: bytes) -> Response:
        session = self.sessions.get(session_id)
        if session is None or session.has_ended:
            return _error(404, f"Session '{session_id}' not found or already closed.", "session_not_found")
        if action in SIP_ONLY_ACTIONS and session.transport != "sip":
            return _error(400, f"Only a SIP session can be asked to {action}.", "invalid_request")
        if action in ("accept", "reject") and session.is_outbound:
            return _error(400, f"An outbound call has no incoming call to {action}.", "invalid_request")
        if action == "hangup":
            await session.close("close_requested")
            return Response(status_code=200)
        kind: RestBody = "accept" if action == "accept" else "reject" if action == "reject" else "refer"
        parsed, refused = _read_json(body, kind=kind)
        if refused is not None:
            return refused
        if action == "accept":
            return self._accept(session, parsed["session"])
        if action == "reject":
            return await self._reject(session, parsed["status_code"])
        target = parsed["target_uri"]
        if not isinstance(target, str) or not target.startswith(("tel:", "sip:")):
            return _error(400, "target_uri must be a tel: or sip: URI.", "invalid_value", "target_uri")
        if session.is_ringing:
            return _error(400, "A session must be accepted before it is referred.", "invalid_request")
        if isinstance(session, OutboundSession) and not session.is_answered:
            return _error(400, "An outbound call must be answered before it is referred.", "invalid_request")
        # The caller's leg goes to the target; the trunk then ends this one.
        session.log.referred_to = target
        await session.close("remote_hangup")
        return Response(status_code=200)

    def _accept(self, session: LiveSession, config: dict[str, Any]) -> Response:
        if not session.is_ringing:
            session.log.accepts.append(time.time())
            return _error(400, "This call was already answered.", "decision_already_made")
        refused = _refused_config(config) or _refused_delegation(config)
        if refused is not None:
            return refused
        session.accept(config)
        return Response(status_code=200)

    async def _reject(self, session: LiveSession, status_code: int) -> Response:
        if not session.is_ringing:
            return _error(400, "This call was already answered.", "decision_already_made")
        if status_code not in REJECT_STATUS_RANGE:
            return _error(
                400, "status_code must be a SIP status from 300 to 699.", "invalid_value", "status_code"
            )
        session.log.rejected_with = status_code
        await session.end_unanswered()
        return Response(status_code=200)

    # ── the control API ─────────────────────────────────────────────────────────

    async def control(self, request: Request, parts: list[str]) -> Response:
        """`/_sim/live/…`; `parts` is what follows `live`."""
        if parts == ["script"] and request.method == "PUT":
            try:
                self.script = parse_live_script(await request.body())
            except ValidationError as exc:
                return JSONResponse(
                    {"error": {"message": "invalid Live call script", "details": json.loads(exc.json())}},
                    status_code=400,
                )
            return JSONResponse({"script": self.script.name})
        if parts == ["sessions"] and request.method == "GET":
            return JSONResponse({"sessions": list(self.sessions)})
        if parts == ["dial-plan"] and request.method == "PUT":
            try:
                self.dial_plan = parse_dial_plan(await request.body())
            except ValidationError as exc:
                return JSONResponse(
                    {"error": {"message": "invalid dial plan", "details": _details(exc)}}, status_code=400
                )
            return JSONResponse({"dial_plan": sorted(self.dial_plan.root)})
        if parts == ["dial-plan"] and request.method == "GET":
            return JSONResponse(self.dial_plan.model_dump(mode="json"))
        if parts == ["outbound"] and request.method == "PUT":
            try:
                self.outbound_enabled = OutboundSwitch.model_validate_json(await request.body()).enabled
            except ValidationError as exc:
                return JSONResponse(
                    {"error": {"message": 'the body must be {"enabled": bool}', "details": _details(exc)}},
                    status_code=400,
                )
            return JSONResponse(self._outbound_settings())
        if parts == ["outbound"] and request.method == "GET":
            return JSONResponse(self._outbound_settings())
        if parts == ["dials"] and request.method == "GET":
            return JSONResponse(self.dials.as_json())
        if parts == ["sip", "calls"] and request.method == "POST":
            try:
                place = PlaceCall.model_validate_json(await request.body())
            except ValidationError as exc:
                return JSONResponse(
                    {"error": {"message": "invalid call", "details": json.loads(exc.json())}}, status_code=400
                )
            session_id, webhook_id = self.place_sip_call(place)
            return JSONResponse({"session_id": session_id, "webhook_id": webhook_id}, status_code=201)
        session = self.sessions.get(parts[1]) if len(parts) >= 2 and parts[0] == "sessions" else None
        if session is None:
            return _error(404, f"Unknown path {request.url.path}", "not_found")
        if len(parts) == 2 and request.method == "GET":
            return JSONResponse(session.log.as_json())
        if parts[2:] == ["status"] and request.method == "GET":
            return JSONResponse({"session_id": session.session_id, "status": session.log.status})
        if parts[2:] == ["drop"] and request.method == "POST":
            code = request.query_params.get("code", "1011")
            if not code.isdigit():
                return _error(400, "code must be a close code", "invalid_value")
            session.refuses_sideband = request.query_params.get("refuse") == "1"
            await session.drop_sideband(int(code))
            return JSONResponse({"dropped": session.session_id, "refusing": session.refuses_sideband})
        if parts[2:] == ["requests"] and request.method == "POST":
            try:
                kind = json.loads(await request.body())["type"]
            except (ValueError, KeyError, TypeError):
                return _error(400, 'The body must be {"type": str}.', "invalid_json")
            if not isinstance(kind, str) or not kind:
                return _error(400, "type must be a request's type", "invalid_value")
            session.request_made(kind)
            return JSONResponse({"requested": kind})
        if parts[2:] == ["inject"] and request.method == "POST":
            try:
                frames = json.loads(await request.body())["frames"]
            except (ValueError, KeyError, TypeError):
                return _error(400, 'The body must be {"frames": [str, ...]}.', "invalid_json")
            if not isinstance(frames, list) or not all(isinstance(frame, str) for frame in frames):
                return _error(400, "frames must be strings", "invalid_value")
            session.inject_raw(frames)
            return JSONResponse({"injected": len(frames)})
        return _error(404, f"Unknown path {request.url.path}", "not_found")

    def _outbound_settings(self) -> dict[str, Any]:
        return {"enabled": self.outbound_enabled, "ringing_limit_ms": self.ringing_limit_ms}

    # ── the sideband ────────────────────────────────────────────────────────────

    def check_handshake(
        self, connection: ServerConnection, request: HandshakeRequest
    ) -> HandshakeResponse | None:
        """Refuse an attach that cannot be served (the server has checked the Bearer token)."""
        url = urlsplit(request.path)
        session_id = _attached_session_id(url.path)
        if session_id is None:
            return connection.respond(404, "Not Found\n")
        session = self.sessions.get(session_id)
        if session is None or session.has_ended:
            return connection.respond(404, f"Session '{session_id}' not found\n")
        if session.is_ringing:
            return connection.respond(409, f"Session '{session_id}' has not been accepted\n")
        if session.refuses_sideband:
            return connection.respond(403, f"Session '{session_id}' refuses a new sideband\n")
        if self.script.switches.single_sideband and session.has_sideband:
            session.log.refused_attaches += 1
            return connection.respond(409, f"Session '{session_id}' already has a sideband\n")
        return None

    async def serve_sideband(self, socket: ServerConnection) -> None:
        """Serve an attached sideband until it closes."""
        request = socket.request
        assert request is not None  # the handshake is done before the handler runs
        url = urlsplit(request.path)
        session_id = _attached_session_id(url.path)
        assert session_id is not None  # checked by the handshake
        graceful = parse_qs(url.query).get("graceful_close", ["false"])[0].lower() == "true"
        await self.sessions[session_id].serve_sideband(socket, graceful_close=graceful)


def incoming_event(session_id: str, place: PlaceCall) -> dict[str, Any]:
    """The `live.transport.incoming` webhook of a ringing phone call (§2.2)."""
    return {
        "object": "event",
        "id": f"evt_{secrets.token_hex(16)}",
        "type": "live.transport.incoming",
        "created_at": int(time.time()),
        "data": {
            "type": "sip",
            "session_id": session_id,
            "sip_headers": [
                {"name": "From", "value": f"sip:{place.from_}@sip.example.com"},
                {"name": "To", "value": f"sip:{place.to}@sip.example.com"},
                {"name": "Call-ID", "value": secrets.token_hex(16)},
                *place.extra_headers,
            ],
            "sip_media_security": "srtp",
        },
    }


def _attached_session_id(path: str) -> str | None:
    if not path.startswith(ATTACH_PREFIX):
        return None
    session_id, _, rest = path.removeprefix(ATTACH_PREFIX).partition("/")
    return session_id if session_id and rest.rstrip("/") == "attach" else None


def _read_json(body: bytes, *, kind: RestBody) -> tuple[dict[str, Any], Response | None]:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return {}, _error(400, "The body must be JSON.", "invalid_json")
    problems = rest_body_problems(parsed, kind=kind)
    if problems:
        return {}, _refused_body(problems)
    return parsed, None


def _is_sip_create(body: Any) -> bool:
    """Whether a create asks for a phone call (its transport says `sip`), whatever else is wrong."""
    transport = body.get("transport") if isinstance(body, dict) else None
    return isinstance(transport, dict) and transport.get("type") == "sip"


def _details(exc: ValidationError) -> list[dict[str, Any]]:
    # A validator's message is the useful part; the input echoed back is not (and it may be long).
    return [
        {"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]}
        for error in exc.errors(include_url=False, include_input=False)
    ]


def _refused_config(config: dict[str, Any]) -> Response | None:
    """A startup config naming a model or voice the service would not take (simulator.models)."""
    refusal = live_session_refusal(config)
    if refusal is None:
        return None
    return _error(400, refusal.message, refusal.code, f"session.{refusal.field}")


def _refused_delegation(config: dict[str, Any]) -> Response | None:
    delegation = config.get("delegation")
    if delegation is None or delegation.get("type") == "client":
        return None
    # The simulator speaks for the model and a client backend only: a Responses or Decisions
    # backend would need a second model it does not have.
    return _error(
        400,
        "The simulator supports client delegation only.",
        "unsupported_delegation",
        "session.delegation.type",
    )
