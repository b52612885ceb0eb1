"""Call scripts: what the simulated caller says and what the simulated model answers, as JSON.

A script has two lists. `caller` is spoken in order, each step `after_ms` after its trigger point:
the end of the reply to the previous user turn (`response.done`, following function calls through to
the spoken answer), or `response_wait_ms` after the transcript when the host creates no response, or
— with `during_response` — the next `response.created` (a barge-in). `model` answers one entry per
`response.create`; when it runs out the model says "Okay.". An answer may carry a `preamble`, said
first as a message of its own, which a reasoning model speaks.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# The answer when the script has no model entry left.
FALLBACK_ANSWER = "Okay."


class _Strict(BaseModel):
    # A misspelt field in a hand-written script must fail loudly, not be ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timing(_Strict):
    """How fast things happen in a simulated call, in milliseconds."""

    delta_interval_ms: int = Field(default=10, ge=0)
    """Pause before each streamed delta (transcript, text, arguments, input transcription)."""
    chars_per_delta: int = Field(default=12, ge=1)
    """Characters per streamed delta."""
    speech_ms: int = Field(default=300, ge=0)
    """How long the caller speaks each utterance (speech_started to speech_stopped)."""
    response_wait_ms: int = Field(default=3000, ge=0)
    """How long the caller waits for a `response.create` after its transcript before going on."""
    audio_ms_per_word: int = Field(default=300, ge=1)
    """Spoken length of assistant audio per word; the audio length that truncation checks."""
    drain_ms: int = Field(default=100, ge=0)
    """After a client cancel, how long buffered audio keeps playing before `.stopped`."""
    first_audio_ms: int = Field(default=0, ge=0, le=60_000)
    """How long the model thinks before an audio answer's first audio (`output_audio_buffer.started`
    and its first deltas): what a caller waits beyond Switchboard's hop. A real model takes some
    300–800 ms; 0 by default so the test suite's hundreds of answers stay fast (`--first-audio-ms`
    and the demo set a realistic one)."""


class CallerSays(_Strict):
    """The caller speaks `say` (server VAD turn, committed and transcribed)."""

    say: str = Field(min_length=1)
    after_ms: int = Field(default=0, ge=0)
    during_response: bool = False
    # Speak `after_ms` after an answer that called a function has finished: while the host
    # runs the tool (new input during a tool).
    during_tool: bool = False
    # Speak `after_ms` after an out-of-band response (a host's maintenance response, such as a
    # compaction summary) has started since the caller last spoke.
    during_out_of_band: bool = False


class CallerHangsUp(_Strict):
    """The caller hangs up: the sideband closes with 1000 and the call ends."""

    hangup: Literal[True]
    after_ms: int = Field(default=0, ge=0)


class CallerPresses(_Strict):
    """The caller presses a keypad key (a phone call's DTMF)."""

    dtmf: Literal["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "*", "#", "A", "B", "C", "D"]
    after_ms: int = Field(default=0, ge=0)


class CallerStaysSilent(_Strict):
    """The caller says nothing: with an idle timeout configured, the provider reports it once
    that long has passed (`input_audio_buffer.timeout_triggered`)."""

    silent: Literal[True]
    after_ms: int = Field(default=0, ge=0)


CallerStep = CallerSays | CallerHangsUp | CallerPresses | CallerStaysSilent


class _Prefaced(_Strict):
    preamble: str | None = Field(default=None, min_length=1)
    """Said first, as an assistant message of its own in the same response (a reasoning model's
    preamble, PROTOCOL.md §4.5): the response then carries two messages, or a message before its
    function calls. Only a reasoning model speaks it; any other model leaves it out."""


class ModelSays(_Prefaced):
    """An audio answer with this transcript."""

    say: str = Field(min_length=1)


class ModelWrites(_Prefaced):
    """A text-only answer."""

    text: str = Field(min_length=1)


class FunctionCall(_Strict):
    """The function the model calls and its arguments (JSON-encoded on the wire)."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ModelCalls(_Prefaced):
    """An answer whose output is a function_call item."""

    function_call: FunctionCall


class ModelCallsInParallel(_Prefaced):
    """An answer whose output is several function_call items at once (parallel calls)."""

    function_calls: list[FunctionCall] = Field(min_length=2)


ModelEntry = ModelSays | ModelWrites | ModelCalls | ModelCallsInParallel


class JudgeEvidence(_Strict):
    """What the simulated judge needs to find in a transcript to answer `ask` yes."""

    ask: str = Field(min_length=1)
    evidence: list[str] = Field(default_factory=list)


class CallScript(_Strict):
    """One simulated call: the caller's steps, the model's answers, and the protocol switches."""

    name: str = "silent"
    session_created_on_attach: bool = False
    """Send `session.created` when the sideband attaches (the real sideband does not, §1.3)."""
    emit_truncated_on_interrupt: bool = True
    """On a VAD barge-in, also send `conversation.item.truncated` for the cut assistant item."""
    emit_audio_deltas: bool = False
    """Send `response.output_audio.delta` (silence) too, as a plain WebSocket session would."""
    timing: Timing = Timing()
    caller: list[CallerStep] = Field(default_factory=list)
    model: list[ModelEntry] = Field(default_factory=list)
    out_of_band: list[ModelEntry] = Field(default_factory=list)
    """Answers for `conversation: "none"` responses, which do not consume `model` entries."""
    judge: list[JudgeEvidence] = Field(default_factory=list)
    """What the simulated judge (`POST /v1/chat/completions`) looks for to answer each question yes."""


# Scripts shipped with the package, loadable by bare name (e.g. "three_turn").
PACKAGED_SCRIPTS = resources.files("simulator") / "scripts"


def parse_script(text: str | bytes) -> CallScript:
    """A call script from its JSON text (raises pydantic.ValidationError when it is not one)."""
    return CallScript.model_validate_json(text)


def load_script(name_or_path: str | Path) -> CallScript:
    """A call script from a file path, or by the name of a packaged script such as "three_turn"."""
    path = Path(name_or_path)
    if path.is_file():
        return parse_script(path.read_bytes())
    packaged = PACKAGED_SCRIPTS / f"{path.stem}.json"
    if packaged.is_file():
        return parse_script(packaged.read_bytes())
    raise FileNotFoundError(f"no call script at {name_or_path!s} and none packaged by that name")


def model_text(entry: ModelEntry) -> str:
    """What the entry says or writes (the JSON arguments for a function call)."""
    if isinstance(entry, ModelSays):
        return entry.say
    if isinstance(entry, ModelWrites):
        return entry.text
    if isinstance(entry, ModelCallsInParallel):
        return " ".join(json.dumps(call.arguments) for call in entry.function_calls)
    return json.dumps(entry.function_call.arguments)
