"""`switchboard sessions export ID`: a stored session written as a recording, so a call from
production replays on a laptop (`switchboard replay`, or the simulator's playback).

The header carries the session spec the session was created with, mapped back from its first
logged input (`switchboard.session_created`): the instructions, the names of its tools, its limits.
The events are the provider's, from the durable log in seq order — the gateway's numbering, which
is the order the provider sent them in — each at its offset from the first numbered event (the
sideband's attach). Host inputs (`switchboard.*`) are Switchboard's own and are left out — a replay
makes its own — but the requests an app or a person made of the session (an app's say, an end, a
supervisor's verb: `switchboard.requests`), which nothing in a replay would make: each is written
as a `request` line at its place, and `switchboard replay` makes it again there. The controls the
session sent are written as `control` lines, so the export replays closed loop to them.

What the log never held cannot be exported: the events Switchboard does not decide on (deltas,
audio buffer events) were never stored. A Live call is the exception that proves it: its
transcript deltas were written down as `switchboard.live_transcript` events holding every
fragment (its event id, its place on the timeline, its words), so they are exported as the
deltas the provider sent, each at its word's end on the session timeline, between what came
before it and the moment its piece was logged (the fragments' own arrival times were not
kept). Its header says `"provider": "live"` and names its delegation handler.
"""

from __future__ import annotations

import bisect
import json
import sys
from typing import Any, TextIO

from pydantic import ValidationError

from pipeline.api.requests import LiveSpec, ReasoningSpec, SessionLimits, SessionSpec, TranscriptionSpec
from pipeline.call.errors import SessionNotFound
from pipeline.live.events import LIVE_TRANSCRIPT_TYPE, LiveTranscript
from pipeline.live.frames import AGENT_TRANSCRIPT_TYPE, CALLER_TRANSCRIPT_TYPE
from pipeline.platform.timestamps import epoch_seconds
from pipeline.privacy.detect import redact
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.privacy.sealing import is_sealed
from pipeline.records.evals import function_calls
from pipeline.session.timeline import Speaker
from pipeline.session.wire import ArrivedLate, SessionCreated, SidebandClosed
from simulator.recording import (
    CloseFrame,
    ControlAt,
    RecordedClose,
    RecordedControl,
    RecordedEvent,
    RecordedRequest,
    Recording,
    RecordingHeader,
    RequestAt,
    recording_lines,
)
from switchboard.requests import as_recorded, is_request
from switchboard.services import Services

# The log's kinds, as the wire schemas name them.
CREATED = SessionCreated.model_fields["type"].default
CLOSED = SidebandClosed.model_fields["type"].default
ARRIVED_LATE = ArrivedLate.model_fields["type"].default
HOST_PREFIX = "switchboard."
# The limits a Live session has.
LIVE_LIMITS = frozenset({"max_session_seconds", "usage_budget_seconds"})

# A close the connection ended without a frame (1005, 1006, 1015) cannot be sent again; a replay
# closes such a sideband as an internal error, which a host also takes for "not a hangup".
DROPPED_CLOSE_CODE = 1011


def run_export(services: Services, session_id: str, out: TextIO = sys.stdout) -> int:
    """Print the recording of a stored session; exit 1 when there is no such session."""
    record = _stored(services, session_id, "there is nothing to replay")
    if record is None:
        return 1
    try:
        recording, unsaid = session_recording(record)
    except ValueError as error:
        print(f"switchboard sessions export: {session_id}: {error}", file=sys.stderr)
        return 1
    for note in unsaid:
        print(f"switchboard sessions export: {session_id}: {note}", file=sys.stderr)
    for line in recording_lines(recording):
        out.write(line + "\n")
    return 0


def _stored(services: Services, session_id: str, erased: str) -> dict[str, Any] | None:
    """A stored session's record with its log, or None once `sessions export` has said why not:
    there is no such session, or its content was erased."""
    from models.db import connect
    from models.records import session_record

    connect(services.database_url)
    try:
        record = session_record(session_id, with_events=True)
    except SessionNotFound as error:
        print(f"switchboard sessions export: {error}", file=sys.stderr)
        return None
    if record.get("erased_at"):
        print(
            f"switchboard sessions export: {session_id}: its content was erased"
            f" ({record['erased_because']}, {record['erased_at']}): {erased}",
            file=sys.stderr,
        )
        return None
    return record


