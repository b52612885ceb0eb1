"""Recordings: a call's server events with their offsets, replayed by the simulator in playback mode.

A recording is JSON Lines. The first line is the header, every other line one event at its offset
in milliseconds from sideband attach, and an optional last line the close frame:

    {"recording": {"version": 1, "name": "three-turn", "instructions": "…", "description": "…"}}
    {"t_ms": 112.4, "event": {"type": "input_audio_buffer.speech_started", …}}
    {"t_ms": 2480.0, "close": {"code": 1000}}

The header may carry `session`, the body of `POST /v1/sessions` a replay creates its session with.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The code a playback closes with when the recording does not say.
DEFAULT_CLOSE_CODE = 1000


_LineT = TypeVar("_LineT", bound=BaseModel)


class RecordingError(Exception):
    """A recording line that cannot be read; `line` is its 1-based number."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordingHeader(_Line):
    """What the recording is: its format version, name, the instructions used, a description,
    and optionally the session spec it was made under."""

    version: Literal[1] = 1
    name: str
    instructions: str = ""
    description: str = ""
    # The body of `POST /v1/sessions` (instructions, tools, limits) that `switchboard replay`
    # creates its session with. The provider never sees it, so the simulator only carries it:
    # the replay checks it against the API's schema, which the simulator may not import.
    session: dict[str, Any] | None = None


class _HeaderLine(_Line):
    recording: RecordingHeader


class RecordedEvent(_Line):
    """One server event, sent `t_ms` after sideband attach."""

    t_ms: float = Field(ge=0)
    event: dict[str, Any]


class CloseFrame(_Line):
    """The close frame that ends the sideband."""

    code: int = Field(default=DEFAULT_CLOSE_CODE, ge=1000, le=4999)
    reason: str = ""


class RecordedClose(_Line):
    """The sideband closes `t_ms` after attach."""

    t_ms: float = Field(ge=0)
    close: CloseFrame


class Recording(BaseModel):
    """A whole recording: header, events in send order, and the close if one was recorded."""

    model_config = ConfigDict(frozen=True)

    header: RecordingHeader
    events: list[RecordedEvent]
    close: RecordedClose | None = None


def read_recording(path: str | Path) -> Recording:
    """The recording in the file at `path` (raises RecordingError naming the bad line)."""
    with open(path, encoding="utf-8") as lines:
        return parse_recording(lines)


def parse_recording(lines: Iterable[str]) -> Recording:
    """The recording in these JSON lines; blank lines are skipped."""
    header: RecordingHeader | None = None
    events: list[RecordedEvent] = []
    close: RecordedClose | None = None
    last_ms = 0.0
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        data = _json_object(number, text)
        if header is None:
            header = _parse(number, _HeaderLine, data, "the header line").recording
            continue
        if close is not None:
            raise RecordingError(number, "nothing may follow the close line")
        line: RecordedEvent | RecordedClose
        if "close" in data:
            line = close = _parse(number, RecordedClose, data, "a close line")
        else:
            line = _parse(number, RecordedEvent, data, "an event line")
            events.append(line)
        # Playback sends in file order; an offset that goes back would mean a reordered file.
        if line.t_ms < last_ms:
            raise RecordingError(number, f"t_ms {line.t_ms} is earlier than the line before ({last_ms})")
        last_ms = line.t_ms
    if header is None:
        raise RecordingError(1, "the recording is empty: the header line is missing")
    return Recording(header=header, events=events, close=close)


def _json_object(number: int, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordingError(number, f"not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise RecordingError(number, "not a JSON object")
    return data


def _parse(number: int, model: type[_LineT], data: dict[str, Any], what: str) -> _LineT:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "line"
        raise RecordingError(number, f"not {what}: {where}: {first['msg']}") from exc


def recording_lines(recording: Recording) -> list[str]:
    """The recording as the JSON lines `parse_recording` reads back (a header without a session
    is written as the first format had it)."""
    lines = [_HeaderLine(recording=recording.header).model_dump_json(exclude_none=True)]
    lines += [json.dumps({"t_ms": line.t_ms, "event": line.event}) for line in recording.events]
    if recording.close is not None:
        frame = recording.close.close
        close: dict[str, Any] = {"code": frame.code, **({"reason": frame.reason} if frame.reason else {})}
        lines.append(json.dumps({"t_ms": recording.close.t_ms, "close": close}))
    return lines


def record_call(
    call_log: Mapping[str, Any],
    *,
    name: str | None = None,
    instructions: str = "",
    description: str = "",
    session: dict[str, Any] | None = None,
) -> list[str]:
    """The recording of a simulator call log (`Simulator.calls[id]` or its JSON), as JSON lines.

    Offsets count from the sideband attach; the close line is written when the call was closed.
    """
    attached_at = call_log["attached_at"]
    if attached_at is None:
        raise ValueError(f"call {call_log['call_id']} never attached a sideband: nothing to record")
    header = RecordingHeader(
        name=name or str(call_log["call_id"]),
        instructions=instructions,
        description=description,
        session=session,
    )
    events = [
        RecordedEvent(t_ms=_offset_ms(entry["t"], attached_at), event=entry["event"])
        for entry in call_log["events"]
    ]
    close = None
    if call_log["closed_at"] is not None and call_log["close_code"] is not None:
        close = RecordedClose(
            t_ms=_offset_ms(call_log["closed_at"], attached_at),
            close=CloseFrame(code=call_log["close_code"]),
        )
    return recording_lines(Recording(header=header, events=events, close=close))


def _offset_ms(t: float, attached_at: float) -> float:
    return round(max(0.0, (t - attached_at) * 1000), 1)
