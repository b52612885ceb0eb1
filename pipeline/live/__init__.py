"""The Live API (GPT-Live) seam of the pure core: frames, durable transcripts, delegation tasks,
and the controls Switchboard sends (LIVE_PROTOCOL.md §1.3, §5.2, §5.3).

The rules, as this module states them:

- **Frames.** A Live sideband frame is DURABLE (numbered, queued, logged, deduplicated by its
  `event_id`), LIVE (fanned out, never queued: reflected audio and nested Responses deltas),
  IGNORED (known, nothing depends on it) or UNKNOWN (recorded, never acted on). The two
  transcript deltas are LIVE *and* transcript: each is fanned out at once and also buffered,
  because Live sends no final transcript — the words exist nowhere else.
- **Durable transcripts.** Buffered fragments become one durable `switchboard.live_transcript`
  event (the fragments themselves, with their event ids and timeline ranges) when the speaker
  changes, when the timeline jumps by `COALESCE_GAP_MS` or more, when the buffer spans too much
  of the timeline or holds too many fragments, when the oldest has waited `FLUSH_AFTER_MS` of
  wall time, just before a delegation is enqueued, and when the sideband closes.
- **Tasks.** A delegation carries no text. Its task is the caller's fragments that start after
  the previous delegation's offset and at or before its own `offset_ms`, in timeline order,
  each fragment once. The fragment that covers the offset (`end_ms > offset_ms`) may arrive
  just after the delegation: until it is known the task waits, at most `DELEGATION_SETTLE_MS`
  after the delegation arrived, and then goes ahead with what there is.
- **Controls** are typed models (`LiveAppend`, `InputAudio`, `SessionClose`) in the pipeline's
  `Control` union, so a transition's Live controls get their deterministic ids like Realtime's;
  `delegation_id` is always written (required and nullable on the wire), and appended content is
  bounded so the provider never refuses it. The `…_append` functions give their wire form.

Nothing here does I/O or reads a clock: wall time comes in as seconds (`now`), like an
envelope's `received_at`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from pipeline.call.dialect import too_long
from pipeline.call.tokens import estimated_tokens
from pipeline.errors import MalformedFrame
from pipeline.limits import MAXIMUM_FRAME_JSON_DEPTH
from pipeline.live.dialect import APPEND_TOKEN_BUDGET, LIVE
from pipeline.live.events import LIVE_TRANSCRIPT_TYPE, LiveTranscript
from pipeline.timeline import Speaker, TranscriptFragment
from pipeline.timers import DelegationSettle, timer_name
from pipeline.wire import FrameKind, control_wire, decode_frame, exceeds_depth, holds_unstorable

# ── limits ───────────────────────────────────────────────────────────────────────────────

# A pause in one speaker's words this long on the session timeline closes a durable piece of
# transcript: fragments arrive every ~200 ms while someone speaks, so this is a real pause.
COALESCE_GAP_MS = 1_000
# One durable piece never spans more of the timeline than this, so a caller who talks without
# pausing is still written down as they go.
MAXIMUM_COALESCED_SPAN_MS = 5_000
# ... nor holds more fragments than this (a fragment is about a word).
MAXIMUM_COALESCED_FRAGMENTS = 32
# Buffered words not written down after this much wall time are flushed by the gateway: what a
# gateway holds only in memory is lost when it dies, and a delegation's task may need them.
FLUSH_AFTER_MS = 1_000
# A delta delivered again after its piece was written down is recognised among this many of the
# socket's latest written fragments (about a minute of speech at five deltas a second): a
# re-send comes moments after the first, and the record must not hold its words twice.
REMEMBERED_WRITTEN_FRAGMENTS = 256
# How long a delegation's task waits for the fragment covering its offset (third parties wait
# about 400 ms; the covering fragment was recorded arriving 2 ms before its delegation).
DELEGATION_SETTLE_MS = 400

# ── frames ───────────────────────────────────────────────────────────────────────────────

CALLER_TRANSCRIPT_TYPE = "session.input_transcript.delta"
AGENT_TRANSCRIPT_TYPE = "session.output_transcript.delta"
TRANSCRIPT_TYPES = frozenset({CALLER_TRANSCRIPT_TYPE, AGENT_TRANSCRIPT_TYPE})

# Reflected audio: the caller's (before model-input muting) and the model's. Fan-out only.
AUDIO_TYPES = frozenset({"session.input_audio.append", "session.output_audio.delta"})

# Events a decision depends on (§5.2): numbered, queued, logged and applied under the row lock.
LIVE_DURABLE_TYPES = frozenset(
    {
        "session.started",
        "session.updated",
        "session.delegation.created",
        "session.instructions.appended",
        "session.thinking.appended",
        "session.commentary.appended",
        "session.input_audio.muted",
        "session.input_audio.unmuted",
        "session.output_audio.fixture.playing",
        "session.output_audio.fixture.played",
        "session.paused",
        "session.resumed",
        "session.usage.updated",
        "session.closed",
        "error",
        "info",
        "decision.event",
        "decision.item.created",
        "decision.item.deleted",
        "transport.dtmf.received",
        "transport.dtmf.sent",
        "transport.dtmf.send",
        "transport.ringing",
        "transport.answered",
        "transport.failed",
    }
)

RESPONSE_EVENT_TYPE = "response.event"
# In Responses delegation, the nested events that end a backend run or ask for a tool.
TERMINAL_RESPONSE_TYPES = frozenset({"response.completed", "response.failed", "response.incomplete"})


SPEAKER_OF_TYPE = {CALLER_TRANSCRIPT_TYPE: Speaker.CALLER, AGENT_TRANSCRIPT_TYPE: Speaker.AGENT}


@dataclass(frozen=True, slots=True)
class LiveFrame:
    """One Live sideband frame, decoded and sorted by what the gateway must do with it."""

    kind: FrameKind
    type: str
    event: dict[str, Any]

    @property
    def event_id(self) -> str | None:
        value = self.event.get("event_id")
        return value if isinstance(value, str) else None

    @property
    def is_transcript(self) -> bool:
        """A transcript delta: fanned out live, and buffered to be written down durably."""
        return self.type in TRANSCRIPT_TYPES


class _Inbound(BaseModel):
    # The provider adds fields over time; only what is read is checked.
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Durable(_Inbound):
    type: str
    event_id: str


class _Timed(_Durable):
    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> _Timed:
        if self.end_ms < self.start_ms:
            raise ValueError(f"end_ms {self.end_ms} is before start_ms {self.start_ms}")
        return self


class _TranscriptDelta(_Timed):
    delta: str


class _DelegationRef(_Inbound):
    id: str
    target: Literal["client", "responses", "decisions"]
    response_id: str | None = None


class _DelegationCreated(_Durable):
    offset_ms: int = Field(ge=0)
    delegation: _DelegationRef


class _Usage(_Inbound):
    seconds: float = Field(ge=0)


class _UsageUpdated(_Durable):
    usage: _Usage


class _Closed(_Durable):
    reason: str
    usage: _Usage


class _ErrorDetail(_Inbound):
    type: str
    code: str | None = None
    message: str = ""


class _Error(_Durable):
    error: _ErrorDetail


class _ResponseEvent(_Durable):
    event: dict[str, Any]


# What a durable event must hold to be acted on; any other durable type needs only its id.
_SHAPES: dict[str, type[_Durable]] = {
    "session.delegation.created": _DelegationCreated,
    "session.instructions.appended": _Timed,
    "session.thinking.appended": _Timed,
    "session.commentary.appended": _Timed,
    "session.usage.updated": _UsageUpdated,
    "session.closed": _Closed,
    "error": _Error,
    CALLER_TRANSCRIPT_TYPE: _TranscriptDelta,
    AGENT_TRANSCRIPT_TYPE: _TranscriptDelta,
    RESPONSE_EVENT_TYPE: _ResponseEvent,
}


def classify_live_frame(frame: str | bytes) -> LiveFrame:
    """Decode a Live sideband frame and classify it; a frame that is too large, not JSON, not
    an object, speaks for the host, or is a durable or transcript event of the wrong shape
    raises a typed `BadInput`."""
    event, event_type = decode_frame(frame)
    if event_type in AUDIO_TYPES:
        # The most frequent frames of a call: looked at once and passed on, never kept.
        key = "audio" if event_type == "session.input_audio.append" else "delta"
        if not isinstance(event.get(key), str):
            raise MalformedFrame(f"{event_type}: needs a string {key}")
        return LiveFrame(FrameKind.STREAMED, event_type, event)
    if event_type.startswith("switchboard."):
        # A provider must never be able to speak for the host.
        raise MalformedFrame(f"{event_type} is reserved for the gateway")
    if _may_nest_deeper(frame) and exceeds_depth(event, MAXIMUM_FRAME_JSON_DEPTH):
        raise MalformedFrame(f"frame is nested deeper than {MAXIMUM_FRAME_JSON_DEPTH} levels")
    if event_type in TRANSCRIPT_TYPES:
        _check_shape(event_type, event)
        if holds_unstorable(event):
            raise MalformedFrame(f"{event_type}: a string holds U+0000 or a lone surrogate")
        return LiveFrame(FrameKind.STREAMED, event_type, event)
    if event_type == RESPONSE_EVENT_TYPE:
        _check_shape(event_type, event)
        kind = _response_event_kind(event["event"])
    elif event_type in LIVE_DURABLE_TYPES:
        _check_shape(event_type, event)
        kind = FrameKind.DURABLE
    else:
        return LiveFrame(FrameKind.UNKNOWN, event_type, event)
    if kind is FrameKind.DURABLE and holds_unstorable(event):
        # Such an event could never be logged: PostgreSQL refuses it on every attempt.
        raise MalformedFrame(f"{event_type}: a string holds U+0000 or a lone surrogate")
    return LiveFrame(kind, event_type, event)


def _may_nest_deeper(frame: str | bytes) -> bool:
    # Counting brackets runs in C and bounds the depth from above: almost every frame has fewer
    # than the limit in all, so the walk is skipped on the hot path.
    if isinstance(frame, str):
        return frame.count("{") + frame.count("[") > MAXIMUM_FRAME_JSON_DEPTH
    return frame.count(b"{") + frame.count(b"[") > MAXIMUM_FRAME_JSON_DEPTH


def _check_shape(event_type: str, event: dict[str, Any]) -> None:
    try:
        _SHAPES.get(event_type, _Durable).model_validate(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "event"
        raise MalformedFrame(f"{event_type}: {where}: {first['msg']}") from exc


def _response_event_kind(nested: dict[str, Any]) -> FrameKind:
    # Responses delegation (§1.4): a finished function call needs an output, and a terminal
    # event ends the backend run; deltas are only shown; the rest are lifecycle snapshots.
    nested_type = nested.get("type")
    item = nested.get("item")
    if (
        nested_type == "response.output_item.done"
        and isinstance(item, dict)
        and item.get("type") == "function_call"
    ):
        return FrameKind.DURABLE
    if nested_type in TERMINAL_RESPONSE_TYPES:
        return FrameKind.DURABLE
    if isinstance(nested_type, str) and nested_type.endswith(".delta"):
        return FrameKind.STREAMED
    return FrameKind.IGNORED


# ── durable transcripts ─────────────────────────────────────────────────────────────────


def fragment_of(event: dict[str, Any]) -> TranscriptFragment:
    """The fragment a transcript delta carries (a frame `classify_live_frame` accepted)."""
    speaker = SPEAKER_OF_TYPE.get(str(event.get("type")))
    if speaker is None:
        raise MalformedFrame(f"{event.get('type')} is not a transcript delta")
    _check_shape(str(event["type"]), event)
    return TranscriptFragment(
        speaker=speaker,
        event_id=event["event_id"],
        start_ms=event["start_ms"],
        end_ms=event["end_ms"],
        text=event["delta"],
    )


@dataclass(frozen=True, slots=True)
class TranscriptBuffer:
    """The fragments of one speaker not yet written down, when the oldest arrived, and the ids
    of the latest fragments already written (so that one delivered again is not written twice)."""

    fragments: tuple[TranscriptFragment, ...] = ()
    oldest_at: float | None = None
    written_ids: tuple[str, ...] = ()

    @property
    def speaker(self) -> Speaker | None:
        return self.fragments[0].speaker if self.fragments else None

    @property
    def start_ms(self) -> int:
        return min(fragment.start_ms for fragment in self.fragments)

    @property
    def end_ms(self) -> int:
        return max(fragment.end_ms for fragment in self.fragments)

    def holds(self, event_id: str) -> bool:
        """Whether this delta is buffered, or was written down lately."""
        return event_id in self.written_ids or any(
            fragment.event_id == event_id for fragment in self.fragments
        )


@dataclass(frozen=True, slots=True)
class Coalesced:
    """What buffering or flushing left: the buffer, the durable events to enqueue, in order,
    and whether the fragment was one already buffered or written (then nothing changed)."""

    buffer: TranscriptBuffer
    written: tuple[dict[str, Any], ...] = ()
    repeated: bool = False


def live_transcript(fragments: Iterable[TranscriptFragment]) -> dict[str, Any]:
    """The durable transcript event of these fragments (one speaker), as it is enqueued."""
    pieces = tuple(fragments)
    if not pieces:
        raise ValueError("a durable transcript needs at least one fragment")
    speakers = {fragment.speaker for fragment in pieces}
    if len(speakers) != 1:
        raise ValueError(f"a durable transcript is of one speaker, got {sorted(speakers)}")
    event = LiveTranscript(
        speaker=pieces[0].speaker,
        text=spoken_text(pieces),
        start_ms=min(fragment.start_ms for fragment in pieces),
        end_ms=max(fragment.end_ms for fragment in pieces),
        fragments=pieces,
    )
    return event.model_dump(mode="json")


def read_live_transcript(event: dict[str, Any]) -> LiveTranscript:
    """A logged durable transcript event read back (a malformed one is a `MalformedFrame`)."""
    try:
        return LiveTranscript.model_validate(event)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "event"
        raise MalformedFrame(f"{LIVE_TRANSCRIPT_TYPE}: {where}: {first['msg']}") from exc


def flush_transcript(buffer: TranscriptBuffer) -> Coalesced:
    """Write down whatever is buffered (before a delegation is enqueued, on close, when due)."""
    if not buffer.fragments:
        return Coalesced(buffer)
    written_ids = (*buffer.written_ids, *(fragment.event_id for fragment in buffer.fragments))
    emptied = TranscriptBuffer(written_ids=written_ids[-REMEMBERED_WRITTEN_FRAGMENTS:])
    return Coalesced(emptied, (live_transcript(buffer.fragments),))


def buffer_fragment(
    buffer: TranscriptBuffer,
    fragment: TranscriptFragment,
    *,
    now: float,
    gap_ms: int = COALESCE_GAP_MS,
) -> Coalesced:
    """Add one fragment, writing down what it closes: the other speaker's words, the words
    before a pause of `gap_ms` or more, or a buffer that has grown to its bound with it."""
    if buffer.holds(fragment.event_id):
        return Coalesced(buffer, repeated=True)  # the same delta twice is one fragment, written once
    written: tuple[dict[str, Any], ...] = ()
    if buffer.fragments and (
        fragment.speaker != buffer.speaker or fragment.start_ms - buffer.end_ms >= gap_ms
    ):
        closed = flush_transcript(buffer)
        buffer, written = closed.buffer, closed.written
    grown = TranscriptBuffer(
        (*buffer.fragments, fragment), buffer.oldest_at if buffer.fragments else now, buffer.written_ids
    )
    if (
        len(grown.fragments) >= MAXIMUM_COALESCED_FRAGMENTS
        or grown.end_ms - grown.start_ms >= MAXIMUM_COALESCED_SPAN_MS
    ):
        full = flush_transcript(grown)
        return Coalesced(full.buffer, written + full.written)
    return Coalesced(grown, written)


def is_flush_due(buffer: TranscriptBuffer, *, now: float, after_ms: int = FLUSH_AFTER_MS) -> bool:
    """Whether the oldest buffered fragment has waited `after_ms` of wall time (seconds in)."""
    return buffer.oldest_at is not None and (now - buffer.oldest_at) * 1000 >= after_ms


def fragments_of(events: Iterable[dict[str, Any]]) -> tuple[TranscriptFragment, ...]:
    """Every fragment of the durable transcript events among these logged events, in log order."""
    fragments: list[TranscriptFragment] = []
    for event in events:
        if event.get("type") == LIVE_TRANSCRIPT_TYPE:
            fragments.extend(read_live_transcript(event).fragments)
    return tuple(fragments)


# ── delegation tasks ────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class DelegationTask:
    """What the caller asked for, as far as the transcript says: their words from just after
    `since_ms` up to the delegation's `offset_ms`, the fragments they came from, and whether
    the caller's transcript had passed the offset (else the last words may be missing)."""

    delegation_id: str
    offset_ms: int
    text: str
    fragment_ids: tuple[str, ...]
    is_covered: bool
    since_ms: int | None = None


