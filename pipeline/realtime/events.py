"""What a Realtime sideband says that Switchboard reads (PROTOCOL.md §2): the GA names (beta
names renamed on input), which event types are durable, streamed or ignored, and the models of
the durable ones. Inbound models ignore fields they do not use, because the provider adds fields
over time. (`session.updated` and `error` read both providers' frames: `pipeline.session.wire`.)"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, model_validator

from pipeline.call.messages import Inbound, Playback, optional_str
from pipeline.session.wire import (
    TYPED_ITEM_PREFIX,
    InboundEvent,
    KeyPressed,
    ProviderError,
    SessionUpdated,
    validated,
)

BETA_TO_GA = {
    "response.text.delta": "response.output_text.delta",
    "response.text.done": "response.output_text.done",
    "response.audio.delta": "response.output_audio.delta",
    "response.audio.done": "response.output_audio.done",
    "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    "response.audio_transcript.done": "response.output_audio_transcript.done",
    "conversation.item.created": "conversation.item.added",
}


# Transcript deltas stay in the gateway: accumulated and fanned out to the watchers, never queued.
STREAMED_TYPES = frozenset(
    {
        "conversation.item.input_audio_transcription.delta",
        "response.output_audio_transcript.delta",
        "response.output_text.delta",
    }
)


# Events a decision depends on: numbered, queued, logged and applied under the row lock.
DURABLE_TYPES = frozenset(
    {
        "session.created",
        "session.updated",
        "input_audio_buffer.speech_started",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.failed",
        "response.created",
        "response.output_audio_transcript.done",
        "response.output_text.done",
        "response.function_call_arguments.done",
        "response.done",
        "conversation.item.truncated",
        "conversation.item.deleted",
        "input_audio_buffer.dtmf_event_received",
        "input_audio_buffer.timeout_triggered",
        "error",
    }
)


# Every other event of the GA protocol: known, and nothing to decide on.
IGNORED_TYPES = frozenset(
    {
        "conversation.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.input_audio_transcription.segment",
        "conversation.item.retrieved",
        "input_audio_buffer.cleared",
        "input_audio_buffer.committed",
        "input_audio_buffer.speech_stopped",
        "mcp_list_tools.completed",
        "mcp_list_tools.failed",
        "mcp_list_tools.in_progress",
        "output_audio_buffer.cleared",
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "rate_limits.updated",
        "response.content_part.added",
        "response.content_part.done",
        "response.function_call_arguments.delta",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.output_audio.delta",
        "response.output_audio.done",
        "response.output_item.added",
        "response.output_item.done",
    }
)


class SpeechStarted(Inbound):
    type: Literal["input_audio_buffer.speech_started"]
    event_id: str
    item_id: str
    audio_start_ms: int
    # Added by the gateway (never taken from the provider): None when nothing was playing.
    playback: Playback | None = None


class UserTranscriptFinal(Inbound):
    type: Literal["conversation.item.input_audio_transcription.completed"]
    event_id: str
    item_id: str
    content_index: int = 0
    transcript: str


class CallerSilent(Inbound):
    """The caller said nothing for the idle timeout after the agent's last words."""

    type: Literal["input_audio_buffer.timeout_triggered"]
    event_id: str
    item_id: str
    audio_start_ms: int = 0
    audio_end_ms: int = 0


class UserTranscriptFailed(Inbound):
    type: Literal["conversation.item.input_audio_transcription.failed"]
    event_id: str
    item_id: str
    error: dict[str, Any] = Field(default_factory=dict)


class ResponseRef(Inbound):
    id: str
    status: str | None = None
    # Echoed from our response.create: how a maintenance response is told from a spoken one.
    metadata: dict[str, str] | None = None


class ResponseCreated(Inbound):
    type: Literal["response.created"]
    event_id: str
    response: ResponseRef


class AssistantTranscriptFinal(Inbound):
    """The final text of one assistant item: the audio transcript, or the text of a
    text-only response (``response.output_text.done`` names it ``text``)."""

    type: Literal["response.output_audio_transcript.done", "response.output_text.done"]
    event_id: str
    response_id: str
    item_id: str
    transcript: str

    @model_validator(mode="before")
    @classmethod
    def _text_is_the_transcript(cls, data: Any) -> Any:
        if isinstance(data, dict) and "transcript" not in data and "text" in data:
            return {**data, "transcript": data["text"]}
        return data


class FunctionCallArgumentsDone(Inbound):
    type: Literal["response.function_call_arguments.done"]
    event_id: str
    response_id: str
    item_id: str
    call_id: str
    name: str
    arguments: str


class FunctionCallItem(Inbound):
    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str


class FunctionCallItemDone(Inbound):
    """`response.output_item.done` for a function_call item: the same call as
    `response.function_call_arguments.done`, whichever arrives (taken up once by call id)."""

    type: Literal["response.output_item.done"]
    event_id: str
    response_id: str
    item: FunctionCallItem

    def as_arguments_done(self) -> FunctionCallArgumentsDone:
        return FunctionCallArgumentsDone(
            type="response.function_call_arguments.done",
            event_id=self.event_id,
            response_id=self.response_id,
            item_id=self.item.id,
            call_id=self.item.call_id,
            name=self.item.name,
            arguments=self.item.arguments,
        )


