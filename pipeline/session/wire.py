"""What travels into a session's log and what it sends, naming no provider: the inputs every
call has (the host's own events and requests, `session.updated`, `error`, a key press), how a
sideband frame is decoded, the JSON safety every stored frame passes, and `session.update`, which
both providers take.

A Realtime input or control is its wing's (`pipeline/realtime/events.py`, `controls.py`; its
frames are sorted by `pipeline/realtime/frames.py`), a Live one its (`pipeline/live/events.py`,
`controls.py`, `frames.py`); the bases are `pipeline/call/messages.py`. `pipeline.dialects`
reads any logged input back (`parse_inbound`): the host's here, a provider's by its wing.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from pipeline.call.errors import MalformedFrame, OversizedFrame
from pipeline.call.keypad import DEFAULT_TIMEOUT_S, DigitsSpec, EndedBy
from pipeline.call.limits import MAXIMUM_FRAME_JSON_DEPTH, MAXIMUM_PROVIDER_FRAME_BYTES
from pipeline.call.messages import ControlModel, Inbound, Playback, optional_str
from pipeline.phone.sip import PhoneLine
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.session.state import (
    AgentRef,
    AppWebhook,
    EventStream,
    Greeting,
    LiveSetup,
    ModelChoice,
    OutboundCall,
    Person,
)

# What an incident quotes is cut at this depth, and the rest shown as a preview of this length.
MAXIMUM_STORED_CONTEXT_DEPTH = 16
MAXIMUM_NESTED_PREVIEW_CHARS = 200

# ── frames ───────────────────────────────────────────────────────────────────────────────


class FrameKind(StrEnum):
    """What the gateway does with a provider frame: DURABLE (queue it), STREAMED (fan it out
    to the people watching, never logged), IGNORED (a known event nothing depends on) or
    UNKNOWN (recorded durably, acted on never)."""

    DURABLE = "durable"
    STREAMED = "streamed"
    IGNORED = "ignored"
    UNKNOWN = "unknown"


# ── inputs both providers send ───────────────────────────────────────────────────────────


class SessionUpdated(Inbound):
    type: Literal["session.updated", "session.created"]
    event_id: str
    session: dict[str, Any]


class KeyPressed(Inbound):
    """A keypad press on a phone call (DTMF; SIP only)."""

    type: Literal["input_audio_buffer.dtmf_event_received"]
    event: str
    received_at: int


class ErrorDetail(Inbound):
    type: str
    message: str = ""
    code: str | None = None
    param: str | None = None
    event_id: str | None = None
    # Live names the command an error answers here (Realtime: `event_id`).
    client_event_id: str | None = None


class ProviderError(Inbound):
    type: Literal["error"]
    event_id: str
    error: ErrorDetail


# ── host events: what the gateway itself observes, numbered like provider events ─────────


class SidebandConnected(Inbound):
    type: Literal["switchboard.sideband_connected"] = "switchboard.sideband_connected"
    call_id: str


class SidebandClosed(Inbound):
    type: Literal["switchboard.sideband_closed"] = "switchboard.sideband_closed"
    code: int | None = None
    reason: str = ""
    # True when Switchboard closed it (end, failure); False when the provider or network did.
    by_host: bool = False
    # The provider answered the sideband's opening that it has no such call (HTTP 404): the
    # call is over there (a caller who hung up while the sideband was being re-opened).
    call_gone: bool = False


class EndRequested(Inbound):
    """The API asks to end the call. With a request id, the worker that applies it answers the
    waiting gateway: 202 when it ended the call, 409 when the call was over already (so of two
    concurrent ends, one is told it ended the call)."""

    type: Literal["switchboard.end_requested"] = "switchboard.end_requested"
    reason: str = "app_ended"
    request_id: str | None = None
    gateway_id: str | None = None


class SessionCreated(Inbound):
    """The first input of every session: what it was created with."""

    type: Literal["switchboard.session_created"] = "switchboard.session_created"
    instructions: str
    greeting: Greeting | None = None
    hangup_when: str | None = None
    phone: PhoneLine | None = None
    app_webhook: AppWebhook | None = None
    event_stream: EventStream | None = None
    tools: tuple[dict[str, Any], ...] = ()
    catalog_digest: str = ""
    tool_versions: dict[str, str] = Field(default_factory=dict)
    tool_side_effects: dict[str, str] = Field(default_factory=dict)
    tool_sensitive: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    limits: dict[str, Any] = Field(default_factory=dict)
    # The provider protocol the session speaks, and on Live what its delegations go to.
    provider: Literal["realtime", "live"] = "realtime"
    live: LiveSetup | None = None
    privacy: PrivacyPolicy = PrivacyPolicy()
    storage: Literal["full", "metadata"] = "full"
    # A call Switchboard places: whom it dials, and through which trunk.
    outbound: OutboundCall | None = None
    # The model and how it is used (absent in a creation logged before models were chosen per
    # session: the deployment's default).
    model: ModelChoice = ModelChoice()
    # The agent version the session was made from (None: an inline spec).
    agent: AgentRef | None = None


class AdmissionBegun(Inbound):
    type: Literal["switchboard.admission_begun"] = "switchboard.admission_begun"
    # The connect request that asked (None for a phone call's, which the door admits).
    request_id: str | None = None


class CallAttached(Inbound):
    type: Literal["switchboard.call_attached"] = "switchboard.call_attached"
    call_id: str
    # A phone call came through the SIP door; any other through WebRTC.
    medium: Literal["webrtc", "sip"] = "webrtc"


class AdmissionFailed(Inbound):
    type: Literal["switchboard.admission_failed"] = "switchboard.admission_failed"
    code: str
    detail: str = ""


class TimerFired(Inbound):
    type: Literal["switchboard.timer_fired"] = "switchboard.timer_fired"
    name: str


class ToolFinished(Inbound):
    """A tool body's outcome, back from the tool_runs queue (a ToolOutcome's fields)."""

    type: Literal["switchboard.tool_finished"] = "switchboard.tool_finished"
    call_id: str
    outcome: dict[str, Any]


class CompactionRequested(Inbound):
    """A compaction forced from the API; the answer goes back to the waiting gateway."""

    type: Literal["switchboard.compaction_requested"] = "switchboard.compaction_requested"
    request_id: str
    gateway_id: str


class CompactionUnsaved(Inbound):
    """The worker could not persist a compaction's summary: the cycle is abandoned."""

    type: Literal["switchboard.compaction_unsaved"] = "switchboard.compaction_unsaved"
    compaction: int
    reason: str = ""


