"""The call log: a call's story as ordered entries, projected from its durable log.

The projection folds the session's logged inputs, in the order they were applied, through the
same transitions the workers ran (`pipeline.transitions.apply`) and turns what each one did into
entries, so the log reads the same after any crash and never says what the call did not do:

call.started     the sideband first connected                {call_id, model, agent, and for a phone
                                                              call: medium, caller, dialled,
                                                              route_id}
turn.user        the caller's words, spoken or typed          {text, item_id, typed}
turn.agent       what the agent said, once its response ended {text, item_id, response_id,
                                                              interrupted, latency_ms, heard_ms,
                                                              heard: {switchboard_ms, provider_ms}}
tool.call        a function call taken up or refused          {call_id, name, arguments, refused?}
tool.result      a tool body's outcome                        {call_id, status, error, elapsed_ms}
prompt.changed   a block of the instructions was set         {name, hash, chars, changed}
tools.changed    the tools offered changed                    {tools}
call.line        the line was held, or given back             {held}
attention.requested  the caller waits for a person            {reason, wait_s, by: "app" |
                                                              "caller" (a key for a person)}
attention.answered   once per request: a person came, or not  {ok, by, error?}
supervisor.said|whispered|took_over|released|ended|transferred  a person acted {by, …}
call.transferred the provider's answer to a transfer          {to, ok, error}
call.key         a keypad press on a phone call (DTMF)        {key} ("•" for a digit of a number
                                                              keyed in: see docs/privacy.md)
consent.declined the caller declined recording               {by: "key" | "model"}
call.silence     the caller said nothing for the idle timeout {count}
error            a failure, or an error the provider reported {code, message}
call.ended       last, exactly once (what comes after the end   {reason, ended_by, duration_s,
                 is in the session record, not the story)      code (a failure)}; `reason` is the
                                                              record's `end_reason` (docs/api.md)

`seq` numbers the entries from 1 in that order; a follower asks for those after the last it saw.

An agent turn's `latency_ms` is Switchboard's own hop: the caller's final words reaching the
gateway to the provider's `response.created` for the response they caused. `heard_ms` is what the
caller waited: the end of their speech to the first audio of the answer (`pipeline.call.heard`),
split into `heard.switchboard_ms` (that hop) and `heard.provider_ms` (the rest); both null when
nobody's speech was answered (a greeting, typed words) or its ends were not seen. On Realtime the
gateway stamps the two moments on the answer's `response.done`; on Live they are the call's own
timeline, the caller's last words' end to the agent's next words' start; Switchboard's share is the
wait up to where the commentary it sent took its place on the timeline, when the agent's words
began there (a turn the model takes itself, an acknowledgement included, is none of its).

A Live call reads the same. Its transcript is written down in pieces (`pipeline.live`), so the
consecutive pieces of one speaker without a pause between them are one `turn.user` or
`turn.agent` entry, written when the other speaker (or anything else) comes next; its delegations
are `tool.call` / `tool.result` entries, named after the handler that ran them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pipeline.call.errors import MalformedFrame, SwitchboardError
from pipeline.call.heard import UNHEARD, HeardWait, split, summary, waited_ms
from pipeline.call.story import AnswerPlaced, ResponseBegun, ResponseEnded, SpokenPiece, StoryMark
from pipeline.dialects import capabilities_of, dialect_of, parse_inbound
from pipeline.platform.timestamps import rfc3339
from pipeline.session.ending import current_name
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import (
    LogEntry,
    PersistTranscript,
    RecordIncident,
    RefuseToolStep,
    RequestToolStep,
    Step,
)
from pipeline.session.wire import (
    AdmissionFailed,
    InboundEvent,
    ProviderError,
    SidebandConnected,
    TextInjected,
    ToolFinished,
)
from pipeline.transitions import apply

EndedBy = Literal["caller", "agent", "supervisor", "app", "platform"]

# Who ended a call that ended normally, by its end reason (docs/api.md, "Endings"); any other
# reason came with an end request from the app (the API's `end`, whose reason the app chooses).
_ENDED_BY: dict[str, EndedBy] = {
    "caller_hung_up": "caller",
    "agent_hung_up": "agent",
    "supervisor_ended": "supervisor",
    "transferred": "supervisor",
    "agent_transferred": "agent",
    "caller_silent": "agent",
    "caller_pressed_end": "caller",
    "max_duration": "platform",
    "usage_budget_reached": "platform",
    "provider_session_expired": "platform",
    "provider_content_closed": "platform",
}


class CallLogEntry(BaseModel):
    """One entry of the call log."""

    model_config = ConfigDict(frozen=True)

    seq: int
    at: str
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True)
class LoggedInput:
    """One row of a session's durable log, as the projection reads it."""

    received_at: float
    disposition: str
    generation: int
    payload: dict[str, Any]


