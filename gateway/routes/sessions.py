"""Sessions: create one, list them, read one's record and call log, connect its WebRTC call, and
watch it live (a live token, and the stream itself)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket

from gateway.providers.rest import ProviderCallError
from gateway.routes import requests
from gateway.routes.answers import Answer, Cursor, Timestamp, created, relayed
from gateway.routes.requests import Refused, new_id, refusing
from gateway.routes.table import SESSION_ID, Operation, Query, paging
from gateway.watch import CLOSE_SESSION_ENDED, CLOSE_UNKNOWN_SESSION
from gateway.web import error_response, header
from pipeline.api import watch_tokens
from pipeline.api.pages import requested
from pipeline.api.requests import SDP_OFFER, ConnectRequest, SessionSpec
from pipeline.api.roles import Permission
from pipeline.call.errors import ProviderUnavailable
from pipeline.platform.timestamps import rfc3339
from pipeline.records.desk import MAXIMUM_SEARCH_CHARS, checked_status
from pipeline.session.refusals import not_in_call, over
from pipeline.session.state import TERMINAL_PHASES

if TYPE_CHECKING:
    from gateway.ports import SessionsPort, WatchSecret, Workers

S = "/v1/sessions/{session_id}"
_TERMINAL_STATUSES = frozenset(str(phase) for phase in TERMINAL_PHASES)


class LiveCredentials(Answer):
    """A live token for one session's stream (valid 10 minutes)."""

    token: str
    expires_at: Timestamp
    path: str


class LiveToken(LiveCredentials):
    session_id: str


class Session(Answer):
    """A session's durable record (README: `GET /v1/sessions/{id}`)."""

    id: str
    status: str
    end_reason: str | None = Field(default=None, description='docs/api.md, "Endings"')
    created_at: Timestamp
    ended_at: Timestamp | None = None


class SessionCreated(Answer):
    id: str
    status: str
    live: LiveCredentials
    model: str | None = Field(
        default=None, description="the model that serves the session (the default it got)"
    )
    warnings: list[str] = Field(
        default_factory=list, description="what the app should know: a model of it shuts down within 30 days"
    )


class SessionPage(Answer):
    sessions: list[Session]
    counts: dict[str, int]
    calls: dict[str, int]
    next: Cursor


class LogEntry(Answer):
    seq: int
    at: Timestamp
    kind: str
    data: Any


class CallLog(Answer):
    session_id: str
    entries: list[LogEntry]
    ended: bool


class Connected(Answer):
    session_id: str
    call_id: str
    sdp: str


# ── the session's record, as the verbs need it ───────────────────────────────────────


async def session_record(api: Workers, session_id: str) -> dict[str, Any]:
    """The session's record, or `Refused` with the answer that says why there is none."""
    status, body = await api.rpc.call("describe_session", session_id=session_id)
    if status != 200:
        raise Refused(JSONResponse(body, status_code=status))
    record: dict[str, Any] = body
    return record


async def session_not_over(api: Workers, session_id: str) -> dict[str, Any]:
    """The session's record if it is not over, else `Refused` with why not."""
    record = await session_record(api, session_id)
    ended = over(record["status"], record.get("end_reason"))
    if ended is not None:
        raise Refused(JSONResponse(ended.body(), status_code=409))
    return record


async def session_in_call(api: Workers, session_id: str) -> dict[str, Any]:
    """The session's record if its call is live, else `Refused` with why not."""
    record = await session_record(api, session_id)
    refused = not_in_call(record["status"], record.get("end_reason"))
    if refused is not None:
        raise Refused(JSONResponse(refused.body(), status_code=409))
    return record


def live_credentials(api: WatchSecret, session_id: str) -> LiveCredentials:
    token, expires_at = watch_tokens.mint(api.watch_secret, session_id, time.time())
    return LiveCredentials(
        token=token, expires_at=rfc3339(expires_at), path=f"/v1/sessions/{session_id}/live?token={token}"
    )


# ── the routes ───────────────────────────────────────────────────────────────────────


async def create(api: SessionsPort, request: Request) -> Response:
    spec = await requests.body(request, SessionSpec)
    session_id = new_id(request, "sess")
    status, body = await api.rpc.call(
        "create_session", session_id=session_id, spec=spec.model_dump(mode="json"), now=time.time()
    )
    if status == 201:
        body = {**body, "live": live_credentials(api, session_id).model_dump(mode="json")}
    return created(body, status, f"/v1/sessions/{session_id}")