def session_recording(record: dict[str, Any]) -> tuple[Recording, list[str]]:
    """The recording of a session record read with its log, and a note for each part of its
    spec that a `POST /v1/sessions` body cannot say (the replay then uses its own default)."""
    created = next((event["payload"] for event in record["log"] if event["kind"] == CREATED), None)
    if created is None:
        raise ValueError(f"the log has no {CREATED} input: its session spec is unknown")
    spec, unsaid = session_spec_of(created)
    sequenced, close = _provider_lines(record["log"])
    events = [line for _seq, line in sequenced]
    controls = host_controls(record["log"], events)
    requests = host_requests(record["log"], sequenced)
    if close is not None:
        # The sideband closed once the host had sent what it sent and been asked what it was
        # asked: a control decided after the provider's close is written before the close line,
        # so the close waits for it, and a line never goes back in time.
        latest = max([c.line.t_ms for c in controls] + [r.line.t_ms for r in requests], default=close.t_ms)
        close = close.model_copy(update={"t_ms": max(close.t_ms, latest)})
    header = RecordingHeader(
        name=record["id"],
        instructions=spec.instructions,
        description=_description(record, created),
        # A Realtime session's spec says nothing of its provider (the default), so its
        # recording reads as it did before Live existed.
        session=spec.model_dump(mode="json", exclude_none=True, exclude=_unsaid_defaults(spec)),
    )
    recording = Recording(header=header, events=events, close=close, controls=controls, requests=requests)
    return recording, unsaid


def _unsaid_defaults(spec: SessionSpec) -> set[str]:
    """What a recording's spec leaves out because it is the default, so that a recording
    reads as it did before the field existed: a Realtime session's provider, a session's
    privacy policy when it asks for nothing beyond what is always redacted, full storage, tools
    one at a time."""
    unsaid = set()
    if not spec.tools_in_parallel:
        unsaid.add("tools_in_parallel")
    if spec.provider == "realtime":
        unsaid.add("provider")
    if spec.privacy == PrivacyPolicy():
        unsaid.add("privacy")
    if spec.storage == "full":
        unsaid.add("storage")
    return unsaid


def session_spec_of(created: dict[str, Any]) -> tuple[SessionSpec, list[str]]:
    """The `POST /v1/sessions` body a session was created with, from its creation input: the
    instructions, the names of its provider tool definitions, and its limits as they were
    resolved (so a replay runs under them, not under the replaying deployment's defaults)."""
    limits: dict[str, Any] = {}
    unsaid = []
    for name, value in (created.get("limits") or {}).items():
        if value is None:
            continue
        try:
            SessionLimits.model_validate({name: value})
        except ValidationError:
            # A deployment default may lie beyond what the API lets a caller ask for.
            unsaid.append(f"limits.{name} = {value!r} cannot be said in a session spec; left out")
            continue
        limits[name] = value
    live = created.get("live") if created.get("provider") == "live" else None
    if live is not None:
        # A Live model has no output tokens to cap, no context Switchboard compacts and no
        # tokens to count: only the ceiling and a budget of seconds mean something there.
        limits = {name: value for name, value in limits.items() if name in LIVE_LIMITS}
    live_spec = None
    if live is not None:
        delay = live.get("acknowledgement_delay_ms", 400)
        live_spec = LiveSpec(delegation=live.get("handler"), acknowledgement_delay_ms=delay)
    spec = SessionSpec(
        instructions=created["instructions"],
        tools=tuple(tool["name"] for tool in created.get("tools") or ()),
        limits=SessionLimits.model_validate(limits),
        provider="live" if created.get("provider") == "live" else "realtime",
        live=live_spec,
        privacy=PrivacyPolicy.model_validate(created.get("privacy") or {}),
        storage="metadata" if created.get("storage") == "metadata" else "full",
        **_model_choice(created.get("model") or {}),
    )
    return spec, unsaid


def _model_choice(chosen: dict[str, Any]) -> dict[str, Any]:
    """The model fields of a session spec, from what its creation chose (none for a session
    created before models were chosen per session: the replay then uses its own defaults)."""
    if not chosen.get("id"):
        return {}
    fields: dict[str, Any] = {"model": chosen["id"], "voice": chosen.get("voice")}
    if chosen.get("reasoning_effort"):
        fields["reasoning"] = ReasoningSpec(effort=chosen["reasoning_effort"])
    transcription = {
        name: value for name, value in (chosen.get("transcription") or {}).items() if value is not None
    }
    if transcription:
        fields["transcription"] = TranscriptionSpec.model_validate(transcription)
    fields["tools_in_parallel"] = bool(chosen.get("parallel_tool_calls"))
    return fields


