"""A Live sideband's frames sorted (LIVE_PROTOCOL.md §5.2), and the caller's and the agent's
transcript deltas buffered into durable `switchboard.live_transcript` events (see the package's
docstring for the rules)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from pipeline.call.errors import MalformedFrame
from pipeline.call.limits import MAXIMUM_FRAME_JSON_DEPTH
from pipeline.call.sideband import OpenTail
from pipeline.live.events import LIVE_TRANSCRIPT_TYPE, LiveTranscript
from pipeline.session.state import SpokenLine
from pipeline.session.timeline import Speaker, TranscriptFragment
from pipeline.session.wire import FrameKind, decode_frame, holds_unstorable, nests_too_deep

# ── limits ───────────────────────────────────────────────────────────────────────────────

# A pause in one speaker's words this long on the session timeline closes a durable piece of
# transcript: fragments arrive every ~200 ms while someone speaks, so this is a real pause.
COALESCE_GAP_MS = 1_000
# One durable piece never spans more of the timeline than this, so a caller who talks without
# pausing is still written down as they go.
MAXIMUM_COALESCED_SPAN_MS = 5_000
# ... nor holds more fragments than this (a fragment is about a word).
MAXIMUM_COALESCED_FRAGMENTS = 32
# While the privacy boundary keeps back the open tails of write-downs (`keep_open_tail`), the
# write-downs by time end pieces where no value is cut, and a piece outgrows the bounds above only
# while all its words could be one value still being said (a card number read slowly, digit by
# digit, takes ten seconds or so). At these it is written down as it stands.
MAXIMUM_OPEN_SPAN_MS = 20_000
MAXIMUM_OPEN_FRAGMENTS = 128
# Buffered words not written down after this much wall time are flushed by the gateway: what a
# gateway holds only in memory is lost when it dies, and a delegation's task may need them.
FLUSH_AFTER_MS = 1_000
# The end of such a write-down that could be the start of a value said on (`keep_open_tail`) is
# kept for the next piece, until its speaker has said nothing for this long: a pause the timeline
# reads as the end of a line (`COALESCE_GAP_MS`), with a second's allowance for a delta the
# provider sends late. Then it is written down whole.
TAIL_PAUSE_MS = COALESCE_GAP_MS + 1_000
# A delta delivered again after its piece was written down is recognised among this many of the
# socket's latest written fragments (about a minute of speech at five deltas a second): a
# re-send comes moments after the first, and the record must not hold its words twice.
REMEMBERED_WRITTEN_FRAGMENTS = 256
# A speaker's line of the transcript goes on over the pieces it was written down in for at most
# this stretch of the call (a monologue still reads as paragraphs, and no line grows without end).
MAXIMUM_LINE_SPAN_MS = 60_000
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
    if nests_too_deep(frame, event):
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
    """The fragments of one speaker not yet written down, when the oldest arrived (None while
    only words kept back from a write-down wait: for more words, or for their speaker to pause),
    the ids of the latest fragments already written (so that one delivered again is not written
    twice), and when the newest arrived."""

    fragments: tuple[TranscriptFragment, ...] = ()
    oldest_at: float | None = None
    written_ids: tuple[str, ...] = ()
    newest_at: float | None = None
    # The fragments' range on the timeline and their ids, kept as fragments are added rather
    # than counted again: a buffer is looked at for every fragment, and holds more of them while
    # a value's words are kept back.
    start_ms: int = 0
    end_ms: int = 0
    buffered_ids: tuple[str, ...] = ()

    @classmethod
    def holding(
        cls,
        fragments: tuple[TranscriptFragment, ...],
        oldest_at: float | None,
        written_ids: tuple[str, ...],
        newest_at: float | None,
    ) -> TranscriptBuffer:
        """A buffer of these fragments, its range and ids counted once."""
        return cls(
            fragments,
            oldest_at,
            written_ids,
            newest_at,
            min((fragment.start_ms for fragment in fragments), default=0),
            max((fragment.end_ms for fragment in fragments), default=0),
            tuple(fragment.event_id for fragment in fragments),
        )

    def with_fragment(self, fragment: TranscriptFragment, *, now: float) -> TranscriptBuffer:
        """This buffer with `fragment` added at `now` (the oldest's time, when it is the first)."""
        first = not self.fragments
        return TranscriptBuffer(
            (*self.fragments, fragment),
            self.oldest_at if self.oldest_at is not None else now,
            self.written_ids,
            now,
            fragment.start_ms if first else min(self.start_ms, fragment.start_ms),
            fragment.end_ms if first else max(self.end_ms, fragment.end_ms),
            (*self.buffered_ids, fragment.event_id),
        )

    @property
    def speaker(self) -> Speaker | None:
        return self.fragments[0].speaker if self.fragments else None

    def holds(self, event_id: str) -> bool:
        """Whether this delta is buffered, or was written down lately."""
        return event_id in self.written_ids or event_id in self.buffered_ids


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


def keep_open_tail(buffer: TranscriptBuffer, open_tail: OpenTail, *, now: float) -> Coalesced:
    """Write down the buffered words up to where their end could be the start of a value said on
    (`open_tail`), and keep the rest for the next piece: the write-down of a speaker who is still
    speaking. The next is due a second after the next words arrive, as if the rest were not
    there (a piece a second, as before), or once the speaker pauses. A piece ends between words:
    a fragment the open end begins in, and the fragments of a word split over several, are kept
    whole."""
    if not buffer.fragments:
        return Coalesced(buffer)
    text, ends = _spoken(buffer.fragments)
    count = bisect_right(ends, open_tail(text))
    while 0 < count < len(buffer.fragments) and not _between_words(text, ends[count - 1]):
        count -= 1
    if count == len(buffer.fragments):
        return flush_transcript(buffer)
    kept = buffer.fragments[count:]
    written_ids = (*buffer.written_ids, *(fragment.event_id for fragment in buffer.fragments[:count]))
    rest = TranscriptBuffer.holding(kept, None, written_ids[-REMEMBERED_WRITTEN_FRAGMENTS:], buffer.newest_at)
    written = (live_transcript(buffer.fragments[:count]),) if count else ()
    return Coalesced(rest, written)


def _between_words(text: str, position: int) -> bool:
    """Whether `position` of `text` is between two words ("fo" | "ur" is not), or at an end."""
    if position <= 0 or position >= len(text):
        return True
    return text[position - 1].isspace() or text[position].isspace()


def is_speaking(buffer: TranscriptBuffer, *, now: float) -> bool:
    """Whether the buffer's speaker said something within `TAIL_PAUSE_MS` of `now` (seconds in)."""
    return buffer.newest_at is not None and (now - buffer.newest_at) * 1000 < TAIL_PAUSE_MS


def buffer_fragment(
    buffer: TranscriptBuffer,
    fragment: TranscriptFragment,
    *,
    now: float,
    gap_ms: int = COALESCE_GAP_MS,
    open_tail: OpenTail | None = None,
) -> Coalesced:
    """Add one fragment, writing down what it closes: the other speaker's words, the words
    before a pause of `gap_ms` or more, or a buffer that has grown to its bound with it (the
    open bound, and up to its open tail if anything comes before it, when `open_tail` is given)."""
    if buffer.holds(fragment.event_id):
        return Coalesced(buffer, repeated=True)  # the same delta twice is one fragment, written once
    written: tuple[dict[str, Any], ...] = ()
    if buffer.fragments and (
        fragment.speaker != buffer.speaker or fragment.start_ms - buffer.end_ms >= gap_ms
    ):
        closed = flush_transcript(buffer)
        buffer, written = closed.buffer, closed.written
    grown = buffer.with_fragment(fragment, now=now)
    most_fragments, longest_ms = (
        (MAXIMUM_COALESCED_FRAGMENTS, MAXIMUM_COALESCED_SPAN_MS)
        if open_tail is None
        else (MAXIMUM_OPEN_FRAGMENTS, MAXIMUM_OPEN_SPAN_MS)
    )
    if len(grown.fragments) >= most_fragments or grown.end_ms - grown.start_ms >= longest_ms:
        cut = keep_open_tail(grown, open_tail, now=now) if open_tail is not None else None
        full = cut if cut is not None and cut.written else flush_transcript(grown)
        return Coalesced(full.buffer, written + full.written)
    return Coalesced(grown, written)


def line_of(
    own: SpokenLine | None, other: SpokenLine | None, item_id: str, start_ms: int, end_ms: int
) -> tuple[SpokenLine, bool]:
    """The line a written-down piece (`item_id`, from `start_ms` to `end_ms`) belongs to, given
    its speaker's latest line and the other speaker's, and whether that is its speaker's latest
    line going on.

    The gateway writes a speaker's words down in pieces: by time (what it holds only in memory
    is lost if it dies), before a delegation, at a bound. Read one piece a line, a call whose
    speakers talk over each other reads as alternating scraps of both. So a piece goes on its
    speaker's latest line when it follows it without a pause (`COALESCE_GAP_MS`), the line is not
    yet `MAXIMUM_LINE_SPAN_MS` long, and the other speaker has not taken a turn since: their
    latest line did not begin after this one's last words (beginning before, or as they end, is
    talking over them). The workers store the pieces by this rule, and the gateway shows the
    watchers the same lines, each piece in the order it was written down."""
    if own is not None and goes_on(own, other, start_ms, end_ms):
        return own.model_copy(update={"end_ms": max(own.end_ms, end_ms)}), True
    return SpokenLine(item_id=item_id, start_ms=start_ms, end_ms=end_ms), False


def goes_on(own: SpokenLine, other: SpokenLine | None, start_ms: int, end_ms: int) -> bool:
    """Whether words from `start_ms` to `end_ms` go on their speaker's line `own` (`line_of`)."""
    return (
        start_ms - own.end_ms < COALESCE_GAP_MS
        and end_ms - own.start_ms <= MAXIMUM_LINE_SPAN_MS
        and (other is None or other.start_ms <= own.end_ms)
    )


def is_flush_due(buffer: TranscriptBuffer, *, now: float, after_ms: int = FLUSH_AFTER_MS) -> bool:
    """Whether the oldest buffered fragment has waited `after_ms` of wall time (seconds in), or
    words kept back from a write-down have their speaker paused."""
    if buffer.oldest_at is None:
        return bool(buffer.fragments) and not is_speaking(buffer, now=now)
    return (now - buffer.oldest_at) * 1000 >= after_ms


def fragments_of(events: Iterable[dict[str, Any]]) -> tuple[TranscriptFragment, ...]:
    """Every fragment of the durable transcript events among these logged events, in log order."""
    fragments: list[TranscriptFragment] = []
    for event in events:
        if event.get("type") == LIVE_TRANSCRIPT_TYPE:
            fragments.extend(read_live_transcript(event).fragments)
    return tuple(fragments)


def spoken_text(fragments: Iterable[TranscriptFragment]) -> str:
    """The words of consecutive fragments as they were said. Deltas carry their own leading
    spaces (" result."), but the first word after a pause has none ("Could" after "Hi there."):
    where the timeline has a gap and neither side has a space, one is put in (a word split in
    two arrives without a gap, and stays whole)."""
    return _spoken(fragments)[0]


def _spoken(fragments: Iterable[TranscriptFragment]) -> tuple[str, list[int]]:
    """`spoken_text`, and where each fragment's words end in it."""
    text = ""
    ends: list[int] = []
    previous: TranscriptFragment | None = None
    for fragment in fragments:
        gap = previous is not None and fragment.start_ms > previous.end_ms
        if gap and text and not text[-1].isspace() and fragment.text and not fragment.text[0].isspace():
            text += " "
        text += fragment.text
        ends.append(len(text))
        previous = fragment
    return text, ends