async def list_sessions(api: SessionsPort, request: Request) -> Response:
    """Sessions, newest first: `?status=` (or `live`, `not_connected`), `?route=`,
    `?end_reason=`, `?q=` (a search of the id, the numbers and the words said),
    `?created_after=` / `?created_before=` (ISO 8601), `?limit=` (≤ 500) and `?cursor=`
    (the `next` of the page before); and the counts."""
    query = request.query_params
    search = query.get("q", "").strip()
    if len(search) > MAXIMUM_SEARCH_CHARS:
        return error_response(422, "malformed_request", f"q is at most {MAXIMUM_SEARCH_CHARS} characters")
    with refusing():
        page = requested("sessions", query).as_query()
        listed_status = checked_status(query.get("status", ""))
    status, body = await api.rpc.call(
        "list_sessions",
        status=listed_status,
        route=query.get("route", "")[:128],
        end_reason=query.get("end_reason", "")[:128],
        q=search,
        page=page,
        agent=query.get("agent", "")[:80],
    )
    return relayed(status, body)


async def describe(api: SessionsPort, request: Request) -> Response:
    status, body = await api.rpc.call(
        "describe_session",
        session_id=request.path_params["session_id"],
        with_events=request.query_params.get("events") == "1",
    )
    return relayed(status, body)


async def call_log(api: SessionsPort, request: Request) -> Response:
    """The call's story as ordered entries (those after `?after=N`), read from the durable
    log; `ended` says whether `call.ended` has been written."""
    after = request.query_params.get("after", "0")
    if not after.isdigit():
        return error_response(422, "malformed_request", "after must be an entry number")
    session_id = request.path_params["session_id"]
    status, body = await api.rpc.call("session_call_log", session_id=session_id, after=int(after))
    return relayed(status, body)


async def connect(api: SessionsPort, request: Request) -> Response:
    session_id = request.path_params["session_id"]
    sdp = await _sdp_offer(request)
    status, body = await api.rpc.call("begin_admission", session_id=session_id, now=time.time())
    if status != 200:
        return relayed(status, body)
    provider = api.wings.rest_of(str(body.get("provider") or "realtime"))
    session: dict[str, Any] = {"instructions": body["instructions"]}
    if body.get("tools"):
        session["tools"] = body["tools"]
    if body.get("session") is not None:
        # A session whose provider cannot change its instructions later (Live) is created
        # with its whole startup configuration; its session id is the call's id from here on.
        session = dict(body["session"])
    if body.get("model"):
        session["model"] = body["model"]
    try:
        call = await provider.create_call(sdp, session)
    except ProviderUnavailable as error:
        # The detail (the provider's own answer) is for the session record; the client is
        # told what happened, not where the provider lives.
        if isinstance(error, ProviderCallError):
            code, message = "provider_rejected_call", f"the provider refused the call ({error.status})"
        else:
            code, message = "provider_unavailable", "the provider could not be reached"
        await api.rpc.call(
            "admission_failed", session_id=session_id, code=code, detail=str(error), now=time.time()
        )
        return error_response(502, code, message)
    status, body = await api.rpc.call(
        "attach_call", session_id=session_id, call_id=call.call_id, now=time.time()
    )
    if status != 200:
        return relayed(status, body)
    # The call is the session's: its record is where the call is seen.
    location = f"/v1/sessions/{session_id}"
    if "application/json" in request.headers.get("accept", ""):
        answer = Connected(session_id=session_id, call_id=call.call_id, sdp=call.sdp_answer)
        return answer.sent(201, {"Location": location})
    return Response(
        call.sdp_answer.encode(),
        status_code=201,
        media_type="application/sdp",
        headers={"X-Switchboard-Call-Id": call.call_id, "Location": location},
    )


async def _sdp_offer(request: Request) -> str:
    raw = await request.body()
    with refusing():
        if request.headers.get("content-type", "").startswith("application/sdp"):
            return ConnectRequest(sdp=raw.decode(errors="replace")).sdp
        return ConnectRequest.model_validate(requests.parse_json(raw)).sdp


async def live_token(api: SessionsPort, request: Request) -> Response:
    """A fresh live token for a session that exists and is not over."""
    session_id = request.path_params["session_id"]
    await session_not_over(api, session_id)
    # Location names the stream the token opens; the token is in the body only, since
    # proxies log headers and URLs more readily than bodies.
    answer = LiveToken(session_id=session_id, **live_credentials(api, session_id).model_dump())
    return answer.sent(201, {"Location": f"/v1/sessions/{session_id}/live"})