def distinct_fragments(fragments: Iterable[TranscriptFragment]) -> tuple[TranscriptFragment, ...]:
    """Each fragment once, in timeline order: a delta delivered twice (by event id, or the same
    words at the same place under another id, as a gateway re-sending after a restart may) counts
    once, and fragments that arrived out of order are put back in order of where they start."""
    seen_ids: set[str] = set()
    seen_places: set[tuple[Speaker, int, int, str]] = set()
    kept: list[TranscriptFragment] = []
    for fragment in fragments:
        place = (fragment.speaker, fragment.start_ms, fragment.end_ms, fragment.text)
        if fragment.event_id in seen_ids or place in seen_places:
            continue
        seen_ids.add(fragment.event_id)
        seen_places.add(place)
        kept.append(fragment)
    # Stable: two fragments starting at the same point keep their arrival order.
    return tuple(sorted(kept, key=lambda fragment: (fragment.start_ms, fragment.end_ms)))


def is_offset_covered(fragments: Iterable[TranscriptFragment], offset_ms: int) -> bool:
    """Whether the caller's transcript has passed the offset: a caller fragment ends after it."""
    # Ranges are half-open, [start_ms, end_ms): the word at the offset is the one that starts
    # there (recorded: offset 4600, covering fragment 4600-4800 " result."), so a fragment
    # that ends exactly at the offset is the word before it and does not cover it.
    return any(fragment.speaker is Speaker.CALLER and fragment.end_ms > offset_ms for fragment in fragments)