def provider_events(log: list[dict[str, Any]]) -> tuple[list[RecordedEvent], RecordedClose | None]:
    """The provider's events of a session log in seq order, with their offsets from the first
    numbered event, and the close of the sideband when the log ends with one
    (`_provider_lines`)."""
    sequenced, close = _provider_lines(log)
    return [line for _seq, line in sequenced], close


def _provider_lines(
    log: list[dict[str, Any]],
) -> tuple[list[tuple[int, RecordedEvent]], RecordedClose | None]:
    """The provider's events with the seq each came from (a Live transcript piece gives several).

    Every disposition is kept but `lost`, because a recording is what the provider sent:
    - `duplicate`: the provider event reached a gateway twice (under two seqs); it really went
      over the wire twice, and a replay shows whether it is still applied once.
    - `late`: sent after the session ended or on a superseded sideband; sent all the same.
    - `pending`: received and waiting behind a gap that never closed.
    - `lost`: a marker Switchboard wrote for a seq that never reached a worker, not a provider
      event. If the event turned up afterwards its row says `switchboard.arrived_late`, and the
      provider's event inside it is exported at its seq, where the provider sent it.
    """
    # An input a worker applied itself (a timer, an admission) has no seq: not the provider's.
    numbered = sorted(
        (event for event in log if event.get("seq") is not None), key=lambda event: event["seq"]
    )
    if not numbered:
        return [], None
    attached_at = _attached_at(numbered)
    events: list[tuple[int, RecordedEvent]] = []
    closed: dict[str, Any] | None = None
    last_ms = 0.0
    for entry in numbered:
        payload = entry["payload"]
        kind = str(payload.get("type", ""))
        # Offsets never go back: events numbered by two gateways (a takeover) carry two clocks,
        # and a recording is played in file order.
        offset_ms = max(last_ms, _offset_ms(epoch_seconds(entry["received_at"]), attached_at))
        if kind == ARRIVED_LATE:
            # The row's time is when its seq was declared lost, not when the event came.
            event, offset_ms = payload["event"], last_ms
        elif kind == LIVE_TRANSCRIPT_TYPE:
            for delta in _deltas(payload):
                # A delta is sent as its word ends, on a timeline that starts about when the
                # sideband attaches: its own end, but never before what was sent before it nor
                # after the piece was logged.
                last_ms = min(offset_ms, max(last_ms, float(delta["end_ms"])))
                events.append((entry["seq"], RecordedEvent(t_ms=last_ms, event=delta)))
            last_ms, closed = offset_ms, None
            continue
        elif kind == CLOSED:
            closed = {**payload, "t_ms": offset_ms}
            continue
        elif kind.startswith(HOST_PREFIX):
            continue
        else:
            event = payload
            closed = None
        events.append((entry["seq"], RecordedEvent(t_ms=offset_ms, event=_as_sent(event))))
        last_ms = offset_ms
    return events, _close_line(closed)


def host_controls(log: list[dict[str, Any]], events: list[RecordedEvent]) -> list[ControlAt]:
    """Every control the session sent, in the order it was applied, each placed after the
    provider events received before it was decided (its input's `applied_at`, on the clock the
    events' offsets are on): what closed-loop playback keeps a replay in step with."""
    numbered = sorted(
        (event for event in log if event.get("seq") is not None), key=lambda event: event["seq"]
    )
    if not numbered or not events:
        return []
    # The same origin as the events' offsets (provider_events).
    attached_at = _attached_at(numbered)
    offsets = [line.t_ms for line in events]
    placed: list[ControlAt] = []
    for entry in sorted(log, key=lambda event: event.get("applied_order") or 0):
        sent = [item["control"] for item in entry.get("controls") or [] if item.get("kind") == "control"]
        if not sent or entry.get("applied_at") is None:
            continue
        offset_ms = _offset_ms(epoch_seconds(entry["applied_at"]), attached_at)
        # Never before a control already placed: they were sent in this order.
        after = max(bisect.bisect_right(offsets, offset_ms), placed[-1].after_events if placed else 0)
        t_ms = max(offset_ms, placed[-1].line.t_ms if placed else 0.0)
        placed += [ControlAt(after_events=after, line=RecordedControl(t_ms=t_ms, control=c)) for c in sent]
    return placed