async def live(api: SessionsPort, websocket: WebSocket) -> None:
    """Stream a session's transcript and controls to a watcher. Authorized by the API token (in
    the Authorization header) or by a live token for this session (`?token=`); an unknown
    session is closed with 4404, an ended one with 4410."""
    session_id = websocket.path_params["session_id"]
    if not await _may_listen(api, websocket, session_id):
        client = f"{websocket.client.host}:{websocket.client.port}" if websocket.client else ""
        api.counters.refused_handshake("unauthorized", websocket.url.path[:200], client)
        await websocket.send_denial_response(
            error_response(
                401,
                "unauthorized",
                "a live token for this session, or the API token, is required",
                {"WWW-Authenticate": 'Bearer realm="switchboard"'},
            )
        )
        return
    await websocket.accept()
    status, record = (
        (404, {})
        if not SESSION_ID.fullmatch(session_id)
        else await api.rpc.call("describe_session", session_id=session_id)
    )
    if status == 404:
        await websocket.close(CLOSE_UNKNOWN_SESSION, "no such session")
        return
    if status != 200:
        await websocket.close(1011, "the session could not be looked up; try again")
        return
    if record["status"] in _TERMINAL_STATUSES:
        await websocket.close(CLOSE_SESSION_ENDED, f"session is {record['status']}")
        return
    await api.watched.listen(session_id, websocket)


async def _may_listen(api: SessionsPort, websocket: WebSocket, session_id: str) -> bool:
    authorization = header(websocket.scope, b"authorization")
    if authorization:
        identity = await api.keyring.identify(authorization)
        if identity is not None and identity.may(Permission.READ):
            return True
    token = websocket.query_params.get("token", "")
    return watch_tokens.session_of(api.watch_secret, token, time.time()) == session_id


_SESSION_ERRORS: dict[int, tuple[str, ...]] = {404: ("session_not_found", "not_found")}

ROUTES = (
    Operation(
        "POST",
        "/v1/sessions",
        "Create a session",
        "sessions",
        {201: "the session record, with live credentials for its stream"},
        create,
        body=SessionSpec,
        errors={422: ("malformed_request", "unknown_tool", "events_url_unsupported", "model_retired")},
        answer=SessionCreated,
        location="/v1/sessions/{session_id}",
        starts_a_call=True,
    ),
    Operation(
        "GET",
        "/v1/sessions",
        "Sessions, newest first, with the counts",
        "sessions",
        {200: "a page of sessions"},
        list_sessions,
        errors={422: ("malformed_request",)},
        query=(
            Query("status", "a status, or `live` (in a call) or `not_connected`"),
            Query("route", "a route's id"),
            Query("end_reason", "an end reason"),
            Query("agent", "the calls an agent ran: `name`, or one version's, `name@3`"),
            Query("q", "a search of the id, the numbers and the words said (≤ 200 characters)"),
            *paging("the creation time and the id, newest first"),
        ),
        answer=SessionPage,
    ),
    Operation(
        "GET",
        S,
        "A session's durable record",
        "sessions",
        {200: "the record"},
        describe,
        errors=_SESSION_ERRORS,
        query=(Query("events", "`1` adds the event log", {"enum": ["0", "1"]}),),
        answer=Session,
    ),
    Operation(
        "GET",
        f"{S}/log",
        "The call log: the call's story as ordered entries",
        "sessions",
        {200: "the entries after `after`"},
        call_log,
        errors={**_SESSION_ERRORS, 422: ("malformed_request",)},
        query=(Query("after", "the entry number after which to start", {"type": "integer", "minimum": 0}),),
        answer=CallLog,
    ),
    Operation(
        "POST",
        f"{S}/connect",
        "Connect a WebRTC call: an SDP offer in, the provider's SDP answer out",
        "sessions",
        {201: "the SDP answer (JSON with `Accept: application/json`)"},
        connect,
        body=ConnectRequest,
        other_bodies={"application/sdp": {"schema": {"type": "string", "pattern": SDP_OFFER}}},
        answer=Connected,
        other_answers={"application/sdp": {"schema": {"type": "string"}}},
        location="/v1/sessions/{session_id}",
        errors={
            **_SESSION_ERRORS,
            # Over (its end reason in `end_reason`), or connected already.
            409: ("session_ended", "admission_refused"),
            422: ("malformed_request",),
            502: ("provider_rejected_call", "provider_unavailable"),
            # Its Live model has its cap of sessions in a call: the session stays created.
            503: ("live_model_at_capacity",),
        },
        starts_a_call=True,
    ),
    Operation(
        "POST",
        f"{S}/live-token",
        "A fresh live token for the session's stream",
        "sessions",
        {201: "the token"},
        live_token,
        errors={**_SESSION_ERRORS, 409: ("session_ended",)},
        answer=LiveToken,
        empty_body=True,
        # The stream the token opens; the token itself is only in the body.
        location="/v1/sessions/{session_id}/live",
    ),
    Operation(
        "GET",
        f"{S}/live",
        "The live stream (a WebSocket: transcript, controls and the call log as they happen)",
        "sessions",
        {101: "switching to the WebSocket protocol"},
        listener=live,
        query=(Query("token", "the session's live token"),),
        security="live",
    ),
)