def build_task(
    fragments: Iterable[TranscriptFragment],
    *,
    delegation_id: str,
    offset_ms: int,
    since_ms: int | None = None,
) -> DelegationTask:
    """The task of a client delegation: the caller's fragments that start after `since_ms` (the
    previous delegation's offset, whose own task took the words up to it; None for the whole
    call) and at or before `offset_ms`, each once, in timeline order."""
    ordered = distinct_fragments(fragments)
    words = [
        fragment
        for fragment in ordered
        if fragment.speaker is Speaker.CALLER
        and fragment.start_ms <= offset_ms
        and (since_ms is None or fragment.start_ms > since_ms)
    ]
    return DelegationTask(
        delegation_id=delegation_id,
        offset_ms=offset_ms,
        text=" ".join(spoken_text(words).split()),
        fragment_ids=tuple(fragment.event_id for fragment in words),
        is_covered=is_offset_covered(ordered, offset_ms),
        since_ms=since_ms,
    )


def spoken_text(fragments: Iterable[TranscriptFragment]) -> str:
    """The words of consecutive fragments as they were said. Deltas carry their own leading
    spaces (" result."), but the first word after a pause has none ("Could" after "Hi there."):
    where the timeline has a gap and neither side has a space, one is put in (a word split in
    two arrives without a gap, and stays whole)."""
    text = ""
    previous: TranscriptFragment | None = None
    for fragment in fragments:
        gap = previous is not None and fragment.start_ms > previous.end_ms
        if gap and text and not text[-1].isspace() and fragment.text and not fragment.text[0].isspace():
            text += " "
        text += fragment.text
        previous = fragment
    return text


