"""Recordings: a call's server events with their offsets, replayed by the simulator in playback mode.

A recording is JSON Lines. The first line is the header, every other line one event at its offset
in milliseconds from sideband attach, and an optional last line the close frame:

    {"recording": {"version": 1, "name": "three-turn", "instructions": "…", "description": "…"}}
    {"t_ms": 112.4, "event": {"type": "input_audio_buffer.speech_started", …}}
    {"t_ms": 2480.0, "close": {"code": 1000}}

The header may carry `session`, the body of `POST /v1/sessions` a replay creates its session with,
and `host`: who was the host of the recorded call, Switchboard (the default) or another program
(`"other"`), whose controls the provider's answers followed. Besides events, a line may hold a
control the host sent (`control`) or a request an app or a person made of the host (`request`,
as the session's log holds it): neither is ever played, both keep a replay in step.
"""

from __future__ import annotations

import bisect
import heapq
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The code a playback closes with when the recording does not say.
DEFAULT_CLOSE_CODE = 1000
# Who was the host of a recorded call: Switchboard (its controls, or a host answering as it does),
# or another program (a client's own `response.create`, another host on the sideband), whose
# controls the provider answered and Switchboard never sends: played open loop.
Host = Literal["switchboard", "other"]
SWITCHBOARD_HOST: Host = "switchboard"
OTHER_HOST: Host = "other"


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
    # Who the provider's answers followed: Switchboard, or another program (played open loop).
    host: Host = SWITCHBOARD_HOST


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


class RecordedControl(_Line):
    """A control the host sent, as the provider received it `t_ms` after attach. Never played:
    in closed-loop playback an event the provider sent after it waits for the host's own."""

    t_ms: float = Field(ge=0)
    control: dict[str, Any]


class ControlAt(BaseModel):
    """A recorded control and its place: how many events the file has before it."""

    model_config = ConfigDict(frozen=True)

    after_events: int
    line: RecordedControl


class RecordedRequest(_Line):
    """A request an app or a person made of the host (`switchboard.agent_say`, an end, …), as
    the session's log holds it, `t_ms` after attach. Never played: `switchboard replay` makes it
    again at its place, and in closed-loop playback the events after it wait until it has."""

    t_ms: float = Field(ge=0)
    request: dict[str, Any]


class RequestAt(BaseModel):
    """A recorded request and its place: how many events the file has before it."""

    model_config = ConfigDict(frozen=True)

    after_events: int
    line: RecordedRequest


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
    # The host's controls, where the recording holds them (an export, `simulator.host`).
    controls: list[ControlAt] = []
    # The requests made of the host, where the recording holds them (an export).
    requests: list[RequestAt] = []


def read_recording(path: str | Path) -> Recording:
    """The recording in the file at `path` (raises RecordingError naming the bad line)."""
    with open(path, encoding="utf-8") as lines:
        return parse_recording(lines)


