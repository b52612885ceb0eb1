"""Which wing a session's provider is: the one place in the pipeline that maps a provider to
what it can do and how it does it. The neutral rules ask `capabilities_of` what a provider can
do and `dialect_of` to do it; they never ask which provider they serve. A third provider is a
third wing and one more line in each table here."""

from __future__ import annotations

from typing import Any, Protocol

from pipeline.call.capabilities import Capabilities, Refusal
from pipeline.call.errors import MalformedFrame
from pipeline.call.messages import Playback
from pipeline.call.progress import CallProgress
from pipeline.call.story import StoryMark
from pipeline.live import dialect as live
from pipeline.realtime import dialect as realtime
from pipeline.session.state import LiveCall, Provider, SessionState
from pipeline.session.step import Control, LogEntry, Step
from pipeline.session.timers import Timer
from pipeline.session.wire import (
    COMMON_TYPES,
    HOST_TYPES,
    InboundEvent,
    KeyPressed,
    ProviderError,
    SessionCreated,
    parse_common,
    parse_host,
    unknown,
)


class Dialect(Protocol):
    """How a provider does what every call does. Each operation returns what only its wing
    knows; the neutral rule around it keeps the state, the call log and the answer."""

    capabilities: Capabilities
    incoming_call: str
    """The provider webhook's event that announces a phone call."""
    own_events: tuple[type, ...]
    """The inputs only this provider's sideband says: on another provider's session they are
    logged and act on nothing."""

    def wing_state(self, event: SessionCreated) -> LiveCall | None:
        """What the provider's calls add to a new session's state."""
        ...

    def configuration(self, state: SessionState) -> dict[str, Any]:
        """What a call is accepted (a phone call) or created with."""
        ...

    def sideband_configuration(self, state: SessionState) -> dict[str, Any]:
        """The `session.update` the sideband sends once it is up."""
        ...

    def creation_configuration(self, state: SessionState) -> dict[str, Any] | None:
        """What the gateway creates a WebRTC call with, or None when the sideband configures it."""
        ...

    def listen(self, listening: SessionState) -> Step:
        """The configured call listens: it greets the caller (once, never on a closed line), or
        starts what was asked for while it was configured."""
        ...

    def reconnected(self, state: SessionState) -> Step:
        """The sideband of a call in progress is back: what the gap may have swallowed is made good."""
        ...

    def closing(self, state: SessionState) -> tuple[Control, ...]:
        """What an ending call is told on its sideband before it is hung up."""
        ...

    def say(self, state: SessionState, text: str) -> Step:
        """The agent says the app's words now (the line is free and the agent listens)."""
        ...

    def steer(self, state: SessionState, steer: str) -> Step:
        """The agent replies now, steered by the app's instructions."""
        ...

    def person_says(
        self, state: SessionState, text: str, said: LogEntry, request_id: str | None, gateway_id: str | None
    ) -> Step:
        """A person's words, spoken in the agent's voice, with `said` logged; the request answered."""
        ...

    def note(self, state: SessionState, note: str) -> Step:
        """A note the model heeds (the caller does not hear it), answered unless the line is closed."""
        ...

    def instructions_changed(
        self, state: SessionState, name: str, text: str, instructions_now: str
    ) -> tuple[Control, ...] | Refusal:
        """What tells the model of its changed instructions (block `name` is now `text`)."""
        ...

    def tools_changed(self, state: SessionState) -> tuple[Control, ...]:
        """What tells the model of the tools it is offered now (a provider without the `tools`
        ability is refused before it gets here)."""
        ...

    def silence(self, state: SessionState, playback: Playback | None) -> Step:
        """The model stops: what it says is cut where it can be, and nothing is owed to anyone."""
        ...

    def mute(self, held: SessionState) -> Step:
        """The model hears nothing of the caller (the line is held)."""
        ...

    def unmute(self, free: SessionState) -> Step:
        """The model hears the caller again."""
        ...

    def line_freed(self, free: SessionState) -> Step:
        """What waited for the line goes out, once its giving back is logged."""
        ...

    def transfer_failed(self, state: SessionState, call_id: str, error: str) -> Step:
        """The model's own transfer (function call `call_id`) did not go through: it is told."""
        ...

    def decide(self, state: SessionState, event: InboundEvent) -> Step | None:
        """What one of this provider's own inputs decides (None: not one of its own)."""
        ...

    def timer_fired(self, state: SessionState, timer: Timer) -> Step | None:
        """What one of this provider's own timers decides (None: not one of its own)."""
        ...

    def provider_error(self, state: SessionState, event: ProviderError) -> Step:
        """What the provider's error means beyond its incident."""
        ...

    def key_press(self, event: InboundEvent) -> KeyPressed | None:
        """The input as the keypad press every phone call has, if it is one."""
        ...

    def ended(self, before: SessionState, step: Step) -> Step:
        """`step`, which ended the call, with what the provider's work still running leaves."""
        ...

    def record_late(self, state: SessionState, event: InboundEvent) -> Step | None:
        """What a late input of this provider still leaves in the record (None: nothing)."""
        ...

    def asks_for_reply(self, controls: tuple[Control, ...]) -> bool:
        """Whether these controls ask the model to reply now (a whisper answers `replying`)."""
        ...

    def erased(self, state: SessionState) -> SessionState:
        """The provider's own parts of the state without what was said in them (an erasure)."""
        ...

    def parse(self, raw: dict[str, Any]) -> InboundEvent | None:
        """A logged input of this provider's own into its model (None: not one of its types)."""
        ...

    def call_progress(self, event: InboundEvent) -> CallProgress | None:
        """What one of this provider's own inputs says of a call going out (None: nothing)."""
        ...

    def story_mark(self, event: InboundEvent) -> StoryMark | None:
        """What one of this provider's own inputs means for the call log's turns (None: nothing)."""
        ...

    def outlives_its_sideband(self, state: SessionState, event: InboundEvent) -> bool:
        """Whether this provider's event, seen by a superseded sideband, is still acted on."""
        ...