# The conversation items Switchboard adds for typed text are named so: their echo on the
# sideband is the host's own words, recorded already (`is_typed_item` passes over them).
TYPED_ITEM_PREFIX = "item_typed_"


class TextInjected(Inbound):
    """Typed text from the API, spoken to the model as a user message (checked and bounded by
    the gateway; the item id is Switchboard's own)."""

    type: Literal["switchboard.text_injected"] = "switchboard.text_injected"
    item_id: str
    text: str
    # The API request waiting on the answer (None: an input replayed, which answers nobody).
    request_id: str | None = None
    gateway_id: str | None = None


class InterruptRequested(Inbound):
    """The API asks to stop the response that is playing, as a barge-in would."""

    type: Literal["switchboard.interrupt_requested"] = "switchboard.interrupt_requested"
    playback: Playback | None = None
    request_id: str | None = None
    gateway_id: str | None = None


class GatewayLost(Inbound):
    """The gateway holding the session's sideband died; `gateway_id` took the session over. Or,
    `handed_over`: the gateway is stopping and handed the call over while it was idle, its
    sideband open until the new one is."""

    type: Literal["switchboard.gateway_lost"] = "switchboard.gateway_lost"
    gateway_id: str
    handed_over: bool = False


class ArrivedLate(Inbound):
    """A numbered event that came after its seq was declared lost: recorded (its transcript
    lands), never acted on — the call has moved on."""

    type: Literal["switchboard.arrived_late"] = "switchboard.arrived_late"
    event: dict[str, Any]