def ended_by(phase: Phase, end_reason: str | None) -> EndedBy | None:
    """Who ended a finished call (None while it is not over)."""
    if phase is Phase.FAILED:
        return "platform"
    if phase is not Phase.ENDED:
        return None
    return _ENDED_BY.get(current_name(end_reason) or "", "app")


@dataclass
class _Piece:
    """A transcript piece on its way into the log (a provider that writes its transcript down in
    pieces): merged with the next piece of the same speaker that follows it without a pause."""

    at: float
    kind: str
    data: dict[str, Any]
    end_ms: int
    joins_within_ms: int

    def joins(self, other: _Piece, start_ms: int) -> bool:
        return self.kind == other.kind and start_ms - self.end_ms < self.joins_within_ms

    def merged(self, other: _Piece) -> _Piece:
        text = " ".join(f"{self.data['text']} {other.data['text']}".split())
        return _Piece(self.at, self.kind, {**self.data, "text": text}, other.end_ms, self.joins_within_ms)


_Raw = tuple[float, str, dict[str, Any]]


def erased_log(
    phase: Phase, end_reason: str | None, started_at: float, ended_at: float, because: str
) -> list[CallLogEntry]:
    """The call log of a session whose content was erased: its story went with it (the logged
    payloads are gone); how it ended stays, as its one entry, marked `erased` with why."""
    data = {**_end_data(phase, end_reason, round(ended_at - started_at, 1)), "erased": because}
    return [_Projection()._entry(ended_at, "call.ended", data)]


def _end_data(phase: Phase, end_reason: str | None, duration_s: float) -> dict[str, Any]:
    """`call.ended`'s data: its reason is the record's `end_reason`, word for word (a failure's
    too, which `code` repeats for the readers that look for it there)."""
    reason = current_name(end_reason) or ""
    data: dict[str, Any] = {
        "reason": reason,
        "ended_by": ended_by(phase, end_reason),
        "duration_s": duration_s,
    }
    if phase is Phase.FAILED:
        data["code"] = reason
    return data


def project(logged: Iterable[LoggedInput], after: int = 0) -> list[CallLogEntry]:
    """The call log of a session from its logged inputs in applied order; only the entries
    numbered above `after`."""
    return [entry for entry in _Projection().entries(logged) if entry.seq > after]


