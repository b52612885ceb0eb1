"""The models the simulated provider serves, and its refusals of a configuration that names
another, or asks a model for what it does not do.

Realtime calls take the Realtime models, Live sessions the Live models, and a Realtime session's
`audio.input.transcription.model` the transcription models (PROTOCOL.md and LIVE_PROTOCOL.md,
"Models and their lifecycle"). Only the reasoning Realtime models take `reasoning` and
`parallel_tool_calls`, and only they speak preambles (§4.5). The service refuses a name it does
not serve with an `invalid_request_error` naming the field; the wording here is the
simulator's own (the service's exact text for a model is not on record), in the shape of its
other `invalid_value` refusals. A Live model asked for on a Realtime call (or the reverse) is
`invalid_model`, which the service has been seen to answer for it.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

from openai.types.live import BuiltInVoice
from openai.types.realtime.realtime_audio_config_output import Voice as RealtimeVoice

# The reasoning models: they take `reasoning` and `parallel_tool_calls`, and may speak preambles.
REASONING_MODELS = ("gpt-realtime-2", "gpt-realtime-2.1", "gpt-realtime-2.1-mini")
REALTIME_MODELS = ("gpt-realtime", "gpt-realtime-mini", "gpt-realtime-1.5", *REASONING_MODELS)
LIVE_MODELS = ("gpt-live-1", "gpt-live-1.1")
TRANSCRIPTION_MODELS = (
    "whisper-1",
    "gpt-4o-transcribe",
    "gpt-4o-mini-transcribe",
    "gpt-4o-transcribe-diarize",
    "gpt-live-transcribe",
    "gpt-transcribe",
    "gpt-realtime-whisper",
)
# What a call or session gets when its configuration names none: current models, none of them
# with an announced shutdown date.
DEFAULT_REALTIME_MODEL = "gpt-realtime-2.1"
DEFAULT_LIVE_MODEL = "gpt-live-1.1"
DEFAULT_TRANSCRIPTION_MODEL = "gpt-transcribe"


def _literal_values(alias: Any) -> tuple[str, ...]:
    """The string literals of an SDK type alias (a Literal, or a Union holding one)."""
    found: list[str] = []
    for member in typing.get_args(alias) or (alias,):
        if typing.get_origin(member) is typing.Literal:
            found += [value for value in typing.get_args(member) if isinstance(value, str)]
        elif isinstance(member, str):
            found.append(member)
    return tuple(found)


# The built-in voice names: the Live list (a superset of Realtime's, LIVE_PROTOCOL.md "Custom
# voices") and the Realtime ones, both read from the `openai` types.
VOICES = tuple(dict.fromkeys((*_literal_values(BuiltInVoice), *_literal_values(RealtimeVoice))))


@dataclass(frozen=True)
class ModelRefusal:
    """Why a configuration is refused: the error code, the message and the field's path within
    the configuration (a caller prefixes where the configuration sits: `session.`)."""

    code: str
    message: str
    field: str


def _not_one_of(value: object, allowed: tuple[str, ...], field: str) -> ModelRefusal:
    supported = ", ".join(f"'{name}'" for name in allowed)
    message = f"Invalid value: '{value}'. Supported values are: {supported}."
    return ModelRefusal("invalid_value", message, field)


def is_reasoning_model(model: object) -> bool:
    """Whether this Realtime model reasons (and so may speak a preamble)."""
    return model in REASONING_MODELS


def realtime_model_refusal(model: object) -> ModelRefusal | None:
    """A Realtime call's `model`, unless it is one the simulator serves."""
    if model in REALTIME_MODELS:
        return None
    if model in LIVE_MODELS:
        message = f"The model '{model}' is not supported in realtime mode."
        return ModelRefusal("invalid_model", message, "model")
    return _not_one_of(model, REALTIME_MODELS, "model")


def live_model_refusal(model: object) -> ModelRefusal | None:
    """A Live session's `model`, unless it is a Live model."""
    if model in LIVE_MODELS:
        return None
    if model in REALTIME_MODELS:
        message = f"The model '{model}' is not supported in live mode."
        return ModelRefusal("invalid_model", message, "model")
    return _not_one_of(model, LIVE_MODELS, "model")


def voice_refusal(voice: object, field: str = "audio.output.voice") -> ModelRefusal | None:
    """A built-in voice name the service does not have (a custom voice `{"id"}` is not checked:
    the simulator keeps no voice library)."""
    if voice is None or isinstance(voice, dict) or voice in VOICES:
        return None
    return _not_one_of(voice, VOICES, field)


def _reasoning_refusal(model: object, settings: dict[str, Any]) -> ModelRefusal | None:
    """`reasoning` and `parallel_tool_calls` are for the reasoning models only."""
    for name in ("reasoning", "parallel_tool_calls"):
        if settings.get(name) is not None and not is_reasoning_model(model):
            return ModelRefusal(
                "unsupported_parameter",
                f"Unsupported parameter: '{name}' is not supported with the model '{model}'; "
                f"it is only supported by reasoning Realtime models ({', '.join(REASONING_MODELS)}).",
                name,
            )
    return None


def _transcription_refusal(transcription: object) -> ModelRefusal | None:
    if not isinstance(transcription, dict):
        return None
    field = "audio.input.transcription"
    if "model" in transcription and transcription["model"] not in TRANSCRIPTION_MODELS:
        return _not_one_of(transcription["model"], TRANSCRIPTION_MODELS, f"{field}.model")
    if transcription.get("language") is not None and transcription.get("languages") is not None:
        # The plural hint replaces the singular one: the service refuses both at once.
        return ModelRefusal(
            "invalid_value",
            "Send either 'language' or 'languages', not both.",
            f"{field}.languages",
        )
    return None


def realtime_session_refusal(session: dict[str, Any]) -> ModelRefusal | None:
    """What is wrong with an effective Realtime session config (a call's, after an update):
    its model, its transcription model, its voice, or reasoning settings on a model without."""
    model = session.get("model")
    audio = session.get("audio") or {}
    return (
        realtime_model_refusal(model)
        or _transcription_refusal((audio.get("input") or {}).get("transcription"))
        or voice_refusal((audio.get("output") or {}).get("voice"))
        or _reasoning_refusal(model, session)
    )


def response_refusal(model: object, asked: dict[str, Any]) -> ModelRefusal | None:
    """What is wrong with a `response.create`'s own settings, on a call of `model`."""
    voice = ((asked.get("audio") or {}).get("output") or {}).get("voice")
    return voice_refusal(voice) or _reasoning_refusal(model, asked)


def live_session_refusal(config: dict[str, Any]) -> ModelRefusal | None:
    """What is wrong with a Live session's startup config: its model or its voice."""
    output = (config.get("audio") or {}).get("output") or {}
    return live_model_refusal(config.get("model")) or voice_refusal(output.get("voice"))