class EventsDropped(Inbound):
    """Events the gateway received for the session and could not keep (Redis was unreachable
    and the session's outbox was full, or one could not be encoded): numbered where they would
    have been, so the log shows the hole. `types` counts them by type. Recorded, acts on nothing
    (a turn whose `response.done` was among them is settled by its response deadline)."""

    type: Literal["switchboard.events_dropped"] = "switchboard.events_dropped"
    count: int
    types: dict[str, int] = Field(default_factory=dict)
    reason: str = ""


class AgentSayRequested(Inbound):
    """The app asks the agent to say these words (a response asked to say exactly them, with no
    tool); the worker that applies it answers the waiting gateway."""

    type: Literal["switchboard.agent_say"] = "switchboard.agent_say"
    text: str
    request_id: str | None = None
    gateway_id: str | None = None


class AgentReplyRequested(Inbound):
    """The app asks the agent to reply now, steered by these instructions (added to the
    session's own for this response)."""

    type: Literal["switchboard.agent_reply"] = "switchboard.agent_reply"
    instructions: str
    request_id: str | None = None
    gateway_id: str | None = None


class PromptSetRequested(Inbound):
    """The app rewrites one named block of the session's instructions (or adds it, last)."""

    type: Literal["switchboard.prompt_set"] = "switchboard.prompt_set"
    name: str
    text: str
    request_id: str | None = None
    gateway_id: str | None = None


class ToolsSetRequested(Inbound):
    """The app changes the tools offered to the model, resolved against the registered tools
    before it was numbered (so the log says exactly what was offered)."""

    type: Literal["switchboard.tools_set"] = "switchboard.tools_set"
    tools: tuple[dict[str, Any], ...] = ()
    catalog_digest: str = ""
    tool_versions: dict[str, str] = Field(default_factory=dict)
    tool_side_effects: dict[str, str] = Field(default_factory=dict)
    request_id: str | None = None
    gateway_id: str | None = None


class HoldRequested(Inbound):
    """Hold the line (`held`) or give it back (`held` false)."""

    type: Literal["switchboard.hold"] = "switchboard.hold"
    held: bool
    # What was playing when it was asked (the gateway knows): a cut keeps only what was heard.
    playback: Playback | None = None
    request_id: str | None = None
    gateway_id: str | None = None


class AttentionRequested(Inbound):
    """A person is asked for: the caller is held for at most `wait_s`."""

    type: Literal["switchboard.attention"] = "switchboard.attention"
    reason: str
    wait_s: float
    # Who asked: the app (`POST …/attention`, the only way this input is logged), or the caller
    # (a key their route maps to a person). The call log and the console say which.
    by: Literal["app", "caller"] = "app"
    # What was playing when it was asked (the gateway knows): a cut keeps only what was heard.
    playback: Playback | None = None
    request_id: str | None = None
    gateway_id: str | None = None


# A supervisor's verbs, each declared once: what the log keeps of it. The API takes them
# stricter (pipeline.api.requests.SaySpec and the others: their bounds, no unknown field); read back,
# they are inputs like any other.


class SayVerb(Inbound):
    """`say`: the agent's voice says `text` to the caller."""

    type: Literal["say"]
    text: str


class WhisperVerb(Inbound):
    """`whisper`: `text` for the agent only, as steering; the caller hears nothing."""

    type: Literal["whisper"]
    text: str


class TakeOverVerb(Inbound):
    """`take_over`: a person holds the line; the agent neither speaks nor hears."""

    type: Literal["take_over"]


class ReleaseVerb(Inbound):
    """`release`: the person gives the line back to the agent."""

    type: Literal["release"]


class EndVerb(Inbound):
    """`end`: the call ends, for `reason`."""

    type: Literal["end"]
    reason: str = "ended_by_supervisor"


class TransferVerb(Inbound):
    """`transfer`: the phone call is sent on `to` (a tel: or sip: URI)."""

    type: Literal["transfer"]
    to: str


Verb = Annotated[
    SayVerb | WhisperVerb | TakeOverVerb | ReleaseVerb | EndVerb | TransferVerb, Field(discriminator="type")
]


class SupervisorRequested(Inbound):
    """A person at the contact centre acts on the call: one of the six verbs."""

    type: Literal["switchboard.supervisor"] = "switchboard.supervisor"
    by: Person
    verb: Verb
    # What was playing when it was asked (the gateway knows): a cut keeps only what was heard.
    playback: Playback | None = None
    request_id: str | None = None
    gateway_id: str | None = None