class SettleVerdict(StrEnum):
    """Whether a delegation's task can be built now: COVERED (the covering fragment is known),
    EXPIRED (the settle window is over without it: go ahead with what there is), or WAIT."""

    COVERED = "covered"
    EXPIRED = "expired"
    WAIT = "wait"


@dataclass(frozen=True, slots=True)
class Settle:
    """A settle decision: the verdict, the window's wall-clock deadline (seconds), and how long
    from now a delayed message should fire to look again (0 once ready)."""

    verdict: SettleVerdict
    deadline: float
    wait_ms: int = 0

    @property
    def is_ready(self) -> bool:
        return self.verdict is not SettleVerdict.WAIT


def settle(
    fragments: Iterable[TranscriptFragment],
    *,
    offset_ms: int,
    delegated_at: float,
    now: float,
    settle_ms: int = DELEGATION_SETTLE_MS,
) -> Settle:
    """Decide whether a delegation that arrived at `delegated_at` (wall seconds) can have its
    task built at `now`, or must wait for the fragment covering its offset until the deadline."""
    deadline = delegated_at + settle_ms / 1000
    if is_offset_covered(fragments, offset_ms):
        return Settle(SettleVerdict.COVERED, deadline)
    if now >= deadline:
        return Settle(SettleVerdict.EXPIRED, deadline)
    # Rounded up (after the float noise of wall-clock seconds is rounded away): a timer that
    # fires a millisecond early would only find it still waiting.
    return Settle(SettleVerdict.WAIT, deadline, math.ceil(round((deadline - now) * 1000, 3)))