def host_requests(log: list[dict[str, Any]], sequenced: list[tuple[int, RecordedEvent]]) -> list[RequestAt]:
    """Every request an app or a person made of the session (`switchboard.requests`), in seq
    order, each placed after the provider events numbered before it: `switchboard replay` makes
    it again there, and closed-loop playback holds the events after it until it has. Its time is
    its own offset, kept between those of the events around it."""
    numbered = sorted(
        (event for event in log if event.get("seq") is not None), key=lambda event: event["seq"]
    )
    if not numbered:
        return []
    attached_at = _attached_at(numbered)
    seqs = [seq for seq, _line in sequenced]
    placed: list[RequestAt] = []
    for entry in numbered:
        if not is_request(entry["payload"]):
            continue
        after = bisect.bisect_left(seqs, entry["seq"])
        earliest = max(
            sequenced[after - 1][1].t_ms if after else 0.0, placed[-1].line.t_ms if placed else 0.0
        )
        t_ms = max(earliest, _offset_ms(epoch_seconds(entry["received_at"]), attached_at))
        if after < len(sequenced):
            t_ms = max(earliest, min(t_ms, sequenced[after][1].t_ms))
        line = RecordedRequest(t_ms=t_ms, request=as_recorded(entry["payload"]))
        placed.append(RequestAt(after_events=after, line=line))
    return placed


def _attached_at(numbered: list[dict[str, Any]]) -> float:
    """When the sideband attached: the first numbered event's time (a row that arrived late holds
    the time its seq was declared lost, so it cannot be the start)."""
    on_time = [event for event in numbered if event["payload"].get("type") != ARRIVED_LATE]
    return epoch_seconds((on_time or numbered)[0]["received_at"])


def _deltas(piece: dict[str, Any]) -> list[dict[str, Any]]:
    """The transcript deltas a durable Live transcript was written down from, as sent."""
    written = LiveTranscript.model_validate(piece)
    kind = CALLER_TRANSCRIPT_TYPE if written.speaker is Speaker.CALLER else AGENT_TRANSCRIPT_TYPE
    return [
        {
            "type": kind,
            "event_id": fragment.event_id,
            "start_ms": fragment.start_ms,
            "end_ms": fragment.end_ms,
            "delta": fragment.text,
        }
        for fragment in written.fragments
    ]


def _close_line(closed: dict[str, Any] | None) -> RecordedClose | None:
    """The close after the provider's last event: the sideband stays open in a replay as long as
    it did in the call, so what Switchboard did meanwhile (a tool's output, a last response) has
    the same time to happen. A close Switchboard made itself is written as a normal closure —
    the replayed session makes its own."""
    if closed is None:
        return None
    code = closed.get("code")
    if closed.get("by_host") or code is None:
        frame = CloseFrame()
    elif _is_sendable(code):
        frame = CloseFrame(code=code, reason=str(closed.get("reason") or ""))
    else:
        frame = CloseFrame(code=DROPPED_CLOSE_CODE, reason=f"the connection dropped ({code})")
    return RecordedClose(t_ms=closed["t_ms"], close=frame)