class CollectRequested(Inbound):
    """Have the caller key digits in for a tool (`POST /v1/sessions/{id}/collect`)."""

    type: Literal["switchboard.collect"] = "switchboard.collect"
    tool: str
    prompt: str
    parameter: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    digits: DigitsSpec = DigitsSpec()
    timeout_s: float = DEFAULT_TIMEOUT_S
    # What was playing when it was asked (the gateway knows): a cut keeps only what was heard.
    playback: Playback | None = None
    request_id: str | None = None
    gateway_id: str | None = None


class DigitsCollected(Inbound):
    """The caller finished keying a collection in: how many digits, sealed with the session's
    public key by the gateway's boundary (None when the session has no key), and what ended it."""

    type: Literal["switchboard.digits_collected"] = "switchboard.digits_collected"
    number: int
    count: int
    digits: str | None = None
    ended_by: EndedBy


class TransferFinished(Inbound):
    """The provider's answer to a transfer (`refer`): the caller went to `to`, or did not."""

    type: Literal["switchboard.transfer_finished"] = "switchboard.transfer_finished"
    to: str
    ok: bool
    error: str | None = None


class SeqLost(Inbound):
    """The marker logged in place of a seq that never came within the gap timeout: the events
    after it are applied; if it comes after all, it is recorded as arrived late."""

    type: Literal["switchboard.seq_lost"] = "switchboard.seq_lost"
    seq: int


class UnknownEvent(Inbound):
    """A provider event type Switchboard does not know: recorded in the log, never acted on."""

    type: str
    event_id: str | None = None


# What the gateway and the workers themselves say into a session's log.
HostInput = (
    SidebandConnected
    | SidebandClosed
    | EndRequested
    | SessionCreated
    | AdmissionBegun
    | CallAttached
    | AdmissionFailed
    | TimerFired
    | ToolFinished
    | CompactionRequested
    | CompactionUnsaved
    | TextInjected
    | InterruptRequested
    | GatewayLost
    | ArrivedLate
    | EventsDropped
    | SeqLost
    | AgentSayRequested
    | AgentReplyRequested
    | PromptSetRequested
    | ToolsSetRequested
    | HoldRequested
    | AttentionRequested
    | SupervisorRequested
    | TransferFinished
    | CollectRequested
    | DigitsCollected
)
# The type of any input of a session's log: a host input, one every provider sends, or a wing's
# own (`pipeline.dialects.parse_inbound` reads each back into its model).
InboundEvent = Inbound
_HOST_INPUT: TypeAdapter[Any] = TypeAdapter(Annotated[HostInput, Field(discriminator="type")])
HOST_TYPES = frozenset(str(model.model_fields["type"].default) for model in HostInput.__args__)
# What every provider's sideband says alike (read by `parse_common`).
_COMMON_INPUT: TypeAdapter[Any] = TypeAdapter(
    Annotated[SessionUpdated | ProviderError, Field(discriminator="type")]
)
COMMON_TYPES = frozenset({"session.created", "session.updated", "error"})


def host_event(event: HostInput) -> dict[str, Any]:
    """A host input as it travels and is logged (what `parse_inbound` reads back)."""
    return event.model_dump(mode="json", exclude_none=True)


def parse_host(raw: dict[str, Any]) -> InboundEvent:
    """A logged host input (its type one of `HOST_TYPES`) into its model."""
    return validated(_HOST_INPUT, raw)


def parse_common(raw: dict[str, Any]) -> InboundEvent:
    """A logged input every provider sends alike (its type one of `COMMON_TYPES`) into its model."""
    return validated(_COMMON_INPUT, raw)


def validated(adapter: TypeAdapter[Any], raw: dict[str, Any]) -> InboundEvent:
    """`raw` validated by a union of inputs; a known type of a bad shape is a `MalformedFrame`
    naming where it is wrong."""
    try:
        return adapter.validate_python(raw)  # type: ignore[no-any-return]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise MalformedFrame(f"{raw.get('type')}: {where}: {first['msg']}") from exc


