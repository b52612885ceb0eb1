"""The gateway's HTTP API and live stream, as a Starlette app.

Every route but `GET /healthz` needs `Authorization: Bearer <API token>`; the live stream also
takes a live token (`?token=`, per session, expiring: see `pipeline.watch_tokens`), so a browser
never holds the API token. Errors are `{"error": {"code", "message"}}`.

The handlers decide nothing about a session: they validate the request, then ask a worker (an
RPC on the admission queue) or number an event into the session's log (the sink), and answer
with what came back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from openai.types.webhooks import LiveTransportIncomingWebhookEvent, RealtimeCallIncomingWebhookEvent
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from gateway import console, openapi, tracing
from gateway.keys import KeyRing
from gateway.phone import WebhookRefused
from gateway.providers.rest import ProviderCallError
from gateway.watch import CLOSE_SESSION_ENDED, CLOSE_UNKNOWN_SESSION
from gateway.web import EXCEPTION_HANDLERS, ASGIApp, Receive, Scope, Send, error_body, error_response, header
from pipeline import watch_tokens
from pipeline.api import (
    BLOCK_NAME,
    EVENTS_URL_UNSUPPORTED,
    AgentReply,
    AgentSay,
    AttentionSpec,
    CollectSpec,
    ConnectRequest,
    EndRequest,
    PromptText,
    RouteSpec,
    SessionSpec,
    SupervisorCommand,
    ToolsChange,
    TypedText,
)
from pipeline.call.messages import Playback
from pipeline.desk import MAXIMUM_SEARCH_CHARS, checked_status
from pipeline.errors import BadInput, MalformedRequest, ProviderUnavailable
from pipeline.idempotency import derived_id
from pipeline.limits import (
    API_REPLY_TIMEOUT_MS,
    COMPACTION_REPLY_TIMEOUT_MS,
    ERASURE_REPLY_TIMEOUT_MS,
    MAXIMUM_REQUEST_JSON_DEPTH,
    TYPED_MESSAGES_PER_MINUTE,
)
from pipeline.numbers import e164
from pipeline.outbound.specs import CallSpec, CampaignSpec, ContactsPage, SuppressionSpec, TrunkSpec
from pipeline.pages import requested
from pipeline.privacy.boundary import Redactor
from pipeline.privacy.inputs import redacted_input
from pipeline.privacy.policy import ALWAYS_REDACTED, Kind
from pipeline.refusals import not_in_call, over
from pipeline.roles import Identity, Permission, Role, permission_for
from pipeline.state import TERMINAL_PHASES
from pipeline.timestamps import rfc3339
from pipeline.wire import (
    TYPED_ITEM_PREFIX,
    AgentReplyRequested,
    AgentSayRequested,
    AttentionRequested,
    CollectRequested,
    CompactionRequested,
    EndRequested,
    HoldRequested,
    HostInput,
    InterruptRequested,
    PromptSetRequested,
    SupervisorRequested,
    TextInjected,
    ToolsSetRequested,
    exceeds_depth,
    holds_unstorable,
    host_event,
)

if TYPE_CHECKING:
    from gateway.ports import ApiPort

logger = logging.getLogger(__name__)

SESSION_ID = re.compile(r"[A-Za-z0-9_\-]{1,64}")
WEBHOOK_PATH = "/v1/webhooks/openai"
# Creates that find what an earlier run of the same keyed request made (their ids derive from
# the key, or they add or replace by name or number): a 5xx of theirs is not kept for a day.
RERUNS_SAFELY = frozenset(
    {"/v1/sessions", "/v1/calls", "/v1/campaigns", "/v1/routes", "/v1/trunks", "/v1/suppressions"}
)
_TERMINAL_STATUSES = frozenset(str(phase) for phase in TERMINAL_PHASES)

Handler = Callable[[Request, str], Awaitable[Response]]
# Requests a worker answers when it applies them, in the call's order.
AnsweredInput = (
    EndRequested
    | CompactionRequested
    | AgentSayRequested
    | AgentReplyRequested
    | PromptSetRequested
    | ToolsSetRequested
    | HoldRequested
    | AttentionRequested
    | CollectRequested
    | SupervisorRequested
    | TextInjected
    | InterruptRequested
)


def build_api(gateway: ApiPort) -> Starlette:
    api = _Api(gateway)
    session_routes: list[tuple[str, str, Handler]] = [
        ("", "GET", api.describe),
        ("", "DELETE", api.erase),
        ("/log", "GET", api.call_log),
        ("/connect", "POST", api.connect),
        ("/end", "POST", api.end),
        ("/caller/text", "POST", api.caller_text),
        ("/agent/say", "POST", api.agent_say),
        ("/agent/reply", "POST", api.agent_reply),
        ("/prompt/{name}", "PUT", api.set_prompt),
        ("/tools", "PUT", api.set_tools),
        ("/hold", "POST", api.hold),
        ("/unhold", "POST", api.unhold),
        ("/attention", "POST", api.attention),
        ("/collect", "POST", api.collect),
        ("/supervisor", "POST", api.supervise),
        ("/interrupt", "POST", api.interrupt),
        ("/compact", "POST", api.compact),
        ("/live-token", "POST", api.live_token),
    ]
    routes: list[Route | WebSocketRoute] = [
        Route("/healthz", api.health, methods=["GET"]),
        Route("/readyz", api.ready, methods=["GET"]),
        Route("/metrics", api.metrics, methods=["GET"]),
        Route(WEBHOOK_PATH, api.openai_webhook, methods=["POST"]),
        Route("/v1/routes", api.list_routes, methods=["GET"]),
        Route("/v1/routes", api.add_route, methods=["POST"]),
        Route("/v1/routes/{route_id}", api.show_route, methods=["GET"]),
        Route("/v1/routes/{route_id}", api.remove_route, methods=["DELETE"]),
        Route("/v1/phone-calls/{call_id}", api.phone_call, methods=["GET"]),
        Route("/v1/calls", api.place_call, methods=["POST"]),
        Route("/v1/calls/{call_id}", api.outbound_call, methods=["GET"]),
        Route("/v1/campaigns", api.list_campaigns, methods=["GET"]),
        Route("/v1/campaigns", api.create_campaign, methods=["POST"]),
        Route("/v1/campaigns/{campaign_id}", api.campaign, methods=["GET"]),
        Route("/v1/campaigns/{campaign_id}/contacts", api.campaign_contacts, methods=["GET"]),
        Route("/v1/campaigns/{campaign_id}/contacts", api.add_campaign_contacts, methods=["POST"]),
        Route("/v1/campaigns/{campaign_id}/{verb:str}", api.campaign_verb, methods=["POST"]),
        Route("/v1/trunks", api.list_trunks, methods=["GET"]),
        Route("/v1/trunks", api.add_trunk, methods=["POST"]),
        Route("/v1/trunks/{name}", api.show_trunk, methods=["GET"]),
        Route("/v1/trunks/{name}", api.remove_trunk, methods=["DELETE"]),
        Route("/v1/suppressions", api.list_suppressions, methods=["GET"]),
        Route("/v1/suppressions", api.add_suppression, methods=["POST"]),
        Route("/v1/suppressions/{number}", api.show_suppression, methods=["GET"]),
        Route("/v1/suppressions/{number}", api.remove_suppression, methods=["DELETE"]),
        Route("/v1/callers/{number}", api.erase_caller, methods=["DELETE"]),
        Route("/v1/sessions", api.create, methods=["POST"]),
        Route("/v1/sessions", api.list_sessions, methods=["GET"]),
        Route("/v1/queue", api.call_queue, methods=["GET"]),
        Route("/v1/me", api.me, methods=["GET"]),
        Route("/v1/dead-letters", api.dead_letters, methods=["GET"]),
        Route("/v1/dead-letters/{letter_id}", api.dead_letter, methods=["GET", "DELETE"]),
        Route("/v1/dead-letters/{letter_id}/replay", api.replay_dead_letter, methods=["POST"]),
        Route("/openapi.json", openapi_document, methods=["GET"]),
        Route("/docs", console.docs_page, methods=["GET"]),
        Route("/console", console.page, methods=["GET"]),
        Route("/console/{asset}", console.asset, methods=["GET"]),
        *(
            Route(f"/v1/sessions/{{session_id}}{suffix}", _for_session(handler), methods=[method])
            for suffix, method, handler in session_routes
        ),
        WebSocketRoute("/v1/sessions/{session_id}/live", api.live),
    ]
    return Starlette(routes=routes, exception_handlers=EXCEPTION_HANDLERS)


def authenticated(app: ASGIApp, keyring: KeyRing) -> ASGIApp:
    """Every HTTP request but the health check and the provider's webhooks carries a bearer
    token: the deployment's API token or an API key (401 otherwise), whose role must allow the
    route (403 otherwise). Checked before routing, so an unauthenticated client learns nothing
    of the routes; the identity rides on the request (`scope["identity"]`). The live stream
    checks its own credentials: it also takes a live token."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _is_open(scope["path"]):
            identity = await keyring.identify(header(scope, b"authorization"))
            if identity is None:
                response = error_response(
                    401,
                    "unauthorized",
                    "a valid bearer token is required",
                    {"WWW-Authenticate": 'Bearer realm="switchboard"'},
                )
                await response(scope, receive, send)
                return
            needed = permission_for(scope["method"], scope["path"])
            if not identity.may(needed):
                message = f"a {identity.role} key may not {needed} (this route needs it)"
                await error_response(403, "forbidden", message)(scope, receive, send)
                return
            scope["identity"] = identity
        await app(scope, receive, send)

    return guard


