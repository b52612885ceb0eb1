"""What Switchboard sends on a Realtime sideband besides `session.update` (PROTOCOL.md §3):
responses asked for and cancelled, conversation items created, deleted and truncated, the input
buffer cleared. Controls forbid unknown fields, because the provider rejects them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.call.messages import ControlModel


class ResponseParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    instructions: str | None = None
    max_output_tokens: int | Literal["inf"] | None = None
    tool_choice: str | None = None
    output_modalities: tuple[Literal["audio", "text"], ...] | None = None
    metadata: dict[str, str] | None = None
    # "none" runs the response out of band: it reads the conversation but writes nothing to it
    # and does not block a spoken response (PROTOCOL.md §3).
    conversation: Literal["auto", "none"] | None = None


class ResponseCreate(ControlModel):
    type: Literal["response.create"] = "response.create"
    response: ResponseParams | None = None


class ResponseCancel(ControlModel):
    type: Literal["response.cancel"] = "response.cancel"
    response_id: str | None = None


class ItemCreate(ControlModel):
    type: Literal["conversation.item.create"] = "conversation.item.create"
    item: dict[str, Any]
    previous_item_id: str | None = None


class ItemDelete(ControlModel):
    type: Literal["conversation.item.delete"] = "conversation.item.delete"
    item_id: str


class InputAudioBufferClear(ControlModel):
    type: Literal["input_audio_buffer.clear"] = "input_audio_buffer.clear"


class ItemTruncate(ControlModel):
    type: Literal["conversation.item.truncate"] = "conversation.item.truncate"
    item_id: str
    content_index: int = 0
    audio_end_ms: int = Field(ge=0)