class TokenUsage(Inbound):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    # By modality (and what of the input was cached), for the call's cost.
    input_token_details: dict[str, Any] | None = None
    output_token_details: dict[str, Any] | None = None


class ResponseSummary(Inbound):
    id: str
    status: str
    status_details: dict[str, Any] | None = None
    usage: TokenUsage | None = None
    metadata: dict[str, str] | None = None


class HeardStamp(Inbound):
    """When the caller stopped speaking and this response's first audio came, as the gateway
    received each (wall seconds): what the caller waited for it."""

    speech_ended_at: float
    first_audio_at: float


class ResponseDone(Inbound):
    type: Literal["response.done"]
    event_id: str
    response: ResponseSummary
    # Added by the gateway (never taken from the provider): None when the response answered
    # nobody's speech, or its first audio was not seen.
    heard: HeardStamp | None = None


class ItemTruncated(Inbound):
    type: Literal["conversation.item.truncated"]
    event_id: str
    item_id: str
    content_index: int
    audio_end_ms: int


class ItemDeleted(Inbound):
    type: Literal["conversation.item.deleted"]
    event_id: str
    item_id: str


def ga_type(event_type: str) -> str:
    """The GA name of an event type (beta names renamed, others unchanged)."""
    return BETA_TO_GA.get(event_type, event_type)


def function_call_id(event: dict[str, Any]) -> str | None:
    """The call id an event requests a function call with, if it is one."""
    if event.get("type") == "response.function_call_arguments.done":
        return optional_str(event.get("call_id"))
    if is_function_call_item(event):
        return optional_str(event["item"].get("call_id"))
    return None


def is_function_call_item(event: dict[str, Any]) -> bool:
    item = event.get("item")
    return (
        event.get("type") == "response.output_item.done"
        and isinstance(item, dict)
        and item.get("type") == "function_call"
    )


# The content parts that hold the words of a typed message, by its role: the caller's text, and
# the assistant's (its GA name and the beta one).
TYPED_PARTS: dict[str, frozenset[str]] = {
    "user": frozenset({"input_text"}),
    "assistant": frozenset({"output_text", "text"}),
}


def is_typed_item(event: dict[str, Any]) -> bool:
    """A text message another client added to the conversation: the caller's words (a WebRTC
    client's data channel, another host on the sideband), answered by a response that is not the
    host's, or the assistant's (a conversation seeded with a history before the call): lines the
    transcript would otherwise lack. Switchboard's own typed items (`TYPED_ITEM_PREFIX`) are
    recorded when they are sent, and an item a response is still producing (added `in_progress`,
    without its words) is the model's own, recorded from its final."""
    item = event.get("item")
    if event.get("type") != "conversation.item.added" or not isinstance(item, dict):
        return False
    item_id, content = item.get("id"), item.get("content")
    parts = TYPED_PARTS.get(str(item.get("role")))
    return (
        item.get("type") == "message"
        and parts is not None
        and item.get("status") != "in_progress"
        and isinstance(item_id, str)
        and not item_id.startswith(TYPED_ITEM_PREFIX)
        and isinstance(content, list)
        and any(
            isinstance(part, dict) and isinstance(part.get("type"), str) and part["type"] in parts
            for part in content
        )
    )


class TypedPart(Inbound):
    type: str
    text: str = ""


class TypedItem(Inbound):
    id: str
    role: Literal["user", "assistant"]
    content: tuple[TypedPart, ...]


class ItemTyped(Inbound):
    """A text message another client added to the conversation (`is_typed_item`)."""

    type: Literal["conversation.item.added"]
    event_id: str
    item: TypedItem

    @property
    def text(self) -> str:
        return typed_text(self.item.role, (part.model_dump() for part in self.item.content))


def typed_text(role: str, content: Iterable[dict[str, Any]]) -> str:
    """The words of a typed item's content: its text parts for its role (`TYPED_PARTS`), joined."""
    parts = TYPED_PARTS.get(role, frozenset())
    return "".join(part.get("text", "") for part in content if part.get("type") in parts)


# What a Realtime sideband says that the workers read, with what every provider says alike.
_REALTIME_INPUT: TypeAdapter[Any] = TypeAdapter(
    Annotated[
        SessionUpdated
        | SpeechStarted
        | UserTranscriptFinal
        | UserTranscriptFailed
        | ResponseCreated
        | AssistantTranscriptFinal
        | FunctionCallArgumentsDone
        | FunctionCallItemDone
        | ResponseDone
        | ProviderError
        | ItemTruncated
        | ItemDeleted
        | KeyPressed
        | CallerSilent
        | ItemTyped,
        Field(discriminator="type"),
    ]
)


def parse_realtime(raw: dict[str, Any]) -> InboundEvent | None:
    """A logged Realtime input into its model (a beta name read as its GA name), or None when
    its type is not one the workers read; one of the wrong shape raises `MalformedFrame`."""
    event_type = raw.get("type")
    if not isinstance(event_type, str):
        return None
    event_type = ga_type(event_type)
    raw = {**raw, "type": event_type}
    if event_type not in DURABLE_TYPES and not is_function_call_item(raw) and not is_typed_item(raw):
        return None
    return validated(_REALTIME_INPUT, raw)