def storable_addresses(app: ASGIApp) -> ASGIApp:
    """Refuse (422) an HTTP request whose path or query holds U+0000: its parameters reach
    the workers' queries, and PostgreSQL refuses the character, so such a request used to be
    answered 503 `reply_timeout` after the whole reply wait (Schemathesis found it)."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ("\x00" in scope["path"] or b"%00" in scope["query_string"]):
            message = "the path or query holds U+0000, which cannot be stored"
            await error_response(422, "malformed_request", message)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guard


# A JSON body's media types: application/json and any application/*+json (RFC 6839).
_JSON = "application/json"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def json_bodies(app: ASGIApp) -> ASGIApp:
    """Refuse (415 `unsupported_media_type`) a request whose body's Content-Type is not one its
    operation takes (gateway/openapi.py): JSON (`application/json` or `application/*+json`, in
    UTF-8 if it names a charset) everywhere, an SDP offer or a CSV where the operation says so.
    Checked before an idempotency key is claimed or a worker asked, so a refused body changes
    nothing; a request without a body is let through (a verb may take none)."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _BODY_METHODS and _has_body(scope):
            accepted = openapi.accepted_bodies(scope["method"], scope["path"])
            sent = header(scope, b"content-type").decode("latin-1")
            if accepted is not None and not _is_accepted(sent, accepted):
                message = f"the body's Content-Type must be {' or '.join(accepted)}, not {sent[:80]!r}"
                await error_response(415, "unsupported_media_type", message)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guard


def _has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length").strip()
    return bool(header(scope, b"transfer-encoding")) or (bool(length) and length != b"0")


def _is_accepted(content_type: str, accepted: tuple[str, ...]) -> bool:
    kind, *parameters = (part.strip().lower() for part in content_type.split(";"))
    if _JSON in accepted and (kind == _JSON or (kind.startswith("application/") and kind.endswith("+json"))):
        charsets = [
            value.strip('"') for name, _, value in (p.partition("=") for p in parameters) if name == "charset"
        ]
        # JSON is UTF-8 (RFC 8259); a body said to be in another charset would be misread.
        return all(charset in ("utf-8", "utf8") for charset in charsets)
    return kind in accepted