def parse_recording(lines: Iterable[str]) -> Recording:
    """The recording in these JSON lines; blank lines are skipped."""
    header: RecordingHeader | None = None
    events: list[RecordedEvent] = []
    controls: list[ControlAt] = []
    requests: list[RequestAt] = []
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
        line: RecordedEvent | RecordedControl | RecordedRequest | RecordedClose
        if "close" in data:
            line = close = _parse(number, RecordedClose, data, "a close line")
        elif "control" in data:
            line = _parse(number, RecordedControl, data, "a control line")
            controls.append(ControlAt(after_events=len(events), line=line))
        elif "request" in data:
            line = _parse(number, RecordedRequest, data, "a request line")
            requests.append(RequestAt(after_events=len(events), line=line))
        else:
            line = _parse(number, RecordedEvent, data, "an event line")
            events.append(line)
        # Playback sends in file order; an offset that goes back would mean a reordered file.
        if line.t_ms < last_ms:
            raise RecordingError(number, f"t_ms {line.t_ms} is earlier than the line before ({last_ms})")
        last_ms = line.t_ms
    if header is None:
        raise RecordingError(1, "the recording is empty: the header line is missing")
    return Recording(header=header, events=events, close=close, controls=controls, requests=requests)


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
    """The recording as the JSON lines `parse_recording` reads back (a header without a session,
    or made with Switchboard as host, is written as the first format had it). Between two events,
    the controls and the requests keep their own order and are merged by time, a control first."""
    header = recording.header
    unsaid = {"host"} if header.host == SWITCHBOARD_HOST else set()
    lines = [_HeaderLine(recording=header).model_dump_json(exclude_none=True, exclude={"recording": unsaid})]
    controls: dict[int, list[tuple[float, str]]] = {}
    requests: dict[int, list[tuple[float, str]]] = {}
    for control in recording.controls:
        line = json.dumps({"t_ms": control.line.t_ms, "control": control.line.control})
        controls.setdefault(control.after_events, []).append((control.line.t_ms, line))
    for request in recording.requests:
        line = json.dumps({"t_ms": request.line.t_ms, "request": request.line.request})
        requests.setdefault(request.after_events, []).append((request.line.t_ms, line))
    for index, event in enumerate([*recording.events, None]):
        merged = heapq.merge(controls.get(index, []), requests.get(index, []), key=lambda timed: timed[0])
        lines += [line for _t_ms, line in merged]
        if event is not None:
            lines.append(json.dumps({"t_ms": event.t_ms, "event": event.event}))
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
    with_controls: bool = True,
) -> list[str]:
    """The recording of a simulator call log (`Simulator.calls[id]` or its JSON), as JSON lines.

    Offsets count from the sideband attach; the close line is written when the call was closed.
    `with_controls` writes the host's controls too, each after the events sent before it came,
    so that a replay is played in step with them (closed loop); a recording made against some
    other host leaves them out, and a replay then waits only for the answers it counts.
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
    # Each control at its place among the events: after every event sent before it arrived.
    sent_at = [entry["t"] for entry in call_log["events"]]
    controls = [
        ControlAt(
            after_events=bisect.bisect_right(sent_at, entry["t"]),
            line=RecordedControl(t_ms=_offset_ms(entry["t"], attached_at), control=entry["control"]),
        )
        for entry in call_log.get("controls", [])
        if with_controls and isinstance(entry.get("control"), dict)
    ]
    close = None
    if call_log["closed_at"] is not None and call_log["close_code"] is not None:
        close = RecordedClose(
            t_ms=_offset_ms(call_log["closed_at"], attached_at),
            close=CloseFrame(code=call_log["close_code"]),
        )
    return recording_lines(Recording(header=header, events=events, close=close, controls=controls))


def _offset_ms(t: float, attached_at: float) -> float:
    return round(max(0.0, (t - attached_at) * 1000), 1)


# ── closed-loop playback ──────────────────────────────────────────────────────────────

# The provider events that answer a host's control, by the control's type: in a recording that
# does not hold the host's controls, such an event waits until the host has sent the control it
# answered.
ANSWERED: dict[str, str] = {
    "session.updated": "session.update",
    "response.created": "response.create",
    "conversation.item.truncated": "conversation.item.truncate",
    "conversation.item.deleted": "conversation.item.delete",
    # A Live session's commentary, appended at the host's word.
    "session.commentary.appended": "session.commentary.append",
}


class Gate(BaseModel):
    """One thing an event waits for in closed-loop playback: the host's `count`-th control of
    `control_type`, or the `count`-th request of that type made of it (`is_request`)."""

    model_config = ConfigDict(frozen=True)

    control_type: str
    count: int
    is_request: bool = False

    def describe(self) -> str:
        return f"{'the request ' if self.is_request else ''}{self.control_type} #{self.count}"


def answered_control(event: dict[str, Any]) -> str | None:
    """The type of the host control this provider event answers, if it answers one."""
    event_type = event.get("type")
    if event_type == "response.done":
        details = (event.get("response") or {}).get("status_details") or {}
        # Cancelled at the host's word (barge-in), not by the provider's own turn detection.
        return "response.cancel" if details.get("reason") == "client_cancelled" else None
    return ANSWERED.get(str(event_type))


def closed_loop_gates(recording: Recording) -> tuple[list[tuple[Gate, ...]], tuple[Gate, ...]]:
    """What the host must have sent before each event plays, and before the close.

    A recording that holds the host's controls (an export) is replayed in step with them: an
    event waits until the host has sent as many controls of each type as the recording has
    before it, and so does the close. One without them (made without Switchboard) is played with
    the answers counted: the 3rd `response.created` waits for the host's 3rd `response.create`,
    a `conversation.item.truncated` for its truncate, and so on (`ANSWERED`). Either way an
    event after a request made of the host waits until that request was made again. A recording
    whose host was another program (`"host": "other"`) waits for nothing: the provider answered
    that program's controls, which Switchboard never sends."""
    if recording.header.host == OTHER_HOST:
        return [()] * len(recording.events), ()
    requested = _counted_before(recording.requests, len(recording.events), is_request=True)
    if recording.controls:
        sent = _counted_before(recording.controls, len(recording.events))
        gates = [controls + requests for controls, requests in zip(sent, requested, strict=True)]
        return gates[:-1], gates[-1]
    answers: dict[str, int] = {}
    inferred: list[tuple[Gate, ...]] = []
    for line, requests in zip(recording.events, requested, strict=False):
        wanted = answered_control(line.event)
        if wanted is None:
            inferred.append(requests)
            continue
        answers[wanted] = answers.get(wanted, 0) + 1
        inferred.append((Gate(control_type=wanted, count=answers[wanted]), *requests))
    return inferred, requested[-1]


def _counted_before(
    placed: Sequence[ControlAt | RequestAt], events: int, *, is_request: bool = False
) -> list[tuple[Gate, ...]]:
    """For each event index and the close (index `events`): the controls or requests of each
    type the recording has before it, as gates."""
    counts: dict[str, int] = {}
    lines = iter(placed)
    line = next(lines, None)
    gates: list[tuple[Gate, ...]] = []
    for index in range(events + 1):
        while line is not None and line.after_events <= index:
            kind = str(_what(line).get("type"))
            counts[kind] = counts.get(kind, 0) + 1
            line = next(lines, None)
        gates.append(
            tuple(
                Gate(control_type=kind, count=count, is_request=is_request)
                for kind, count in sorted(counts.items())
            )
        )
    return gates


def _what(placed: ControlAt | RequestAt) -> dict[str, Any]:
    return placed.line.control if isinstance(placed, ControlAt) else placed.line.request
