"""The Live API's durable inputs as the workers read them from the log (LIVE_PROTOCOL.md §3.1),
and the host's own durable transcript event.

Two Live types are every provider's, `session.updated` and `error`: `pipeline.session.wire` reads them
(`SessionUpdated`, `ProviderError`). Every other type here is Live's own (`parse_live`); which
provider an input belongs to is decided by the session (`pipeline.transitions.apply`), not by the
parser. Like every inbound model these ignore fields they do not use.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from pipeline.session.timeline import Speaker, TranscriptFragment
from pipeline.session.wire import InboundEvent, validated

LIVE_TRANSCRIPT_TYPE = "switchboard.live_transcript"


class _Inbound(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class LiveTranscript(BaseModel):
    """The durable transcript event the gateway writes from timeline-stamped deltas:
    consecutive fragments of one speaker, in arrival order (Live sends no final transcript)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["switchboard.live_transcript"] = "switchboard.live_transcript"
    speaker: Speaker
    text: str
    start_ms: int
    end_ms: int
    fragments: tuple[TranscriptFragment, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_speaker(self) -> LiveTranscript:
        if any(fragment.speaker is not self.speaker for fragment in self.fragments):
            raise ValueError(f"a durable transcript is of one speaker ({self.speaker})")
        return self

    @property
    def item_id(self) -> str:
        """The id the transcript is stored under: its first fragment's provider event id."""
        return self.fragments[0].event_id


class DelegationRef(_Inbound):
    id: str
    target: Literal["client", "responses", "decisions"]
    response_id: str | None = None


class Delegated(_Inbound):
    """The model handed a task to the backend at `offset_ms` on the timeline (§1.3): metadata
    only, never the task's text."""

    type: Literal["session.delegation.created"]
    event_id: str
    offset_ms: int = Field(ge=0)
    delegation: DelegationRef


class Appended(_Inbound):
    """An append was accepted into the timeline (not: spoken, or heard)."""

    type: Literal["session.instructions.appended", "session.thinking.appended", "session.commentary.appended"]
    event_id: str
    client_event_id: str | None = None
    start_ms: int = 0
    end_ms: int = 0


class InputMuted(_Inbound):
    """The model hears silence (`muted`) or the caller again (`unmuted`)."""

    type: Literal["session.input_audio.muted", "session.input_audio.unmuted"]
    event_id: str
    client_event_id: str | None = None


class LiveUsage(_Inbound):
    """Cumulative usage in seconds ("do not sum values across usage events")."""

    seconds: float = Field(ge=0)
    active_seconds: float | None = Field(default=None, ge=0)
    paused_seconds: float | None = Field(default=None, ge=0)


class ContextWindow(_Inbound):
    usage_ratio: float = Field(default=0.0, ge=0)


class UsageUpdated(_Inbound):
    type: Literal["session.usage.updated"]
    event_id: str
    usage: LiveUsage
    context_window: ContextWindow | None = None


class LiveClosed(_Inbound):
    """The session is over, with the reason and the final usage (§2.4)."""

    type: Literal["session.closed"]
    event_id: str
    reason: str
    usage: LiveUsage
    client_event_id: str | None = None


class KeyReceived(_Inbound):
    """A keypad press on a Live phone call (DTMF)."""

    type: Literal["transport.dtmf.received"]
    event_id: str
    event: str


class DecisionAnswer(_Inbound):
    """One answer of a Decisions evaluation; a predicate's is its probability of "yes"."""

    type: str
    name: str | None = None
    probability: float | None = None


class DecisionOutcome(_Inbound):
    answers: tuple[DecisionAnswer, ...] = ()


class DecisionCompleted(_Inbound):
    type: Literal["decision.completed"]
    decision: DecisionOutcome


class Decided(_Inbound):
    """A Decisions evaluation the session's trigger asked for on a transcript delta (§1.4): its
    answers, by question name."""

    type: Literal["decision.event"]
    event_id: str
    trigger_id: str | None = None
    event: DecisionCompleted

    def probability(self, name: str) -> float | None:
        """The probability of "yes" the predicate question `name` was answered with, if it was."""
        for answer in self.event.decision.answers:
            if answer.type == "predicate" and answer.name == name:
                return answer.probability
        return None


class TransportProgress(_Inbound):
    """An outbound call rings at the callee's end, or was answered (§2.2): by a person or a
    machine, which the provider does not say."""

    type: Literal["transport.ringing", "transport.answered"]
    event_id: str
    session_id: str | None = None


class CallError(_Inbound):
    type: str = "call_error"
    code: str = ""
    message: str = ""


class TransportFailed(_Inbound):
    """An outbound call did not connect: busy, unanswered, refused by the trunk (the code list
    is unpublished, so the code is kept as it came)."""

    type: Literal["transport.failed"]
    event_id: str
    session_id: str | None = None
    error: CallError


class BackendCallItem(_Inbound):
    type: Literal["function_call"]
    call_id: str
    name: str


class BackendCallDone(_Inbound):
    type: Literal["response.output_item.done"]
    item: BackendCallItem


class BackendCalled(_Inbound):
    """A Responses delegation's backend run finished a function call (nested in
    `response.event`): the run waits for the host's `function_call_output` and `response.create`
    (LIVE_PROTOCOL.md §1.4; a captured session shows it waiting)."""

    type: Literal["response.event"]
    event_id: str
    delegation_id: str
    event: BackendCallDone


# What the provider says on a Live sideband that the workers read (the transcript event is the
# gateway's, written down from the provider's fragments).
LiveInbound = (
    Delegated
    | Appended
    | InputMuted
    | UsageUpdated
    | LiveClosed
    | KeyReceived
    | TransportProgress
    | TransportFailed
    | Decided
    | BackendCalled
)

# The provider types these models read (the transcript event is the host's own).
LIVE_PARSED_TYPES = frozenset(
    {
        "session.delegation.created",
        "session.instructions.appended",
        "session.thinking.appended",
        "session.commentary.appended",
        "session.input_audio.muted",
        "session.input_audio.unmuted",
        "session.usage.updated",
        "session.closed",
        "transport.dtmf.received",
        "transport.ringing",
        "transport.answered",
        "transport.failed",
        "decision.event",
    }
)

_LIVE_INPUT: TypeAdapter[Any] = TypeAdapter(
    Annotated[LiveInbound | LiveTranscript, Field(discriminator="type")]
)


def parse_live(raw: dict[str, Any]) -> InboundEvent | None:
    """A logged Live input into its model, or None when its type is not one the workers read;
    one of the wrong shape raises `MalformedFrame`."""
    event_type = raw.get("type")
    if event_type == "response.event":
        # Of a backend run's nested events only a finished function call asks the host for
        # anything; its end (`response.completed`, …) is logged and read by no rule.
        return validated(_LIVE_INPUT, raw) if is_backend_call(raw) else None
    if event_type not in LIVE_PARSED_TYPES and event_type != LIVE_TRANSCRIPT_TYPE:
        return None
    return validated(_LIVE_INPUT, raw)


def is_backend_call(raw: dict[str, Any]) -> bool:
    """A `response.event` carrying a Responses backend's finished function call."""
    nested = raw.get("event")
    item = nested.get("item") if isinstance(nested, dict) else None
    return (
        isinstance(nested, dict)
        and nested.get("type") == "response.output_item.done"
        and isinstance(item, dict)
        and item.get("type") == "function_call"
    )