def _draining() -> Response:
    """A new call asked of a gateway that is stopping: another gateway takes it (a load balancer
    sends it there once /readyz says so; the provider delivers a webhook again)."""
    return error_response(
        503, "draining", "this gateway is stopping and takes no new calls; ask another", {"Retry-After": "1"}
    )


def _is_open(path: str) -> bool:
    """Routes without a bearer token: the health check, the provider's webhooks (signed), the
    API's description and its page, and the console's page and scripts (they hold no data: the
    page asks for a key, and every call it makes carries it)."""
    return path in (
        "/healthz",
        "/readyz",
        WEBHOOK_PATH,
        "/console",
        "/openapi.json",
        "/docs",
    ) or path.startswith("/console/")


async def openapi_document(_request: Request) -> Response:
    """This API as OpenAPI 3.1 (gateway/openapi.py)."""
    return JSONResponse(openapi.document())


def _for_session(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        if not SESSION_ID.fullmatch(session_id):
            return error_response(404, "not_found", f"no route {request.url.path}")
        return await handler(request, session_id)

    return endpoint


class _Api:
    def __init__(self, gateway: ApiPort) -> None:
        self.gateway = gateway
        self.rpc = gateway.rpc
        self.sink = gateway.sink
        self._watch_secret = gateway.watch_secret

    async def health(self, _request: Request) -> Response:
        return JSONResponse({"status": "ok", "gateway": self.gateway.gateway_id})

    async def ready(self, _request: Request) -> Response:
        """Whether to send this gateway new calls: 503 while it drains (on SIGTERM) or cannot
        reach Redis, so a load balancer sends them to another."""
        reason = self.gateway.readiness()
        if reason is None:
            return JSONResponse({"status": "ready", "gateway": self.gateway.gateway_id})
        if reason == "draining":
            return _draining()
        return error_response(503, "not_ready", f"this gateway is not ready: {reason}", {"Retry-After": "1"})

    async def metrics(self, _request: Request) -> Response:
        """The gateway's metrics in the Prometheus text format (read in a thread: the queues'
        are read from Redis)."""
        if self.gateway.metrics is None:
            return error_response(404, "metrics_off", "metrics are off (SWITCHBOARD_METRICS=false)")
        body = await asyncio.to_thread(generate_latest, self.gateway.metrics.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    # ── sessions ──────────────────────────────────────────────────────────────────────

    async def create(self, request: Request) -> Response:
        if self.gateway.draining:
            return _draining()
        try:
            spec = SessionSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        session_id = _new_id(request, "sess")
        status, body = await self.rpc.call(
            "create_session", session_id=session_id, spec=spec.model_dump(mode="json"), now=time.time()
        )
        if status == 201:
            body = {**body, "live": self._live_credentials(session_id)}
        return _created(body, status, f"/v1/sessions/{session_id}")

    async def list_sessions(self, request: Request) -> Response:
        """Sessions, newest first: `?status=` (or `live`, `not_connected`), `?route=`,
        `?end_reason=`, `?q=` (a search of the id, the numbers and the words said),
        `?created_after=` / `?created_before=` (ISO 8601), `?limit=` (≤ 500) and `?cursor=`
        (the `next` of the page before); and the counts."""
        query = request.query_params
        search = query.get("q", "").strip()
        if len(search) > MAXIMUM_SEARCH_CHARS:
            return error_response(422, "malformed_request", f"q is at most {MAXIMUM_SEARCH_CHARS} characters")
        try:
            page = requested("sessions", query).as_query()
            listed_status = checked_status(query.get("status", ""))
        except BadInput as error:
            return _invalid(error)
        status, body = await self.rpc.call(
            "list_sessions",
            status=listed_status,
            route=query.get("route", "")[:128],
            end_reason=query.get("end_reason", "")[:128],
            q=search,
            page=page,
        )
        return JSONResponse(body, status_code=status)

    async def me(self, request: Request) -> Response:
        """Who the request's key is and what its role may do (the console shows only the
        buttons a key may use)."""
        identity: Identity = request.scope["identity"]
        may = {str(permission): identity.may(permission) for permission in Permission}
        return JSONResponse({"name": identity.name, "role": str(identity.role), "may": may})

    async def call_queue(self, _request: Request) -> Response:
        """The desk's queue: `{"waiting", "held", "struggling"}` — callers waiting for a person
        (longest first), callers on hold or held by a person, calls in trouble lately."""
        status, body = await self.rpc.call("call_queue")
        return JSONResponse(body, status_code=status)

    async def dead_letters(self, request: Request) -> Response:
        """A page of the dead letters, oldest first (by when each was dead-lettered)."""
        return await self._page(request, "dead_letters", "dead_letters", verb="list")

    async def dead_letter(self, request: Request) -> Response:
        """A dead letter (with what a replay would do), or, with DELETE, purge it."""
        verb = "purge" if request.method == "DELETE" else "show"
        status, body = await self.rpc.call(
            "dead_letters", verb=verb, letter_id=request.path_params["letter_id"]
        )
        return JSONResponse(body, status_code=status)

    async def replay_dead_letter(self, request: Request) -> Response:
        status, body = await self.rpc.call(
            "dead_letters", verb="replay", letter_id=request.path_params["letter_id"]
        )
        return JSONResponse(body, status_code=status)

    async def describe(self, request: Request, session_id: str) -> Response:
        status, body = await self.rpc.call(
            "describe_session", session_id=session_id, with_events=request.query_params.get("events") == "1"
        )
        return JSONResponse(body, status_code=status)

    async def call_log(self, request: Request, session_id: str) -> Response:
        """The call's story as ordered entries (those after `?after=N`), read from the durable
        log; `ended` says whether `call.ended` has been written."""
        after = request.query_params.get("after", "0")
        if not after.isdigit():
            return error_response(422, "malformed_request", "after must be an entry number")
        status, body = await self.rpc.call("session_call_log", session_id=session_id, after=int(after))
        return JSONResponse(body, status_code=status)

    async def connect(self, request: Request, session_id: str) -> Response:
        if self.gateway.draining:
            return _draining()
        try:
            sdp = await _sdp_offer(request)
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        status, body = await self.rpc.call("begin_admission", session_id=session_id, now=time.time())
        if status != 200:
            return JSONResponse(body, status_code=status)
        provider = self.gateway.rest_of(str(body.get("provider") or "realtime"))
        session: dict[str, Any] = {"instructions": body["instructions"]}
        if body.get("tools"):
            session["tools"] = body["tools"]
        if body.get("session") is not None:
            # A session whose provider cannot change its instructions later (Live) is created
            # with its whole startup configuration; its session id is the call's id from here on.
            session = dict(body["session"])
        try:
            call = await provider.create_call(sdp, session)
        except ProviderUnavailable as error:
            # The detail (the provider's own answer) is for the session record; the client is
            # told what happened, not where the provider lives.
            if isinstance(error, ProviderCallError):
                code, message = "provider_rejected_call", f"the provider refused the call ({error.status})"
            else:
                code, message = "provider_unavailable", "the provider could not be reached"
            await self.rpc.call(
                "admission_failed", session_id=session_id, code=code, detail=str(error), now=time.time()
            )
            return error_response(502, code, message)
        status, body = await self.rpc.call(
            "attach_call", session_id=session_id, call_id=call.call_id, now=time.time()
        )
        if status != 200:
            return JSONResponse(body, status_code=status)
        # The call is the session's: its record is where the call is seen.
        location = f"/v1/sessions/{session_id}"
        if "application/json" in request.headers.get("accept", ""):
            answer = {"session_id": session_id, "call_id": call.call_id, "sdp": call.sdp_answer}
            return _created(answer, 201, location)
        return Response(
            call.sdp_answer.encode(),
            status_code=201,
            media_type="application/sdp",
            headers={"X-Switchboard-Call-Id": call.call_id, "Location": location},
        )

    async def end(self, request: Request, session_id: str) -> Response:
        """End the call: answered by the worker that applies the end in the call's order (202
        if it ended the call, 409 if the call was over), or 202 `queued` if that takes longer
        than the reply timeout (the end is in the log and will be applied)."""
        try:
            body = await request.body()
            end = EndRequest.model_validate(_parse_json(body) if body.strip() else {})
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        queued = {"session_id": session_id, "status": "queued", "reason": end.reason}
        event = EndRequested(reason=end.reason)
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, queued)

    async def agent_say(self, request: Request, session_id: str) -> Response:
        """The agent says these words now: 202 when its response is asked for, 409 when the
        call is not live or the agent is answering (answered by the worker, in the call's order)."""
        try:
            words = AgentSay.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        event = AgentSayRequested(text=words.text)
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def agent_reply(self, request: Request, session_id: str) -> Response:
        """The agent replies now, steered by these instructions: 202, or 409 as for agent/say."""
        try:
            steer = AgentReply.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        event = AgentReplyRequested(instructions=steer.instructions)
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def set_prompt(self, request: Request, session_id: str) -> Response:
        """Set one named block of the instructions (200 changed or unchanged; 422 past the bound)."""
        name = request.path_params["name"]
        try:
            if not BLOCK_NAME.fullmatch(name):
                raise MalformedRequest("a block's name is 1 to 64 letters, digits, '_' or '-'")
            block = PromptText.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        event = PromptSetRequested(name=name, text=block.text)
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def set_tools(self, request: Request, session_id: str) -> Response:
        """Offer these registered tools from now on (422 for an unknown one, 409 while a tool runs)."""
        try:
            change = ToolsChange.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        status, catalog = await self.rpc.call("resolve_tools", names=list(change.tools))
        if status != 200:
            return JSONResponse(catalog, status_code=status)
        event = ToolsSetRequested.model_validate(catalog)
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def hold(self, request: Request, session_id: str) -> Response:
        """Hold the line: the agent neither speaks nor hears until it is given back."""
        return await self._hold(request, session_id, held=True)

    async def unhold(self, request: Request, session_id: str) -> Response:
        """Give the line back: the agent hears and speaks again."""
        return await self._hold(request, session_id, held=False)

    async def _hold(self, request: Request, session_id: str, *, held: bool) -> Response:
        if (await request.body()).strip() not in (b"", b"{}"):
            return error_response(422, "malformed_request", "hold and unhold take no parameters")
        event = HoldRequested(held=held, playback=self._playback(session_id))
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def attention(self, request: Request, session_id: str) -> Response:
        """Hold the caller for a person for at most `wait_s` (202; 409 already_waiting)."""
        try:
            wanted = AttentionSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        event = AttentionRequested(
            reason=wanted.reason, wait_s=wanted.wait_s, playback=self._playback(session_id)
        )
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def collect(self, request: Request, session_id: str) -> Response:
        """Have the caller key digits in for a tool (202 `collecting`; 409 when the call cannot,
        422 when the tool cannot take them)."""
        try:
            wanted = CollectSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        event = CollectRequested(
            tool=wanted.tool,
            prompt=wanted.prompt,
            parameter=wanted.parameter,
            arguments=wanted.arguments,
            digits=wanted.digits,
            timeout_s=wanted.timeout_s,
            playback=self._playback(session_id),
        )
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def supervise(self, request: Request, session_id: str) -> Response:
        """A supervisor's verb: say, whisper, take_over, release, end or transfer."""
        try:
            command = SupervisorCommand.model_validate(await _json_body(request))
            by = _supervisor(request, command)
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        event = SupervisorRequested.model_validate(
            {"by": by, "verb": command.verb.model_dump(mode="json"), "playback": self._playback(session_id)}
        )
        return await self._in_order(session_id, event, API_REPLY_TIMEOUT_MS, _queued(session_id))

    async def caller_text(self, request: Request, session_id: str) -> Response:
        """Typed text into a live call, as the caller's message: answered like speech. Trimmed,
        non-empty, bounded, and at most TYPED_MESSAGES_PER_MINUTE a minute per session."""
        try:
            typed = TypedText.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        record, refusal = await self._session_in_call(session_id)
        if record is None:
            assert refusal is not None
            return refusal
        within = await asyncio.wrap_future(
            self.sink.within_rate(session_id, "say", TYPED_MESSAGES_PER_MINUTE)
        )
        if not within:
            message = f"at most {TYPED_MESSAGES_PER_MINUTE} typed messages a minute per session"
            return error_response(429, "rate_limited", message, {"Retry-After": "60"})
        item_id = f"{TYPED_ITEM_PREFIX}{uuid.uuid4().hex[:16]}"
        # The worker answers: 202 once the text is in the conversation, or the provider's refusal.
        queued = {"session_id": session_id, "item_id": item_id, "status": "queued"}
        event = TextInjected(item_id=item_id, text=typed.text)
        return await self._asked(session_id, record, event, API_REPLY_TIMEOUT_MS, queued)

    async def interrupt(self, request: Request, session_id: str) -> Response:
        """Stop the response that is playing, as if the caller had talked over it."""
        if (await request.body()).strip() not in (b"", b"{}"):
            return error_response(422, "malformed_request", "interrupt takes no parameters")
        record, refusal = await self._session_in_call(session_id)
        if record is None:
            assert refusal is not None
            return refusal
        interrupting = {"session_id": session_id, "status": "interrupting"}
        interrupt = InterruptRequested(playback=self._playback(session_id))
        return await self._asked(session_id, record, interrupt, API_REPLY_TIMEOUT_MS, interrupting)

    async def compact(self, request: Request, session_id: str) -> Response:
        """Force a compaction: answered when its cycle ends (compacted or not, and why), or
        202 if it is still running when the wait is over (the session record then tells)."""
        if (await request.body()).strip() not in (b"", b"{}"):
            return error_response(422, "malformed_request", "compact takes no parameters")
        message = "the compaction is still running; its outcome will be in the session record"
        still_running = {"session_id": session_id, "status": "compacting", "message": message}
        event = CompactionRequested(request_id="", gateway_id=self.gateway.gateway_id)
        return await self._in_order(session_id, event, COMPACTION_REPLY_TIMEOUT_MS, still_running)

    async def live_token(self, _request: Request, session_id: str) -> Response:
        """A fresh live token for a session that exists and is not over."""
        record, refusal = await self._session_not_over(session_id)
        if record is None:
            assert refusal is not None
            return refusal
        # Location names the stream the token opens; the token is in the body only, since
        # proxies log headers and URLs more readily than bodies.
        answer = {"session_id": session_id, **self._live_credentials(session_id)}
        return _created(answer, 201, f"/v1/sessions/{session_id}/live")

    # ── phone calls ───────────────────────────────────────────────────────────────────

    async def openai_webhook(self, request: Request) -> Response:
        """The provider announces a phone call. Its signature is checked (400 and nothing
        created otherwise); the delivery is recorded and the call answered once per call id
        (accepted with its route's session, or rejected with a SIP status) before the 2xx. A
        delivery that could not be recorded, or whose call could not be answered, gets a 5xx
        so the provider delivers it again."""
        if self.gateway.draining:
            return _draining()
        body = await request.body()
        try:
            event = self.gateway.phone_door.unwrap(body, request.headers)
        except WebhookRefused as refused:
            self.gateway.count_refused_webhook(refused.code)
            return error_response(400, refused.code, str(refused))
        webhook_id = request.headers.get("webhook-id", event.id)
        if isinstance(event, LiveTransportIncomingWebhookEvent):
            # A Live phone call: answered by its session id, through the Live API.
            return await self.gateway.answer_phone_call(
                webhook_id, event.data.session_id, event.data.sip_headers, provider="live"
            )
        if not isinstance(event, RealtimeCallIncomingWebhookEvent):
            return JSONResponse({"received": event.type, "acted": False})
        return await self.gateway.answer_phone_call(webhook_id, event.data.call_id, event.data.sip_headers)

    async def list_routes(self, request: Request) -> Response:
        """A page of the routes in number order, with the calls refused counted by why."""
        try:
            page = requested("routes", request.query_params).as_query()
        except BadInput as error:
            return _invalid(error)
        status, body = await self.rpc.call("routes", verb="list", page=page)
        if status == 200:
            body = {**body, "refused": {**body["refused"], **await self.gateway.refused_webhooks()}}
        return JSONResponse(body, status_code=status)

    async def add_route(self, request: Request) -> Response:
        """Add a route (or replace the one for the same number): 201, or 422."""
        try:
            route = RouteSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        status, body = await self.rpc.call("routes", verb="add", route=route.model_dump(mode="json"))
        location = f"/v1/routes/{_segment(body['route']['id'])}" if status == 201 else None
        return _created(body, status, location)

    async def phone_call(self, request: Request) -> Response:
        """What became of a phone call (by the provider's call id): its session, or why not."""
        status, body = await self.rpc.call("routes", verb="call", route_id=request.path_params["call_id"])
        return JSONResponse(body, status_code=status)

    async def show_route(self, request: Request) -> Response:
        """One route, with its calls counted (where a created route's `Location` points)."""
        status, body = await self.rpc.call("routes", verb="show", route_id=request.path_params["route_id"])
        return JSONResponse(body, status_code=status)

    async def remove_route(self, request: Request) -> Response:
        status, body = await self.rpc.call("routes", verb="remove", route_id=request.path_params["route_id"])
        return JSONResponse(body, status_code=status)

    # ── calls going out ─────────────────────────────────────────────────────────────────

    async def place_call(self, request: Request) -> Response:
        """Place one call (a Live session dials `to` through a trunk): 201 with the session and
        the call `dialing`; 409 on a Realtime session, to a suppressed number or without room
        to dial; 404 for an unknown trunk; 422 for bad input."""
        if self.gateway.draining:
            return _draining()
        try:
            spec = CallSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        session_id, call_id = _new_id(request, "sess"), _new_id(request, "call")
        status, body = await self.rpc.call(
            "place_call",
            session_id=session_id,
            call_id=call_id,
            spec=spec.model_dump(mode="json"),
            now=time.time(),
        )
        if status == 201:
            body = {**body, "live": self._live_credentials(session_id)}
        return _created(body, status, f"/v1/calls/{call_id}")

    async def create_campaign(self, request: Request) -> Response:
        """A campaign: 201 with its counts (it dials as its window and `max_concurrent` allow;
        `"paused": true` holds it while more contacts are added); 409 on a Realtime session; 422
        for bad input, a window that never opens or an expiry past."""
        try:
            spec = CampaignSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        campaign_id = _new_id(request, "camp")
        status, body = await self.rpc.call(
            "campaigns",
            verb="create",
            campaign_id=campaign_id,
            spec=spec.model_dump(mode="json"),
            now=time.time(),
        )
        return _created(body, status, f"/v1/campaigns/{campaign_id}")

    async def list_campaigns(self, request: Request) -> Response:
        """A page of the campaigns, newest first."""
        return await self._page(request, "campaigns", "campaigns", verb="list")

    async def campaign(self, request: Request) -> Response:
        campaign_id = request.path_params["campaign_id"]
        status, body = await self.rpc.call("campaigns", verb="show", campaign_id=campaign_id)
        return JSONResponse(body, status_code=status)

    async def campaign_contacts(self, request: Request) -> Response:
        """A page of a campaign's contacts, in their order (`?limit=` ≤ 1,000)."""
        campaign_id = request.path_params["campaign_id"]
        return await self._page(request, "contacts", "campaigns", verb="contacts", campaign_id=campaign_id)

    async def add_campaign_contacts(self, request: Request) -> Response:
        """More contacts for a campaign not over: `{"contacts": [...]}` (≤ 1,000) or a CSV body
        (`text/csv`, ≤ 1 MiB); each bad row is refused by its number, the rest taken."""
        campaign_id = request.path_params["campaign_id"]
        if "text/csv" in request.headers.get("content-type", ""):
            body = await request.body()
            try:
                text = body.decode("utf-8-sig")
            except UnicodeDecodeError:
                return error_response(422, "malformed_request", "the CSV is not UTF-8")
            first_line = request.query_params.get("first_line", "2")
            if not first_line.isdigit() or len(first_line) > 7:
                return error_response(422, "malformed_request", "first_line must be a line number")
            status, answer = await self.rpc.call(
                "campaigns",
                verb="add_contacts",
                campaign_id=campaign_id,
                csv=text,
                first_line=int(first_line),
            )
            return JSONResponse(answer, status_code=status)
        try:
            page = ContactsPage.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        status, answer = await self.rpc.call(
            "campaigns",
            verb="add_contacts",
            campaign_id=campaign_id,
            contacts=[contact.model_dump(mode="json") for contact in page.contacts],
        )
        return JSONResponse(answer, status_code=status)

    async def campaign_verb(self, request: Request) -> Response:
        """Pause (no new dials; calls in progress finish), resume, or cancel a campaign."""
        verb = request.path_params["verb"]
        if verb not in ("pause", "resume", "cancel"):
            return error_response(
                404, "not_found", f"a campaign has no {verb[:40]!r}: pause, resume or cancel"
            )
        campaign_id = request.path_params["campaign_id"]
        status, body = await self.rpc.call("campaigns", verb=verb, campaign_id=campaign_id)
        return JSONResponse(body, status_code=status)

    async def outbound_call(self, request: Request) -> Response:
        status, body = await self.rpc.call("outbound_call", call_id=request.path_params["call_id"])
        return JSONResponse(body, status_code=status)

    async def list_trunks(self, request: Request) -> Response:
        """A page of the trunks in name order."""
        return await self._page(request, "trunks", "trunks", verb="list")

    async def add_trunk(self, request: Request) -> Response:
        """Add a SIP trunk (or replace the one of that name): 201 (200 replaced), its password
        never answered; 422 for bad input."""
        try:
            trunk = TrunkSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        # The password travels to the worker that encrypts it, and nowhere else (the actor is
        # never retried into a dead letter: a failure is answered, and the request made again).
        body_out = {**trunk.model_dump(mode="json"), "password": trunk.password.get_secret_value()}
        status, body = await self.rpc.call("trunks", verb="add", trunk=body_out)
        return _created(body, status, f"/v1/trunks/{_segment(trunk.name)}")

    async def show_trunk(self, request: Request) -> Response:
        """One trunk, never its password."""
        status, body = await self.rpc.call("trunks", verb="show", name=request.path_params["name"])
        return JSONResponse(body, status_code=status)

    async def remove_trunk(self, request: Request) -> Response:
        status, body = await self.rpc.call("trunks", verb="remove", name=request.path_params["name"])
        return JSONResponse(body, status_code=status)

    async def list_suppressions(self, request: Request) -> Response:
        """A page of the numbers never dialled, in number order (`?limit=` ≤ 1,000)."""
        return await self._page(request, "suppressions", "suppressions", verb="list")

    async def add_suppression(self, request: Request) -> Response:
        """Never dial this number again: 201 (200 if it was already), 422 for a bad number."""
        try:
            spec = SuppressionSpec.model_validate(await _json_body(request))
        except (ValidationError, BadInput) as error:
            return _invalid(error)
        identity = request.scope.get("identity")
        by = identity.name if identity is not None else ""
        status, body = await self.rpc.call(
            "suppressions", verb="add", suppression=spec.model_dump(mode="json"), by=by
        )
        return _created(body, status, f"/v1/suppressions/{_segment(spec.number)}")

    async def show_suppression(self, request: Request) -> Response:
        """One number never dialled: why, by whom, since when (422 for a number that is none)."""
        try:
            number = e164(request.path_params["number"])
        except BadInput as error:
            return _invalid(error)
        status, body = await self.rpc.call("suppressions", verb="show", number=number)
        return JSONResponse(body, status_code=status)

    async def remove_suppression(self, request: Request) -> Response:
        """Dial this number again (422 for a number that is none)."""
        try:
            number = e164(request.path_params["number"])
        except BadInput as error:
            return _invalid(error)
        status, body = await self.rpc.call("suppressions", verb="remove", number=number)
        return JSONResponse(body, status_code=status)

    # ── erasure (admin) ───────────────────────────────────────────────────────────────

    async def erase(self, request: Request, session_id: str) -> Response:
        """Erase an ended session's content: 200 with what was removed (`already_erased` on a
        repeat), 404 for an unknown session, 409 `session_live` while its call runs."""
        status, body = await self.rpc.call(
            "erase_session", ERASURE_REPLY_TIMEOUT_MS, session_id=session_id, by=_who(request)
        )
        return JSONResponse(body, status_code=status)

    async def erase_caller(self, request: Request) -> Response:
        """Erase every ended session whose phone call came from or went to an E.164 number
        (422 otherwise): 200 with how many were erased and how many were live (skipped)."""
        try:
            number = e164(request.path_params["number"])
        except BadInput as error:
            return _invalid(error)
        status, body = await self.rpc.call(
            "erase_caller", ERASURE_REPLY_TIMEOUT_MS, number=number, by=_who(request)
        )
        return JSONResponse(body, status_code=status)

    # ── the live stream ───────────────────────────────────────────────────────────────

    async def live(self, websocket: WebSocket) -> None:
        """Stream a session's transcript and controls to a watcher. Authorized by the API token (in
        the Authorization header) or by a live token for this session (`?token=`); an unknown
        session is closed with 4404, an ended one with 4410."""
        session_id = websocket.path_params["session_id"]
        if not await self._may_listen(websocket, session_id):
            client = f"{websocket.client.host}:{websocket.client.port}" if websocket.client else ""
            self.gateway.refused_handshake("unauthorized", websocket.url.path[:200], client)
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
            else await self.rpc.call("describe_session", session_id=session_id)
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
        await self.gateway.listen(session_id, websocket)

    async def _may_listen(self, websocket: WebSocket, session_id: str) -> bool:
        authorization = header(websocket.scope, b"authorization")
        if authorization:
            identity = await self.gateway.keyring.identify(authorization)
            if identity is not None and identity.may(Permission.READ):
                return True
        token = websocket.query_params.get("token", "")
        return watch_tokens.session_of(self._watch_secret, token, time.time()) == session_id

    def _live_credentials(self, session_id: str) -> dict[str, Any]:
        token, expires_at = watch_tokens.mint(self._watch_secret, session_id, time.time())
        return {
            "token": token,
            "expires_at": rfc3339(expires_at),
            "path": f"/v1/sessions/{session_id}/live?token={token}",
        }

    # ── shared ────────────────────────────────────────────────────────────────────────

    async def _page(self, request: Request, listing: str, actor: str, **asked: Any) -> Response:
        """A page of a list (`pipeline.pages`): its query checked here (422 at once for a bad
        limit, cursor or time), read by a worker."""
        try:
            page = requested(listing, request.query_params).as_query()
        except BadInput as error:
            return _invalid(error)
        status, body = await self.rpc.call(actor, page=page, **asked)
        return JSONResponse(body, status_code=status)

    def _playback(self, session_id: str) -> Playback | None:
        """What the caller hears now, if this gateway holds the call (only it knows)."""
        playback = self.gateway.playback(session_id)
        return Playback.model_validate(playback) if playback else None

    async def _in_order(
        self,
        session_id: str,
        event: AnsweredInput,
        timeout_ms: int,
        still_waiting: dict[str, Any],
    ) -> Response:
        """Number a request into a session that is not over, and answer with what the worker that
        applies it (in the call's order) replies; 202 `still_waiting` if that takes longer than
        `timeout_ms` (the request is in the log and will be applied)."""
        command = event.type.removeprefix("switchboard.")
        if isinstance(event, SupervisorRequested):
            command = f"supervisor.{event.verb.type}"
        generation = self.gateway.held_generation(session_id)
        if generation is not None:
            # The call is held here: its generation is known and this gateway numbers its
            # events, so the request goes straight into the log (an ended session answers
            # session_ended itself) without reading the record through a worker first.
            record: dict[str, Any] = {"generation": generation, "logged_seq": 0}
        else:
            found, refusal = await self._session_not_over(session_id)
            if found is None:
                assert refusal is not None
                self.gateway.count_command(command, refusal.status_code)
                return refusal
            record = found
        return await self._asked(session_id, record, event, timeout_ms, still_waiting)

    async def _asked(
        self,
        session_id: str,
        record: dict[str, Any],
        event: AnsweredInput,
        timeout_ms: int,
        still_waiting: dict[str, Any],
    ) -> Response:
        """Number a request into the session's log and answer with what the worker that
        applies it replies; 202 `still_waiting` if that takes longer than `timeout_ms`."""
        command = event.type.removeprefix("switchboard.")
        if isinstance(event, SupervisorRequested):
            command = f"supervisor.{event.verb.type}"
        request_id = uuid.uuid4().hex
        reply = self.rpc.expect(request_id)
        # Whatever the request carries passes the session's privacy boundary before it is
        # numbered: the log, and all that reads it, keeps only what the boundary lets through.
        private = redacted_input(event, self._redactor(session_id, record))
        asking = private.model_copy(update={"request_id": request_id, "gateway_id": self.gateway.gateway_id})
        with tracing.verb(session_id, command) as traceparent:
            self._submit(session_id, record, asking, traceparent)
            answer = await self.rpc.wait(request_id, reply, timeout_ms)
        if answer is None:
            self.gateway.count_command(command, 202)
            return JSONResponse(still_waiting, status_code=202)
        status, answered = answer
        self.gateway.count_command(command, status)
        return JSONResponse(answered, status_code=status)

    def _redactor(self, session_id: str, record: dict[str, Any]) -> Redactor:
        """The session's redaction: the boundary of its call when this gateway holds it, else
        the kinds its record names."""
        held = self.gateway.redactor_of(session_id)
        if held is not None:
            return held
        return Redactor(Kind(kind) for kind in record.get("privacy", {}).get("redact", ALWAYS_REDACTED))

    def _submit(
        self, session_id: str, record: dict[str, Any], event: HostInput, traceparent: str | None = None
    ) -> None:
        """Number an API request's event into the session's log, above the highest seq the
        record shows logged: a gateway that never numbered for this session (its call is held
        elsewhere) must not start at 1 after Redis lost the counter, or the event would be
        taken for a duplicate and ignored."""
        self.sink.submit_event(
            session_id,
            int(record["generation"]),
            host_event(event),
            time.time(),
            after_seq=int(record["logged_seq"]),
            traceparent=traceparent,
        )

    async def _session(self, session_id: str) -> tuple[dict[str, Any] | None, Response | None]:
        """The session's record, or the answer that says why there is none."""
        status, body = await self.rpc.call("describe_session", session_id=session_id)
        if status != 200:
            return None, JSONResponse(body, status_code=status)
        return body, None

    async def _session_not_over(self, session_id: str) -> tuple[dict[str, Any] | None, Response | None]:
        """The session's record if it is not over, else the answer that says why not."""
        record, refusal = await self._session(session_id)
        ended = over(record["status"], record.get("end_reason")) if record is not None else None
        if ended is not None:
            return None, JSONResponse(ended.body(), status_code=409)
        return record, refusal

    async def _session_in_call(self, session_id: str) -> tuple[dict[str, Any] | None, Response | None]:
        """The session's record if its call is live, else the answer that says why not."""
        record, refusal = await self._session(session_id)
        refused = not_in_call(record["status"], record.get("end_reason")) if record is not None else None
        if refused is not None:
            return None, JSONResponse(refused.body(), status_code=409)
        return record, refusal


def _new_id(request: Request, kind: str) -> str:
    """A new id of `kind` ("sess", "call", "camp"): derived from the request's Idempotency-Key
    when it has one, so a retry of a create that made something (and lost its answer) finds it
    instead of making it twice; else fresh."""
    seed: str | None = request.scope.get("idempotency_seed")
    return derived_id(seed, kind) if seed is not None else f"{kind}_{uuid.uuid4().hex}"


def _supervisor(request: Request, command: SupervisorCommand) -> dict[str, str]:
    """Who uses a supervisor's verb: a supervisor's key says who (its id and name; a `by` in the
    body is not trusted over it); the deployment's token or an admin key names them in `by`."""
    identity: Identity | None = request.scope.get("identity")
    if identity is not None and identity.role is Role.SUPERVISOR:
        return {"id": identity.key_id, "name": identity.name}
    if command.by is None:
        raise MalformedRequest("by: who acts is required ({id, name}) unless a supervisor's key is used")
    return command.by.model_dump(mode="json")


def _who(request: Request) -> str:
    """Who asked, as the audit row of an erasure names them: the key's role and id."""
    identity: Identity | None = request.scope.get("identity")
    return f"{identity.role}:{identity.key_id}" if identity is not None else "unknown"


def _created(body: Any, status: int, location: str | None) -> Response:
    """An answer that, when it is 201, says where the created resource is (`Location`). The
    idempotency wrapper stores the header with the answer, so a replay carries it too."""
    headers = {"Location": location} if status == 201 and location is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


def _segment(value: str) -> str:
    """A name as one path segment (a "/" or a space in a trunk's name stays inside it)."""
    return quote(value, safe="+")


def _queued(session_id: str) -> dict[str, Any]:
    return {"session_id": session_id, "status": "queued"}


# Validation errors that answer with their own code rather than malformed_request.
TYPED_VALIDATION_CODES = frozenset({EVENTS_URL_UNSUPPORTED})


def _invalid(error: Exception) -> Response:
    if isinstance(error, ValidationError):
        problems = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()]
        # A refusal with a code of its own answers with it (an events URL no broker's).
        typed = [e["type"] for e in error.errors() if e["type"] in TYPED_VALIDATION_CODES]
        return error_response(422, typed[0] if typed else "malformed_request", "; ".join(problems))
    return error_response(422, getattr(error, "code", "malformed_request"), str(error))