class _Projection:
    def __init__(self) -> None:
        self.state = SessionState()
        self.count = 0
        self.started_at: float | None = None
        # When each caller input was heard, for the latency of the response that answers it.
        self.heard_at: dict[str, float] = {}
        # The agent's words of each response, held until the response ends (interrupted or not):
        # (when it was said, the entry's data).
        self.said: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        self.latency_ms: dict[str, int] = {}
        # Where the caller's last words ended on the call's timeline, while no agent words have
        # come since (a provider that writes its transcript down in pieces), and where the last
        # words Switchboard sent the model to say were placed since.
        self.caller_ended_ms: int | None = None
        self.answer_placed_ms: int | None = None

    def entries(self, logged: Iterable[LoggedInput]) -> Iterator[CallLogEntry]:
        held: _Piece | None = None
        for at, kind, data, spoken in self._raw(logged):
            if spoken is not None:
                piece = _Piece(at, kind, data, spoken.end_ms, spoken.joins_within_ms)
                if held is not None and held.joins(piece, spoken.start_ms):
                    held = held.merged(piece)
                    continue
                if held is not None:
                    yield self._entry(held.at, held.kind, held.data)
                held = piece
                continue
            if held is not None:
                yield self._entry(held.at, held.kind, held.data)
                held = None
            yield self._entry(at, kind, data)
        # A piece still held is the turn still being spoken: written when whatever follows it comes
        # (so an entry, once numbered, never changes).

    def _raw(
        self, logged: Iterable[LoggedInput]
    ) -> Iterator[tuple[float, str, dict[str, Any], SpokenPiece | None]]:
        """The entries in order, unnumbered; a turn written down in pieces carries its piece."""
        for row in logged:
            if row.disposition not in ("applied", "late"):
                continue
            try:
                event = parse_inbound(row.payload)
            except MalformedFrame:
                continue
            before = self.state
            try:
                step = apply(before, event, row.generation)
            except SwitchboardError:
                continue  # a refused request is never logged; a hand-made row proves nothing
            self.state = step.state
            if before.is_terminal:
                # call.ended is last: what arrives after the end (a late caller line, a stale
                # close) stays in the session record, not in the story.
                continue
            mark = dialect_of(step.state).story_mark(event)
            spoken = mark if isinstance(mark, SpokenPiece) else None
            for at, kind, data in self._entries_of(before, event, step, mark, row.received_at):
                yield at, kind, data, spoken if kind in ("turn.user", "turn.agent") else None

    def _entry(self, at: float, kind: str, data: dict[str, Any]) -> CallLogEntry:
        self.count += 1
        return CallLogEntry(seq=self.count, at=rfc3339(at), kind=kind, data=data)

    def _entries_of(
        self, before: SessionState, event: InboundEvent, step: Step, mark: StoryMark | None, at: float
    ) -> Iterator[_Raw]:
        after = step.state
        if isinstance(event, SidebandConnected) and self.started_at is None and not before.is_terminal:
            self.started_at = at
            started: dict[str, Any] = {"call_id": event.call_id}
            if before.model.id:
                started["model"] = before.model.id  # absent for a session from before models per session
            if before.agent is not None:
                started["agent"] = before.agent.model_dump()
            phone = before.phone
            if phone is not None:
                # Who called and the number dialled, as the SIP headers said (untrusted).
                started.update(
                    medium="sip", caller=phone.caller, dialled=phone.dialled, route_id=phone.route_id
                )
                if phone.asserted_identity:
                    started["asserted_identity"] = phone.asserted_identity
            yield at, "call.started", started
        if isinstance(mark, AnswerPlaced):
            self.answer_placed_ms = mark.at_ms
        if isinstance(mark, ResponseBegun) and before.realtime.turn is not None:
            heard = self.heard_at.get(before.realtime.turn.context.input_item_id)
            if heard is not None:
                self.latency_ms[mark.response_id] = round((at - heard) * 1000)
        for effect in step.effects:
            if isinstance(effect, PersistTranscript) and effect.role == "user":
                self.heard_at.setdefault(effect.item_id, at)
                self.caller_ended_ms = mark.end_ms if isinstance(mark, SpokenPiece) else None
                self.answer_placed_ms = None
                data = {
                    "text": effect.text,
                    "item_id": effect.item_id,
                    "typed": isinstance(event, TextInjected),
                }
                yield at, "turn.user", data
            elif isinstance(effect, PersistTranscript) and not capabilities_of(before).responses:
                # Live has no responses to wait for: the agent's words are a turn as they come.
                data = {
                    "text": effect.text,
                    "item_id": effect.item_id,
                    "response_id": None,
                    "interrupted": False,
                    "latency_ms": None,
                    **self._answered_on_timeline(mark),
                }
                yield at, "turn.agent", data
            elif isinstance(effect, PersistTranscript):
                response_id = effect.response_id or ""
                data = {
                    "text": effect.text,
                    "item_id": effect.item_id,
                    "response_id": effect.response_id,
                    "interrupted": False,
                    "latency_ms": self.latency_ms.get(response_id),
                    **UNHEARD,
                }
                self.said.setdefault(response_id, []).append((at, data))
            elif isinstance(effect, RequestToolStep | RefuseToolStep):
                data = {"call_id": effect.call_id, "name": effect.name, "arguments": effect.arguments}
                if isinstance(effect, RefuseToolStep):
                    data["refused"] = effect.code
                yield at, "tool.call", data
            elif isinstance(effect, LogEntry):
                yield at, effect.kind, effect.data
            elif isinstance(effect, RecordIncident) and effect.severity == "error":
                yield at, "error", {"code": effect.code, "message": effect.summary}
        if isinstance(event, ToolFinished):
            outcome = event.outcome
            data = {
                "call_id": event.call_id,
                "status": outcome.get("status"),
                "error": outcome.get("error"),
                "elapsed_ms": outcome.get("elapsed_ms"),
            }
            yield at, "tool.result", data
        if isinstance(event, ProviderError):
            error = {"code": event.error.code or event.error.type, "message": event.error.message}
            yield at, "error", error
        if isinstance(mark, ResponseEnded):
            yield from self._release(mark.response_id, mark.interrupted, mark.heard)
        if after.is_terminal and not before.is_terminal:
            for response_id in list(self.said):
                yield from self._release(response_id, interrupted=True)
            yield self._ended(after, event, at)

    def _release(self, response_id: str, interrupted: bool, heard: HeardWait | None = None) -> Iterator[_Raw]:
        """The agent's words of a response that ended, in the log at the moment it ended (a
        follower never sees an entry appear before one it has seen); the first of them carries
        the caller's wait for it, when it answered their speech."""
        for index, (at, data) in enumerate(self.said.pop(response_id, [])):
            released = {**data, "interrupted": interrupted}
            if index == 0 and heard is not None:
                waited = split(waited_ms(heard.speech_ended_at, heard.first_audio_at), data["latency_ms"])
                if waited is not None:
                    released.update(waited.as_log())
            yield at, "turn.agent", released

    def _answered_on_timeline(self, mark: StoryMark | None) -> dict[str, Any]:
        """What the caller waited for agent words written down in pieces: from the end of their
        last words to the start of these, when these are the first since. Switchboard's share is
        the wait up to where its answer (a commentary) took its place on the timeline, when these
        words began there; a turn the model took itself was none of Switchboard's."""
        ended, self.caller_ended_ms = self.caller_ended_ms, None
        placed, self.answer_placed_ms = self.answer_placed_ms, None
        if ended is None or not isinstance(mark, SpokenPiece):
            return dict(UNHEARD)
        hop = placed - ended if placed is not None and ended <= placed <= mark.start_ms else 0
        waited = split(waited_ms(ended, mark.start_ms, per_second=1000), hop)
        return waited.as_log() if waited is not None else dict(UNHEARD)

    def _ended(self, state: SessionState, event: InboundEvent, at: float) -> _Raw:
        duration_s = round(at - self.started_at, 1) if self.started_at is not None else 0.0
        data = _end_data(state.phase, state.end_reason, duration_s)
        if isinstance(event, AdmissionFailed):
            data["detail"] = event.detail
        return at, "call.ended", data


def heard_latency(entries: Iterable[CallLogEntry]) -> dict[str, Any]:
    """A call's heard latency over its agent turns (`turn.agent.heard_ms`): `p50_ms`, `p95_ms`
    and the number of `turns` measured (the session record's and the end-of-call report's)."""
    return summary(entry.data.get("heard_ms") for entry in entries if entry.kind == "turn.agent")