DIALECTS: dict[Provider, Dialect] = {Provider.REALTIME: realtime.DIALECT, Provider.LIVE: live.DIALECT}
CAPABILITIES: dict[Provider, Capabilities] = {
    provider: dialect.capabilities for provider, dialect in DIALECTS.items()
}


def dialect_of(state: SessionState) -> Dialect:
    """How the session's provider does what every call does."""
    return DIALECTS[state.provider]


def dialect_for(provider: str) -> Dialect:
    """How the provider a session spec names does what every call does."""
    return DIALECTS[Provider(provider)]


def capabilities_of(state: SessionState) -> Capabilities:
    """What the session's provider can do."""
    return CAPABILITIES[state.provider]


def capabilities_for(provider: str) -> Capabilities:
    """What the provider a session spec names can do."""
    return CAPABILITIES[Provider(provider)]


def parse_inbound(raw: dict[str, Any]) -> InboundEvent:
    """Validate one logged input (the host's, or a provider's) into its model: a type no model
    reads passes as `UnknownEvent`, a known type of a bad shape is a `MalformedFrame`."""
    event_type = raw.get("type")
    if not isinstance(event_type, str):
        raise MalformedFrame("event has no string 'type'")
    if event_type in HOST_TYPES:
        return parse_host(raw)
    if event_type in COMMON_TYPES:
        return parse_common(raw)
    for dialect in DIALECTS.values():
        parsed = dialect.parse(raw)
        if parsed is not None:
            return parsed
    return unknown(raw, event_type)


def is_spoken_by(state: SessionState, event: InboundEvent) -> bool:
    """Whether the input belongs to the session's provider protocol (or to every provider's)."""
    return not any(
        isinstance(event, dialect.own_events)
        for provider, dialect in DIALECTS.items()
        if provider is not state.provider
    )