def unknown(raw: dict[str, Any], event_type: str) -> UnknownEvent:
    """An input of a type no model reads: recorded, and acted on never."""
    return UnknownEvent(type=event_type, event_id=optional_str(raw.get("event_id")))


def decode_frame(frame: str | bytes) -> tuple[dict[str, Any], str]:
    """A sideband frame (either provider's) as a JSON object and its `type`; a frame that is
    too large, not JSON, not an object or without a string type raises a typed `BadInput`."""
    size = _frame_bytes(frame)
    if size > MAXIMUM_PROVIDER_FRAME_BYTES:
        raise OversizedFrame(f"frame of {size} bytes exceeds {MAXIMUM_PROVIDER_FRAME_BYTES} bytes")
    try:
        event = json.loads(frame)
    except RecursionError:
        raise MalformedFrame(f"frame is nested deeper than {MAXIMUM_FRAME_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedFrame(f"frame is not JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise MalformedFrame(f"frame is a JSON {type(event).__name__}, not an object")
    event_type = event.get("type")
    if not isinstance(event_type, str):
        raise MalformedFrame("frame has no string 'type'")
    return event, event_type


def frame_holds_unstorable(frame: str | bytes, event: Any) -> bool:
    """Whether a decoded frame holds a string PostgreSQL cannot store (`holds_unstorable`)."""
    # JSON can carry NUL or a lone surrogate only as an escape; this test is cheap and rarely
    # true, so only then are the decoded strings searched.
    text = frame.decode(errors="replace") if isinstance(frame, bytes) else frame
    if "\\u0000" not in text and not _SURROGATE_ESCAPE.search(text):
        return False
    return holds_unstorable(event)


def holds_unstorable(value: Any) -> bool:
    """Whether a decoded JSON value holds a string PostgreSQL cannot store: one with U+0000
    (text and jsonb refuse it) or a lone surrogate (not encodable as UTF-8). Walked without
    recursion, so no nesting depth can exhaust the stack."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item or _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def nests_too_deep(frame: str | bytes, event: Any, limit: int = MAXIMUM_FRAME_JSON_DEPTH) -> bool:
    """Whether a decoded frame nests objects and arrays more than `limit` levels deep."""
    # Counting brackets runs in C and bounds the depth from above: almost every frame has
    # fewer than the limit in all, so the walk is skipped on the hot path.
    if isinstance(frame, str):
        brackets = frame.count("{") + frame.count("[")
    else:
        brackets = frame.count(b"{") + frame.count(b"[")
    return brackets > limit and exceeds_depth(event, limit)


def storable(value: Any, depth: int = MAXIMUM_STORED_CONTEXT_DEPTH) -> Any:
    """A JSON value PostgreSQL can store: U+0000 written out as the six characters `\\u0000`,
    a lone surrogate as U+FFFD, and what nests deeper than `depth` as a bounded preview of its
    text. For values that quote bad input (an incident's summary and context)."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\\u0000")
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict | list) and depth <= 0:
        return storable(repr(value)[:MAXIMUM_NESTED_PREVIEW_CHARS], 1)
    if isinstance(value, dict):
        return {storable(str(key), 1): storable(item, depth - 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item, depth - 1) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return storable(str(value), 1)


def exceeds_depth(value: Any, limit: int) -> bool:
    """Whether a decoded JSON value nests objects and arrays more than `limit` levels deep
    (walked without recursion)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return False


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _frame_bytes(frame: str | bytes) -> int:
    # A text frame arrives as str; UTF-8 takes at most 4 bytes a character, so only a frame
    # within a factor of 4 of the limit pays for encoding.
    if isinstance(frame, bytes) or len(frame) <= MAXIMUM_PROVIDER_FRAME_BYTES // 4:
        return len(frame)
    return len(frame.encode())


# ── controls both providers take ─────────────────────────────────────────────────────────


class SessionUpdate(ControlModel):
    type: Literal["session.update"] = "session.update"
    session: dict[str, Any]


def control_wire(control: BaseModel) -> dict[str, Any]:
    """The control exactly as it goes onto the sideband."""
    return control.model_dump(mode="json", exclude_none=True)