def settle_timer(delegation_id: str) -> str:
    """The name of the durable timer that ends a delegation's settle window."""
    return timer_name(DelegationSettle(delegation_id))


# ── controls: what Switchboard sends on a Live sideband ────────────────────────────────


def too_long_to_append(text: str) -> str | None:
    """Why text cannot be appended whole (the provider's 500-token bound, estimated), or None:
    what a person or an app asks the model to say or heed is refused rather than cut."""
    refused = too_long(LIVE, text)
    return None if refused is None else refused.message


# What marks cut content; outside the alphabetic scripts, it always counts exactly one token.
_ELLIPSIS = "…"


def bounded_content(text: str, *, limit: int = APPEND_TOKEN_BUDGET) -> str:
    """Appended content cut to `limit` estimated tokens at a word where one is near, marked
    with an ellipsis; blank content is a bug in the caller, never sent."""
    if not text.strip():
        raise ValueError("appended content must not be blank")
    if estimated_tokens(text) <= limit:
        return text
    # Every character counts at least a quarter of a token, so the cut lies within the first
    # 4 × limit characters however long the text is; the estimate is monotone in the prefix, so
    # the longest prefix that leaves room for the ellipsis is found by bisection.
    room = limit - estimated_tokens(_ELLIPSIS)
    short, long = 0, min(len(text), 4 * limit)
    while short < long:
        middle = (short + long + 1) // 2
        if estimated_tokens(text[:middle]) <= room:
            short = middle
        else:
            long = middle - 1
    cut = text[:short]
    space = cut.rfind(" ")
    if space >= len(cut) // 2:
        cut = cut[:space]
    return cut.rstrip() + _ELLIPSIS