def _is_sendable(code: int) -> bool:
    """Whether a close frame may carry this code (RFC 6455 7.4: 1005, 1006 and 1015 only
    report a connection that ended without one)."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


# What the gateway adds to a provider's event, by type: its own measurements, which a replaying
# gateway makes afresh (what was playing at a speech_started; the caller's wait a response.done
# answered).
_GATEWAY_FIELDS = {"input_audio_buffer.speech_started": "playback", "response.done": "heard"}


def _as_sent(event: dict[str, Any]) -> dict[str, Any]:
    """The event as the provider sent it, without what the gateway added (a provider's own
    `playback` or `heard` is never trusted, so none was the provider's)."""
    added = _GATEWAY_FIELDS.get(str(event.get("type")))
    if added is not None and added in event:
        return {key: value for key, value in event.items() if key != added}
    return event


def _offset_ms(received_at: float, attached_at: float) -> float:
    return round(max(0.0, (received_at - attached_at) * 1000), 1)


def _description(record: dict[str, Any], created: dict[str, Any]) -> str:
    ending = record["status"] + (f", {record['end_reason']}" if record["end_reason"] else "")
    versions = created.get("tool_versions") or {}
    tools = ", ".join(f"{name} {version}" for name, version in versions.items()) or "none"
    live = created.get("live") if created.get("provider") == "live" else None
    if live is not None:
        handler = f"{live.get('handler')} {live.get('handler_version')}" if live.get("handler") else "none"
        tools = f"none (Live; delegation handler: {handler})"
    return (
        f"Exported from session {record['id']} ({ending}), created {record['created_at']}; "
        f"tools: {tools}. Only the events Switchboard logged."
    )


# ── as an eval case ──────────────────────────────────────────────────────────────────


# The endings a run of a case reproduces: its caller hangs up after the last line, and the model
# ends the call only if its scripted answers say so. An end the app, a person or the platform made
# (`app_ended`, a supervisor's, a limit's) is no run's, and expected of one it would always fail.
REPRODUCED_ENDINGS = frozenset({"caller_hung_up", "agent_hung_up"})


def case_of(record: dict[str, Any]) -> dict[str, Any]:
    """A stored call as an eval case (pipeline/records/evals.py): its session spec, the caller's lines,
    the model's answers as the simulator's script (what it said, the functions it called), and
    what the call did as the expectations — each tool called with its arguments, and how the call
    ended when a run can end so (`REPRODUCED_ENDINGS`). Every text is redacted under the session's
    privacy policy (cards and SSNs always), and an argument that was sealed is expected present,
    not equal."""
    created = next((event["payload"] for event in record["log"] if event["kind"] == CREATED), None)
    if created is None:
        raise ValueError(f"the log has no {CREATED} input: its session spec is unknown")
    spec, _unsaid = session_spec_of(created)
    kinds = spec.privacy.kinds

    def clean(text: str) -> str:
        return redact(text, kinds)

    caller = [clean(item["text"]) for item in record["transcript"] if item["role"] == "user" and item["text"]]
    if not caller:
        raise ValueError("the caller said nothing: there is no case to make of it")
    model: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    for call_or_line in _answers(record):
        if "function_call" in call_or_line:
            name, arguments = call_or_line["function_call"]
            sealed = sorted(key for key, value in arguments.items() if is_sealed(value))
            shown = {key: value for key, value in arguments.items() if key not in sealed}
            model.append({"function_call": {"name": name, "arguments": _cleaned(shown, clean)}})
            if sealed:
                schema = {"type": "object", "required": sorted(arguments)}
                tools.append({"name": name, "arguments_schema": schema})
            else:
                tools.append({"name": name, "arguments": _cleaned(arguments, clean)})
        else:
            model.append({"say": clean(call_or_line["say"])})
    expect: dict[str, Any] = {"tools": tools}
    description = f"made from the stored call {record['id']}"
    ending = record.get("end_reason")
    if ending in REPRODUCED_ENDINGS:
        expect["ends"] = ending
    elif ending:
        description += f"; it ended {ending}, which a run of the case does not, so no end is expected"
    return {
        "case": {"name": record["id"], "description": description},
        "session": spec.model_dump(mode="json", exclude_none=True, exclude=_unsaid_defaults(spec)),
        "caller": caller,
        "model": model,
        "expect": expect,
    }


def _answers(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's answers in the order the log has them: each function it called, each line
    it said (an answer's final transcript or text)."""
    answers: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in sorted(record["log"], key=lambda event: event.get("applied_order") or 0):
        payload = entry.get("payload") or {}
        kind = payload.get("type")
        if kind == "response.function_call_arguments.done" and payload.get("call_id") not in seen:
            seen.add(str(payload.get("call_id")))
            arguments = function_calls([entry])[0].arguments
            answers.append(
                {"function_call": (payload["name"], arguments if isinstance(arguments, dict) else {})}
            )
        elif kind in ("response.output_audio_transcript.done", "response.output_text.done"):
            text = payload.get("transcript") if kind.endswith("transcript.done") else payload.get("text")
            if isinstance(text, str) and text:
                answers.append({"say": text})
    return answers


def _cleaned(value: Any, clean: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {key: _cleaned(item, clean) for key, item in value.items()}
    if isinstance(value, list):
        return [_cleaned(item, clean) for item in value]
    return value


def run_export_case(services: Services, session_id: str, out: TextIO = sys.stdout) -> int:
    """Print a stored session as an eval case; exit 1 when there is no such session or case."""
    record = _stored(services, session_id, "there is no case to make of it")
    if record is None:
        return 1
    try:
        case = case_of(record)
    except ValueError as error:
        print(f"switchboard sessions export: {session_id}: {error}", file=sys.stderr)
        return 1
    out.write(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
    return 0
