"""The line: the verbs that steer a session's call (end it, speak, steer the agent, change its
prompt or tools, hold, ask for a person, collect digits, a supervisor's verbs, interrupt,
compact).

A verb decides nothing about the session: it is numbered into the session's log (through its
privacy boundary) and answered with what the worker that applies it, in the call's order,
replies; 202 if that takes longer than the wait (the verb is in the log and will be applied).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from gateway import tracing
from gateway.routes import requests
from gateway.routes.answers import Answer, Queued, queued, relayed
from gateway.routes.requests import Refused, identity_of, refuse_any_body, refusing
from gateway.routes.sessions import S, session_in_call, session_not_over
from gateway.routes.table import Handler, Operation
from gateway.web import error_response
from pipeline.api.requests import (
    BLOCK_NAME,
    AgentReply,
    AgentSay,
    AttentionSpec,
    CollectSpec,
    EndRequest,
    PromptText,
    SupervisorCommand,
    ToolsChange,
    TypedText,
)
from pipeline.api.roles import Role
from pipeline.call.errors import MalformedRequest
from pipeline.call.limits import API_REPLY_TIMEOUT_MS, COMPACTION_REPLY_TIMEOUT_MS, TYPED_MESSAGES_PER_MINUTE
from pipeline.call.messages import Playback
from pipeline.privacy.boundary import Redactor
from pipeline.privacy.policy import ALWAYS_REDACTED, Kind
from pipeline.session.redaction import redacted_input
from pipeline.session.wire import (
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
    host_event,
)

if TYPE_CHECKING:
    from gateway.ports import LinePort

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


class Compaction(Answer):
    """A compaction cycle's outcome (`compacted: false` with the guard's reason)."""

    session_id: str
    compacted: bool
    reason: str | None
    items_before: int | None = None
    items_deleted: int | None = None
    items_after: int | None = None
    summary_length: int | None = None


# ── the verbs ────────────────────────────────────────────────────────────────────────


async def end(api: LinePort, request: Request) -> Response:
    """End the call: answered by the worker that applies the end in the call's order (202
    if it ended the call, 409 if the call was over), or 202 `queued` if that takes longer
    than the reply timeout (the end is in the log and will be applied)."""
    session_id = request.path_params["session_id"]
    asked = await requests.body(request, EndRequest, optional=True)
    event = EndRequested(reason=asked.reason)
    return await in_order(
        api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id, reason=asked.reason)
    )


async def agent_say(api: LinePort, request: Request) -> Response:
    """The agent says these words now: 202 when its response is asked for, 409 when the
    call is not live or the agent is answering (answered by the worker, in the call's order)."""
    session_id = request.path_params["session_id"]
    words = await requests.body(request, AgentSay)
    event = AgentSayRequested(text=words.text)
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def agent_reply(api: LinePort, request: Request) -> Response:
    """The agent replies now, steered by these instructions: 202, or 409 as for agent/say."""
    session_id = request.path_params["session_id"]
    steer = await requests.body(request, AgentReply)
    event = AgentReplyRequested(instructions=steer.instructions)
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def set_prompt(api: LinePort, request: Request) -> Response:
    """Set one named block of the instructions (200 changed or unchanged; 422 past the bound)."""
    session_id, name = request.path_params["session_id"], request.path_params["name"]
    with refusing():
        if not BLOCK_NAME.fullmatch(name):
            raise MalformedRequest("a block's name is 1 to 64 letters, digits, '_' or '-'")
    block = await requests.body(request, PromptText)
    event = PromptSetRequested(name=name, text=block.text)
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def set_tools(api: LinePort, request: Request) -> Response:
    """Offer these registered tools from now on (422 for an unknown one, 409 while a tool runs)."""
    session_id = request.path_params["session_id"]
    change = await requests.body(request, ToolsChange)
    status, catalog = await api.rpc.call("resolve_tools", names=list(change.tools))
    if status != 200:
        return relayed(status, catalog)
    event = ToolsSetRequested.model_validate(catalog)
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def hold(api: LinePort, request: Request) -> Response:
    """Hold the line: the agent neither speaks nor hears until it is given back."""
    return await _hold(api, request, held=True)


async def unhold(api: LinePort, request: Request) -> Response:
    """Give the line back: the agent hears and speaks again."""
    return await _hold(api, request, held=False)


async def _hold(api: LinePort, request: Request, *, held: bool) -> Response:
    session_id = request.path_params["session_id"]
    refuse_any_body(await request.body(), "hold and unhold take no parameters")
    event = HoldRequested(held=held, playback=_playback(api, session_id))
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def attention(api: LinePort, request: Request) -> Response:
    """Hold the caller for a person for at most `wait_s` (202; 409 already_waiting)."""
    session_id = request.path_params["session_id"]
    wanted = await requests.body(request, AttentionSpec)
    event = AttentionRequested(
        reason=wanted.reason, wait_s=wanted.wait_s, playback=_playback(api, session_id)
    )
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def collect(api: LinePort, request: Request) -> Response:
    """Have the caller key digits in for a tool (202 `collecting`; 409 when the call cannot,
    422 when the tool cannot take them)."""
    session_id = request.path_params["session_id"]
    wanted = await requests.body(request, CollectSpec)
    event = CollectRequested(
        tool=wanted.tool,
        prompt=wanted.prompt,
        parameter=wanted.parameter,
        arguments=wanted.arguments,
        digits=wanted.digits,
        timeout_s=wanted.timeout_s,
        playback=_playback(api, session_id),
    )
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def supervise(api: LinePort, request: Request) -> Response:
    """A supervisor's verb: say, whisper, take_over, release, end or transfer."""
    session_id = request.path_params["session_id"]
    command = await requests.body(request, SupervisorCommand)
    with refusing():
        by = _supervisor(request, command)
    event = SupervisorRequested.model_validate(
        {"by": by, "verb": command.verb.model_dump(mode="json"), "playback": _playback(api, session_id)}
    )
    return await in_order(api, session_id, event, API_REPLY_TIMEOUT_MS, queued(session_id))


async def caller_text(api: LinePort, request: Request) -> Response:
    """Typed text into a live call, as the caller's message: answered like speech. Trimmed,
    non-empty, bounded, and at most TYPED_MESSAGES_PER_MINUTE a minute per session."""
    session_id = request.path_params["session_id"]
    typed = await requests.body(request, TypedText)
    record = await session_in_call(api, session_id)
    within = await asyncio.wrap_future(
        api.sink.counts.within_rate(session_id, "say", TYPED_MESSAGES_PER_MINUTE)
    )
    if not within:
        message = f"at most {TYPED_MESSAGES_PER_MINUTE} typed messages a minute per session"
        return error_response(429, "rate_limited", message, {"Retry-After": "60"})
    item_id = f"{TYPED_ITEM_PREFIX}{uuid.uuid4().hex[:16]}"
    # The worker answers: 202 once the text is in the conversation, or the provider's refusal.
    event = TextInjected(item_id=item_id, text=typed.text)
    return await _asked(
        api, session_id, record, event, API_REPLY_TIMEOUT_MS, queued(session_id, item_id=item_id)
    )


async def interrupt(api: LinePort, request: Request) -> Response:
    """Stop the response that is playing, as if the caller had talked over it."""
    session_id = request.path_params["session_id"]
    refuse_any_body(await request.body(), "interrupt takes no parameters")
    record = await session_in_call(api, session_id)
    interrupting = Queued(session_id=session_id, status="interrupting")
    event = InterruptRequested(playback=_playback(api, session_id))
    return await _asked(api, session_id, record, event, API_REPLY_TIMEOUT_MS, interrupting)


async def compact(api: LinePort, request: Request) -> Response:
    """Force a compaction: answered when its cycle ends (compacted or not, and why), or
    202 if it is still running when the wait is over (the session record then tells)."""
    session_id = request.path_params["session_id"]
    refuse_any_body(await request.body(), "compact takes no parameters")
    message = "the compaction is still running; its outcome will be in the session record"
    still_running = Queued(session_id=session_id, status="compacting", message=message)
    event = CompactionRequested(request_id="", gateway_id=api.gateway_id)
    return await in_order(api, session_id, event, COMPACTION_REPLY_TIMEOUT_MS, still_running)


# ── asking the worker, in the call's order ──────────────────────────────────────────


def _command(event: AnsweredInput) -> str:
    """The verb's name as the gateway counts it."""
    if isinstance(event, SupervisorRequested):
        return f"supervisor.{event.verb.type}"
    return event.type.removeprefix("switchboard.")


async def in_order(
    api: LinePort, session_id: str, event: AnsweredInput, timeout_ms: int, still_waiting: Queued
) -> Response:
    """Number a request into a session that is not over, and answer with what the worker that
    applies it (in the call's order) replies; 202 `still_waiting` if that takes longer than
    `timeout_ms` (the request is in the log and will be applied)."""
    generation = api.held.generation(session_id)
    if generation is not None:
        # The call is held here: its generation is known and this gateway numbers its
        # events, so the request goes straight into the log (an ended session answers
        # session_ended itself) without reading the record through a worker first.
        record: dict[str, Any] = {"generation": generation, "logged_seq": 0}
    else:
        try:
            record = await session_not_over(api, session_id)
        except Refused as refused:
            api.counters.count_command(_command(event), refused.answer.status_code)
            raise
    return await _asked(api, session_id, record, event, timeout_ms, still_waiting)


async def _asked(
    api: LinePort,
    session_id: str,
    record: dict[str, Any],
    event: AnsweredInput,
    timeout_ms: int,
    still_waiting: Queued,
) -> Response:
    """Number a request into the session's log and answer with what the worker that
    applies it replies; 202 `still_waiting` if that takes longer than `timeout_ms`."""
    command = _command(event)
    request_id = uuid.uuid4().hex
    reply = api.rpc.expect(request_id)
    # Whatever the request carries passes the session's privacy boundary before it is
    # numbered: the log, and all that reads it, keeps only what the boundary lets through.
    private = redacted_input(event, _redactor(api, session_id, record))
    asking = private.model_copy(update={"request_id": request_id, "gateway_id": api.gateway_id})
    with tracing.verb(session_id, command) as traceparent:
        _submit(api, session_id, record, asking, traceparent)
        answer = await api.rpc.wait(request_id, reply, timeout_ms)
    if answer is None:
        api.counters.count_command(command, 202)
        return still_waiting.sent(202)
    status, answered = answer
    api.counters.count_command(command, status)
    return relayed(status, answered)


def _redactor(api: LinePort, session_id: str, record: dict[str, Any]) -> Redactor:
    """The session's redaction: the boundary of its call when this gateway holds it, else
    the kinds its record names."""
    held = api.held.redactor(session_id)
    if held is not None:
        return held
    return Redactor(Kind(kind) for kind in record.get("privacy", {}).get("redact", ALWAYS_REDACTED))


def _submit(
    api: LinePort, session_id: str, record: dict[str, Any], event: HostInput, traceparent: str | None = None
) -> None:
    """Number an API request's event into the session's log, above the highest seq the
    record shows logged: a gateway that never numbered for this session (its call is held
    elsewhere) must not start at 1 after Redis lost the counter, or the event would be
    taken for a duplicate and ignored."""
    api.sink.submit_event(
        session_id,
        int(record["generation"]),
        host_event(event),
        time.time(),
        after_seq=int(record["logged_seq"]),
        traceparent=traceparent,
    )


def _playback(api: LinePort, session_id: str) -> Playback | None:
    """What the caller hears now, if this gateway holds the call (only it knows)."""
    playback = api.held.playback(session_id)
    return Playback.model_validate(playback) if playback else None


def _supervisor(request: Request, command: SupervisorCommand) -> dict[str, str]:
    """Who uses a supervisor's verb: a supervisor's key says who (its id and name; a `by` in the
    body is not trusted over it); the deployment's token or an admin key names them in `by`."""
    identity = identity_of(request)
    if identity is not None and identity.role is Role.SUPERVISOR:
        return {"id": identity.key_id, "name": identity.name}
    if command.by is None:
        raise MalformedRequest("by: who acts is required ({id, name}) unless a supervisor's key is used")
    by: dict[str, str] = command.by.model_dump(mode="json")
    return by


# ── the table ────────────────────────────────────────────────────────────────────────

# A verb's refusals besides the shared ones: an unknown session, one that is over.
_VERB_ERRORS: dict[int, tuple[str, ...]] = {
    404: ("session_not_found", "not_found"),
    409: ("session_ended", "not_supported_on_live"),
}
# A verb that needs the call in progress (`pipeline.session.refusals.not_in_call`).
_NEEDS_THE_CALL: dict[int, tuple[str, ...]] = {409: ("session_not_connected",)}
# And one that goes into the conversation (refused when the sideband was opened again meanwhile).
_INTO_THE_CONVERSATION: dict[int, tuple[str, ...]] = {409: ("call_reconnected",)}
_ASKED = {202: "asked for (or queued, if the worker takes longer than the wait)"}


def _verb(
    path: str,
    summary: str,
    handler: Handler,
    *errors: dict[int, tuple[str, ...]],
    method: str = "POST",
    success: dict[int, str] | None = None,
    **described: Any,
) -> Operation:
    """A verb's operation: its own refusals added to those every verb may answer."""
    merged = dict(_VERB_ERRORS)
    for more in errors:
        for status, codes in more.items():
            merged[status] = (*merged.get(status, ()), *codes)
    described.setdefault("answer", Queued)
    return Operation(
        method, f"{S}{path}", summary, "verbs", success or _ASKED, handler, errors=merged, **described
    )


ROUTES = (
    _verb("/end", "End the call", end, body=EndRequest, body_required=False),
    _verb(
        "/caller/text",
        "Typed text as the caller's message",
        caller_text,
        _INTO_THE_CONVERSATION,
        _NEEDS_THE_CALL,
        {429: ("rate_limited",)},
        body=TypedText,
    ),
    _verb(
        "/agent/say",
        "The agent says these words now",
        agent_say,
        _NEEDS_THE_CALL,
        {409: ("agent_busy",)},
        body=AgentSay,
    ),
    _verb(
        "/agent/reply",
        "The agent replies now, steered",
        agent_reply,
        _NEEDS_THE_CALL,
        {409: ("agent_busy",)},
        body=AgentReply,
    ),
    _verb(
        "/prompt/{name}",
        "Set one named block of the instructions",
        set_prompt,
        {422: ("prompt_too_long", "too_many_blocks")},
        method="PUT",
        success={200: "changed or unchanged", 202: "queued"},
        body=PromptText,
    ),
    _verb(
        "/tools",
        "Offer these registered tools from now on",
        set_tools,
        {409: ("tool_running",)},
        {422: ("unknown_tool",)},
        method="PUT",
        success={200: "changed", 202: "queued"},
        body=ToolsChange,
    ),
    _verb(
        "/hold",
        "Hold the line",
        hold,
        _NEEDS_THE_CALL,
        {409: ("collecting",)},
        success={200: "held", 202: "queued"},
        empty_body=True,
    ),
    _verb(
        "/unhold",
        "Give the line back",
        unhold,
        _NEEDS_THE_CALL,
        {409: ("collecting",)},
        success={200: "given back", 202: "queued"},
        empty_body=True,
    ),
    _verb(
        "/attention",
        "Hold the caller for a person",
        attention,
        _NEEDS_THE_CALL,
        {409: ("already_waiting", "already_held", "collecting")},
        body=AttentionSpec,
    ),
    _verb(
        "/collect",
        "Have the caller key digits in for a tool",
        collect,
        _NEEDS_THE_CALL,
        {409: ("no_keypad", "already_collecting", "line_held", "already_held")},
        {422: ("unknown_tool", "tool_cannot_collect", "digits_in_arguments")},
        body=CollectSpec,
    ),
    _verb(
        "/supervisor",
        "A supervisor's verb: say, whisper, take_over, release, end or transfer",
        supervise,
        _NEEDS_THE_CALL,
        {409: ("already_held", "nobody_holds", "not_a_phone_call", "already_transferring")},
        success={200: "taken over or released", 202: "said, whispered, ended or transferring"},
        body=SupervisorCommand,
    ),
    _verb(
        "/interrupt",
        "Stop the response that is playing",
        interrupt,
        _INTO_THE_CONVERSATION,
        _NEEDS_THE_CALL,
        empty_body=True,
    ),
    _verb(
        "/compact",
        "Force a compaction",
        compact,
        success={200: "the compaction's outcome", 202: "still running"},
        empty_body=True,
        answer={200: Compaction, 202: Queued},
    ),
)