class _LiveControl(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # The deterministic control id rides as event_id; the provider echoes it as
    # client_event_id on the acknowledgement or the error, so the gateway can settle it.
    event_id: str | None = None


class LiveAppend(_LiveControl):
    """`session.{commentary,thinking,instructions}.append`: content for the model, about one
    delegation or (None) in general. `delegation_id` is required and nullable on the wire, so
    it is written even when None (the other controls drop their empty fields)."""

    type: Literal["session.commentary.append", "session.thinking.append", "session.instructions.append"]
    delegation_id: str | None
    content: str = Field(min_length=1)

    @field_validator("content")
    @classmethod
    def _within_the_budget(cls, content: str) -> str:
        problem = too_long_to_append(content)
        if problem is not None:
            raise ValueError(problem)
        return content

    @model_serializer(mode="wrap")
    def _delegation_id_always(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        wire: dict[str, Any] = handler(self)
        wire.setdefault("delegation_id", self.delegation_id)
        return wire


class InputAudio(_LiveControl):
    """Mute the caller's audio to the model (a hold), or unmute it."""

    type: Literal["session.input_audio.mute", "session.input_audio.unmute"]


class SessionClose(_LiveControl):
    """End the session; the provider answers `session.closed` with the reason and final usage."""

    type: Literal["session.close"] = "session.close"


LiveControl = LiveAppend | InputAudio | SessionClose


def commentary(content: str, *, delegation_id: str | None) -> LiveAppend:
    """Context the model says to the caller, paraphrased: a delegation's result (or refusal,
    limit, timeout, failure), or with no delegation, general context such as a person's words."""
    return LiveAppend(
        type="session.commentary.append", delegation_id=delegation_id, content=bounded_content(content)
    )


def thinking(content: str, *, delegation_id: str | None) -> LiveAppend:
    """Silent progress or facts for the model; sent early, it stops the automatic acknowledgement."""
    return LiveAppend(
        type="session.thinking.append", delegation_id=delegation_id, content=bounded_content(content)
    )


def instructions(content: str, *, delegation_id: str | None = None) -> LiveAppend:
    """Developer instructions added to the running session (they survive compaction): policy,
    a whisper, a prompt change — Live's instructions cannot be replaced, only added to."""
    return LiveAppend(
        type="session.instructions.append", delegation_id=delegation_id, content=bounded_content(content)
    )


def _wire(control: LiveControl, event_id: str | None) -> dict[str, Any]:
    return control_wire(control.model_copy(update={"event_id": event_id}))


def commentary_append(
    content: str, *, delegation_id: str | None, event_id: str | None = None
) -> dict[str, Any]:
    """`commentary(...)` as it goes onto the sideband."""
    return _wire(commentary(content, delegation_id=delegation_id), event_id)


def thinking_append(
    content: str, *, delegation_id: str | None, event_id: str | None = None
) -> dict[str, Any]:
    """`thinking(...)` as it goes onto the sideband."""
    return _wire(thinking(content, delegation_id=delegation_id), event_id)


def instructions_append(
    content: str, *, delegation_id: str | None = None, event_id: str | None = None
) -> dict[str, Any]:
    """`instructions(...)` as it goes onto the sideband."""
    return _wire(instructions(content, delegation_id=delegation_id), event_id)


def input_audio_mute(*, event_id: str | None = None) -> dict[str, Any]:
    """The model stops hearing the caller (a hold); the caller still hears the model."""
    return _wire(InputAudio(type="session.input_audio.mute"), event_id)


def input_audio_unmute(*, event_id: str | None = None) -> dict[str, Any]:
    """The model hears the caller again."""
    return _wire(InputAudio(type="session.input_audio.unmute"), event_id)


def session_close(*, event_id: str | None = None) -> dict[str, Any]:
    """End the session; the provider answers `session.closed` with the reason and final usage."""
    return _wire(SessionClose(), event_id)
