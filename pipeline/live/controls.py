"""What Switchboard sends on a Live sideband (LIVE_PROTOCOL.md §1.3): typed controls (each a
`ControlModel`, as every wing's are), with appended content bounded so the provider never refuses it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from pipeline.call.capabilities import too_long
from pipeline.call.messages import ControlModel
from pipeline.call.tokens import estimated_tokens
from pipeline.live.capabilities import APPEND_TOKEN_BUDGET, LIVE
from pipeline.session.wire import control_wire

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


class _LiveControl(ControlModel):
    """A Live control. Its deterministic id rides as `event_id`, which the provider echoes as
    `client_event_id` on the acknowledgement or the error, so the gateway can settle it."""


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