async def _json_body(request: Request) -> Any:
    return _parse_json(await request.body())


def _parse_json(body: bytes) -> Any:
    """A request body as JSON that can be stored: not deeper than MAXIMUM_REQUEST_JSON_DEPTH,
    and without U+0000 or a lone surrogate (PostgreSQL refuses both)."""
    try:
        value = json.loads(body or b"null")
    except RecursionError:
        raise MalformedRequest(f"body is nested deeper than {MAXIMUM_REQUEST_JSON_DEPTH} levels") from None
    except ValueError as error:
        raise MalformedRequest(f"body is not JSON: {error}") from error
    if exceeds_depth(value, MAXIMUM_REQUEST_JSON_DEPTH):
        raise MalformedRequest(f"body is nested deeper than {MAXIMUM_REQUEST_JSON_DEPTH} levels")
    if holds_unstorable(value):
        raise MalformedRequest("body holds U+0000 or a lone surrogate, which cannot be stored")
    return value


async def _sdp_offer(request: Request) -> str:
    body = await request.body()
    if request.headers.get("content-type", "").startswith("application/sdp"):
        return ConnectRequest(sdp=body.decode(errors="replace")).sdp
    return ConnectRequest.model_validate(_parse_json(body)).sdp


__all__ = ["authenticated", "build_api", "error_body", "json_bodies", "storable_addresses"]
