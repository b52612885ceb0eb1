"""How a Realtime session is configured: the host drives every response, the provider's VAD
only reports speech, the caller's audio is transcribed, and the model is offered the session's
function tools (with the built-in `end_call` and `transfer_call` where the session has them)."""

from __future__ import annotations

from typing import Any

from pipeline.call.built_in import END_CALL, TRANSFER_CALL
from pipeline.call.keypad import collect_digits_tool, collectable
from pipeline.session.consent import decline_recording_tool
from pipeline.session.state import SessionState

# The caller's audio is transcribed (user transcript finals are what drive a turn) by the model
# the session chose (`state.model.transcription`); a session stored before models were chosen per
# session gets this one, the deployment default's (docs/providers.md says why it is this one).
TRANSCRIPTION_MODEL = "gpt-transcribe"


# The goodbye comes in the same response as the call to end: nothing said after it is heard.
SAY_GOODBYE_FIRST = (
    "Say your goodbye in the same reply in which you call this, before the call: the call ends "
    "when that reply is done, and nothing you say after it is heard."
)


def session_configuration(state: SessionState) -> dict[str, Any]:
    """The `session.update` body: the host creates and interrupts responses itself, so the
    provider's VAD only reports speech, and the caller's audio is transcribed."""
    chosen = state.model
    transcription = chosen.transcription
    audio: dict[str, Any] = {
        "input": {
            "transcription": (
                transcription.model_dump(exclude_none=True)
                if transcription
                else {"model": TRANSCRIPTION_MODEL}
            ),
            "turn_detection": turn_detection(state),
        }
    }
    if chosen.voice is not None:
        audio["output"] = {
            "voice": {"id": chosen.voice} if chosen.voice.startswith("voice_") else chosen.voice
        }
    configuration: dict[str, Any] = {"type": "realtime", "instructions": state.instructions, "audio": audio}
    if chosen.reasoning_effort is not None:
        configuration["reasoning"] = {"effort": chosen.reasoning_effort}
    tools = offered_tools(state)
    if tools:
        configuration["tools"] = tools
        configuration["tool_choice"] = "auto"
        if chosen.parallel_tool_calls is not None:
            # Said either way on a model that takes it: one at a time unless the session asked.
            configuration["parallel_tool_calls"] = chosen.parallel_tool_calls
    return configuration


def turn_detection(state: SessionState) -> dict[str, Any] | None:
    """Speech is detected (never answered or interrupted by the provider) unless the line is
    held: then nothing is detected, so the agent hears nothing."""
    if state.held:
        return None
    detection: dict[str, Any] = {"type": "server_vad", "create_response": False, "interrupt_response": False}
    if state.phone is not None and state.phone.silences is not None:
        # The provider reports the caller's silence after this long (the route counts them).
        detection["idle_timeout_ms"] = state.phone.silence_ms
    return detection


def turn_detection_update(state: SessionState) -> dict[str, Any]:
    """The `session.update` body that switches turn detection to what the line needs."""
    return {"type": "realtime", "audio": {"input": {"turn_detection": turn_detection(state)}}}


def offered_tools(state: SessionState) -> list[dict[str, Any]]:
    """The function tools as `session.update` carries them: the session's, and end_call when
    the session may hang up."""
    tools = [dict(tool) for tool in state.tools]
    if state.hangup_when is not None:
        tools.append(end_call_tool(state.hangup_when))
    if state.phone is not None and state.phone.transfer_targets:
        tools.append(transfer_call_tool(state.phone.transfer_targets))
    if state.privacy.consent is not None:
        tools.append(decline_recording_tool())
    if offers_collection(state):
        tools.append(collect_digits_tool(state.tool_sensitive))
    return tools


def offers_collection(state: SessionState) -> bool:
    """Whether the model may have the caller key a number in: a phone call (it has a keypad)
    with a tool that takes a sensitive value."""
    return state.phone is not None and bool(collectable(state.tool_sensitive))


def transfer_call_tool(targets: tuple[str, ...]) -> dict[str, Any]:
    """The built-in tool with which the model hands a phone call on: only to the route's
    targets (an enum, so the model cannot invent a number)."""
    return {
        "type": "function",
        "name": TRANSFER_CALL,
        "description": (
            "Transfer the caller to a person or another line, when they ask for it or you cannot "
            "help. Tell the caller first, in the same reply. Only these targets exist."
        ),
        "parameters": {
            "type": "object",
            "properties": {"target": {"type": "string", "enum": list(targets)}},
            "required": ["target"],
        },
    }


def end_call_tool(when: str) -> dict[str, Any]:
    """The built-in tool with which the model ends the call."""
    return {
        "type": "function",
        "name": END_CALL,
        "description": f"End the call. {when}\n{SAY_GOODBYE_FIRST}".strip(),
        "parameters": {"type": "object", "properties": {}},
    }
