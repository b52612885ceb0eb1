"""The line over random calls (hypothesis): holds, attentions, a supervisor's verbs (transfer
too, on a phone call), the app directing the agent, the caller's speech and typed text, tool
outcomes, compactions and timers in any order, with a small provider that answers the controls
the pipeline sends as a real one would. Whatever the order: at most one person holds the line, no
response is asked for on a closed line but a person's own words (or maintenance), every attention
is answered exactly once, `call.ended` closes the call log once, and every request is answered
exactly once. The checkers are tested on hand-made violations, so they cannot pass vacuously."""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.call.limits import DEFAULT_COMPACTION_INPUT_TOKENS
from pipeline.dialects import parse_inbound
from pipeline.realtime import compaction
from pipeline.realtime.controls import ResponseCancel, ResponseCreate, ResponseParams
from pipeline.realtime.turns import SUPERVISOR_METADATA
from pipeline.records.call_log import CallLogEntry, LoggedInput, project
from pipeline.session.state import SessionState
from pipeline.session.step import (
    AnswerRequest,
    CancelTimer,
    LogEntry,
    RunTool,
    ScheduleTimer,
    Step,
    TransferCall,
)
from pipeline.transitions import disposition_of
from tests.pipeline import events as ev
from tests.pipeline import line_events as op
from tests.pipeline.realtime.test_tool_properties import LOOKUP, _tool_finished

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)
PEOPLE = (op.SUPERVISOR, op.OTHER_SUPERVISOR)
ANSWER_STATUSES = frozenset({200, 202, 409, 422})
# The timers a call's own steps arm and this test fires (admission and the ceiling are not the
# line's concern).
FIRED_TIMERS = ("attention:", "response_deadline:", "tool_deadline:", "compaction_deadline:")
PROVIDER_DEADLINES = ("response_deadline:", "compaction_deadline:")
# Whole turns before the random part of a call that compacts: the last one leaves more items
# than a compaction keeps (pipeline.realtime.compaction.KEEP_RECENT_ITEMS), so a compaction starts.
COMPACTED_TURNS = 4

# What one step of a call may be. Repeated actions are drawn more often: the provider's, so
# that responses start, call the tool and finish between the operators' requests, and the
# supervisor's, so that a person takes and releases the line in most calls.
ACTIONS = (
    "provider_sends",
    "provider_sends",
    "provider_sends",
    "response_goes_on",
    "response_goes_on",
    "hold",
    "attention",
    "supervisor",
    "supervisor",
    "supervisor",
    "speech_started",
    "caller_speaks",
    "caller_types",
    "tool_finishes",
    "timer_fires",
    "app_directs",
    "transfer_finishes",
)
# What the active response does when it goes on; a tool call is drawn more often, because the
# caller's interruptions cut many responses before they get to call it.
MOVES = ("speaks", "calls_the_tool", "calls_the_tool", "finishes")
# Repeated verbs are drawn more often: taking and releasing the line is what the property is about.
VERBS = ("say", "whisper", "take_over", "take_over", "release", "release", "end", "transfer")
TRANSFER_TO = "tel:+14155550123"


@dataclass(frozen=True)
class Applied:
    """One input of the call, the state it was applied to, and what it decided."""

    raw: dict[str, Any]
    before: SessionState
    step: Step


@dataclass
class _Response:
    id: str
    metadata: dict[str, str] | None
    tools_allowed: bool
    calls: int = 0


@dataclass
class Provider:
    """A deterministic stand-in for the realtime provider. It starts a response for each
    `response.create` (or refuses it while another is active) and ends a cancelled one (or says
    none is active); the active response speaks, calls the tool or finishes when told to go on.
    What it sends is in flight until delivered, in order, so the host's controls can cross it."""

    in_flight: deque[dict[str, Any]] = field(default_factory=deque)
    active: _Response | None = None
    responses: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    calls: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def quiet(self) -> bool:
        """Nothing runs and nothing is in flight: all the provider will send has arrived."""
        return self.active is None and not self.in_flight

    def receive(self, controls: Iterable[Any]) -> None:
        for control in controls:
            if isinstance(control, ResponseCreate):
                self._create(control.response or ResponseParams())
            elif isinstance(control, ResponseCancel):
                self._cancel(control.response_id)

    def _create(self, params: ResponseParams) -> None:
        if params.conversation == "none":
            # Out of band (a compaction's maintenance): it blocks no spoken response, and it
            # writes its notes and finishes on its own.
            response_id = f"resp_{next(self.responses)}"
            metadata = dict(params.metadata) if params.metadata else None
            self.in_flight.extend(
                [
                    ev.response_created(response_id, metadata=metadata),
                    ev.assistant_text_final(
                        response_id, f"item_{response_id}_notes", "Caller wants a person."
                    ),
                    ev.response_done(response_id, metadata=metadata),
                ]
            )
            return
        if self.active is not None:
            self.in_flight.append(ev.provider_error("conversation_already_has_active_response"))
            return
        response_id = f"resp_{next(self.responses)}"
        metadata = dict(params.metadata) if params.metadata else None
        self.active = _Response(response_id, metadata, tools_allowed=params.tool_choice != "none")
        self.in_flight.append(ev.response_created(response_id, metadata=metadata))

    def _cancel(self, response_id: str | None) -> None:
        active = self.active
        if active is None or response_id not in (None, active.id):
            self.in_flight.append(ev.provider_error("response_cancel_not_active"))
            return
        self.in_flight.append(ev.response_done(active.id, "cancelled", metadata=active.metadata))
        self.active = None

    def go_on(self, move: str) -> None:
        """The active response sends its next event: it speaks, calls the tool (when it may,
        twice at most), or finishes."""
        active = self.active
        if active is None:
            return
        if move == "speaks":
            self.in_flight.append(ev.assistant_final(active.id, f"item_{active.id}_said", "One moment."))
        elif move == "calls_the_tool" and active.tools_allowed and active.calls < 2:
            active.calls += 1
            self.in_flight.append(ev.function_call(f"call_{next(self.calls)}", active.id))
        else:
            self.in_flight.append(ev.response_done(active.id, metadata=active.metadata))
            self.active = None

    def deliver(self) -> dict[str, Any] | None:
        return self.in_flight.popleft() if self.in_flight else None


@dataclass
class Call:
    """A call driven one input at a time: every input applied is kept with what it decided,
    the provider hears every control, and the timers and tool runs armed are remembered."""

    state: SessionState = field(default_factory=SessionState)
    applied: list[Applied] = field(default_factory=list)
    provider: Provider = field(default_factory=Provider)
    armed: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    transfers: list[str] = field(default_factory=list)
    items: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    app_requests: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def apply(self, raw: dict[str, Any]) -> None:
        step = ev.step_of(self.state, raw)
        self.applied.append(Applied(raw=raw, before=self.state, step=step))
        self.state = step.state
        self.provider.receive(step.controls)
        for effect in step.effects:
            if isinstance(effect, ScheduleTimer) and effect.name.startswith(FIRED_TIMERS):
                self.armed.append(effect.name)
            elif isinstance(effect, CancelTimer) and effect.name in self.armed:
                self.armed.remove(effect.name)
            elif isinstance(effect, RunTool):
                self.running.append(effect.call_id)
            elif isinstance(effect, TransferCall):
                self.transfers.append(effect.to)

    def due_timers(self) -> list[str]:
        """The armed timers that may fire now. A response's (or a compaction's) deadline is far
        longer than any response runs, so it fires only once the provider has sent all it will:
        then it finds the response done, or one that is never coming (a create refused, a
        cancel of nothing)."""
        quiet = self.provider.quiet
        return [name for name in self.armed if quiet or not name.startswith(PROVIDER_DEADLINES)]

    def converse(self) -> None:
        """One whole turn: the caller speaks, and the agent answers to the end of its response
        (what the provider sends after it, a maintenance response, is still in flight)."""
        self.apply(ev.user_final(self.item_id(), "Where is my order?"))
        self.provider.go_on("speaks")
        self.provider.go_on("finishes")
        while self.state.realtime.turn is not None and self.provider.in_flight:
            self.apply(self.provider.in_flight.popleft())

    def item_id(self) -> str:
        return f"item_U{next(self.items)}"

    def app_request(self, say: bool) -> dict[str, Any]:
        """The app directs the agent: say given words, or reply as told."""
        asked = {"request_id": f"app_req_{next(self.app_requests)}", "gateway_id": "gw1"}
        if say:
            return {"type": "switchboard.agent_say", "text": "Thanks for waiting.", **asked}
        return {"type": "switchboard.agent_reply", "instructions": "Ask how else to help.", **asked}


def _verb(name: str) -> dict[str, Any]:
    if name == "say":
        return {"type": "say", "text": "Hi, this is Dana from the team."}
    if name == "whisper":
        return {"type": "whisper", "text": "Offer the 10% discount."}
    if name == "end":
        return {"type": "end", "reason": "resolved by a person"}
    if name == "transfer":
        return {"type": "transfer", "to": TRANSFER_TO}
    return {"type": name}


def _typed(item_id: str) -> dict[str, Any]:
    return {"type": "switchboard.text_injected", "item_id": item_id, "text": "I typed this instead."}


def _act(call: Call, action: str, data: st.DataObject) -> None:
    """Apply one drawn action (one that finds nothing to do — no provider event, no tool, no
    timer — applies nothing)."""
    raw: dict[str, Any] | None
    if action == "provider_sends":
        raw = call.provider.deliver()
    elif action == "response_goes_on":
        call.provider.go_on(data.draw(st.sampled_from(MOVES)))
        raw = None
    elif action == "hold":
        raw = op.hold(data.draw(st.booleans()))
    elif action == "attention":
        raw = op.attention("wants a person", data.draw(st.sampled_from([0.5, 5.0, 30.0])))
    elif action == "supervisor":
        raw = op.supervisor(_verb(data.draw(st.sampled_from(VERBS))), by=data.draw(st.sampled_from(PEOPLE)))
    elif action == "speech_started":
        raw = ev.speech_started(call.item_id())
    elif action == "caller_speaks":
        raw = ev.user_final(call.item_id(), "Is anybody there?")
    elif action == "caller_types":
        raw = _typed(call.item_id())
    elif action == "tool_finishes" and call.running:
        raw = _tool_finished(call.running.pop(data.draw(st.integers(0, len(call.running) - 1))))
    elif action == "tool_finishes":
        raw = None
    elif action == "app_directs":
        raw = call.app_request(data.draw(st.booleans()))
    elif action == "transfer_finishes" and call.transfers:
        raw = op.transfer_finished(call.transfers.pop(0), ok=data.draw(st.booleans()), error="busy")
    elif action == "transfer_finishes":
        raw = None
    else:
        due = call.due_timers()
        raw = ev.timer_fired(data.draw(st.sampled_from(due))) if due else None
    if raw is not None:
        call.apply(raw)


def _ends() -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(
        [
            ev.end_requested(),
            {**ev.end_requested(), "request_id": "req_end", "gateway_id": "gw1"},
            ev.sideband_closed(1000),
        ]
    )


# ── the checkers ─────────────────────────────────────────────────────────────────────────


def _answers(step: Step) -> list[AnswerRequest]:
    return [effect for effect in step.effects if isinstance(effect, AnswerRequest)]


def _is_exempt(create: ResponseCreate) -> bool:
    """A person's own words, or a compaction's maintenance response: the responses a closed
    line allows."""
    metadata = create.response.metadata if create.response is not None else None
    return metadata == SUPERVISOR_METADATA or compaction.is_maintenance_metadata(metadata)


def line_violations(applied: list[Applied]) -> list[str]:
    """What broke the line's invariants over the inputs of one call, step by step (empty when
    nothing did)."""
    found: list[str] = []
    asked: list[str] = []
    answered: Counter[str] = Counter()
    requested_attentions = answered_attentions = 0
    for index, record in enumerate(applied):
        raw, before, step = record.raw, record.before, record.step
        after = step.state
        where = f"input {index} ({raw['type']})"
        verb = raw.get("verb", {}).get("type") if raw["type"] == "switchboard.supervisor" else None
        answers = _answers(step)
        statuses = [answer.status for answer in answers]

        # 1. At most one person holds the line.
        if before.taken_by != after.taken_by:
            if before.taken_by is None:
                took = (
                    after.taken_by is not None
                    and verb == "take_over"
                    and raw["by"]["id"] == after.taken_by.id
                )
                if not took or statuses != [200]:
                    found.append(f"{where}: the line went to {after.taken_by} without their take_over")
            elif after.taken_by is None:
                if verb != "release" or statuses != [200]:
                    found.append(f"{where}: {before.taken_by.id} lost the line without a release")
            else:
                found.append(f"{where}: the line passed from {before.taken_by.id} to {after.taken_by.id}")
        if verb == "take_over" and before.taken_by is not None and not before.is_terminal:
            codes = [answer.body.get("error", {}).get("code") for answer in answers]
            if statuses != [409] or codes != ["already_held"]:
                found.append(f"{where}: a second take_over was answered {statuses} {codes}")
            if after != before or step.controls or len(step.effects) != len(answers):
                found.append(f"{where}: a refused take_over changed the call")

        # 2. No response on a closed line but a person's words (or maintenance).
        if after.line_closed:
            for control in step.controls:
                if isinstance(control, ResponseCreate) and not _is_exempt(control):
                    found.append(f"{where}: response.create on a closed line ({control.response})")

        # 3, step by step: an attention waits exactly while one was asked and not yet answered.
        for effect in step.effects:
            if isinstance(effect, LogEntry) and effect.kind == "attention.requested":
                requested_attentions += 1
            elif isinstance(effect, LogEntry) and effect.kind == "attention.answered":
                answered_attentions += 1
        waiting = requested_attentions - answered_attentions
        if waiting != (1 if after.attention is not None else 0):
            found.append(
                f"{where}: {waiting} attentions unanswered while the state waits for {after.attention}"
            )

        # 5. Every request is answered once, when it is applied.
        request_id = raw.get("request_id")
        if request_id is not None:
            asked.append(request_id)
            own = [answer for answer in answers if answer.request_id == request_id]
            if len(own) != 1:
                found.append(f"{where}: request {request_id} was answered {len(own)} times by its step")
        for answer in answers:
            answered[answer.request_id] += 1
            if answer.status not in ANSWER_STATUSES:
                found.append(f"{where}: request {answer.request_id} was answered {answer.status}")
    for request_id in asked:
        if answered[request_id] != 1:
            found.append(f"request {request_id} was answered {answered[request_id]} times in all")
    unasked = set(answered) - set(asked)
    if unasked:
        found.append(f"answers to requests nobody made: {sorted(unasked)}")
    return found


def log_violations(entries: list[CallLogEntry]) -> list[str]:
    """What broke the call log's invariants of a call that ended (empty when nothing did)."""
    found: list[str] = []
    requested = answered = 0
    for entry in entries:
        if entry.kind == "attention.requested":
            requested += 1
        elif entry.kind == "attention.answered":
            answered += 1
        if requested - answered not in (0, 1):
            found.append(f"entry {entry.seq}: {requested} attentions requested, {answered} answered")
    if requested != answered:
        found.append(f"the call ended with {requested} attentions requested and {answered} answered")
    ends = [entry.seq for entry in entries if entry.kind == "call.ended"]
    if len(ends) != 1:
        found.append(f"call.ended appears {len(ends)} times")
    if not entries or entries[-1].kind != "call.ended":
        found.append(f"the last entry is {entries[-1].kind if entries else None}, not call.ended")
    return found


def call_log_of(applied: list[Applied]) -> list[CallLogEntry]:
    """The call log projected from the inputs as the durable log would keep them."""
    rows = [
        LoggedInput(
            received_at=1_700_000_000.0 + index,
            disposition=disposition_of(record.before, parse_inbound(record.raw), record.before.generation),
            generation=record.before.generation,
            payload=record.raw,
        )
        for index, record in enumerate(applied)
    ]
    return project(rows)


# ── the property ─────────────────────────────────────────────────────────────────────────


@PROPERTY_SETTINGS
@given(st.data())
def test_the_line_is_held_by_one_person_closed_to_the_model_and_every_request_answered(
    data: st.DataObject,
) -> None:
    """Whatever the operators, the caller, the tools and the timers do in whatever order, and the
    provider answers as it would, the line's invariants hold at every step and in the call log."""
    call = Call()
    # A phone call may be transferred; a WebRTC one is refused the transfer.
    medium = data.draw(st.sampled_from(["webrtc", "sip"]), label="medium")
    # A call with a low compaction threshold and some conversation behind it starts compacting
    # as the random part begins: its maintenance response runs while the line is held or taken.
    compacts = data.draw(st.booleans(), label="compacts")
    threshold = 100 if compacts else DEFAULT_COMPACTION_INPUT_TOKENS
    limits = {"max_output_tokens": 512, "max_session_seconds": 900, "compaction_input_tokens": threshold}
    for raw in ev.listening(tools=[LOOKUP], limits=limits):
        call.apply({**raw, "medium": medium} if raw["type"] == "switchboard.call_attached" else raw)
    for _ in range(COMPACTED_TURNS if compacts else 0):
        call.converse()
    for action in data.draw(st.lists(st.sampled_from(ACTIONS), min_size=20, max_size=80), label="actions"):
        _act(call, action, data)
    call.apply(data.draw(_ends(), label="end"))
    # What the provider had already sent arrives after the end (late, and out of the story).
    while call.provider.in_flight:
        call.apply(call.provider.in_flight.popleft())

    assert call.state.is_terminal
    assert line_violations(call.applied) == []
    assert log_violations(call_log_of(call.applied)) == []


# ── the checkers are not vacuous ─────────────────────────────────────────────────────────


def _record(before: SessionState, raw: dict[str, Any]) -> Applied:
    return Applied(raw=raw, before=before, step=ev.step_of(before, raw))


def _create(metadata: dict[str, str] | None) -> ResponseCreate:
    return ResponseCreate(response=ResponseParams(instructions="Answer the caller.", metadata=metadata))


def test_the_checker_reports_a_response_asked_for_on_a_held_line_but_not_a_persons_words() -> None:
    held = ev.state_after([*ev.listening(), op.hold()])
    heard = ev.user_final("item_U1", "Hello?")

    spoken = Applied(raw=heard, before=held, step=Step(state=held, controls=(_create(None),)))
    said = Applied(raw=heard, before=held, step=Step(state=held, controls=(_create(SUPERVISOR_METADATA),)))
    maintained = Applied(
        raw=heard, before=held, step=Step(state=held, controls=(_create(ev.maintenance(1)),))
    )

    [violation] = line_violations([spoken])
    assert "response.create on a closed line" in violation
    assert line_violations([said]) == [] and line_violations([maintained]) == []
    # The pipeline itself keeps the held line quiet for the same input.
    assert line_violations([_record(held, heard)]) == []


def test_the_checker_reports_the_line_passing_between_people_and_a_take_over_that_is_not_refused() -> None:
    taken = ev.state_after([*ev.listening(), op.supervisor({"type": "take_over"})])
    assert taken.taken_by is not None and taken.taken_by.id == op.SUPERVISOR["id"]
    second = op.supervisor({"type": "take_over"}, by=op.OTHER_SUPERVISOR)
    refused = _record(taken, second)
    assert line_violations([refused]) == []

    passed_on = taken.evolve(taken_by=op.OTHER_SUPERVISOR)
    answer = AnswerRequest(request_id=second["request_id"], gateway_id="gw1", status=200, body={})
    stolen = Applied(raw=second, before=taken, step=Step(state=passed_on, effects=(answer,)))

    violations = line_violations([stolen])
    assert any("the line passed from sup_1 to sup_2" in violation for violation in violations)
    assert any("a second take_over was answered [200]" in violation for violation in violations)
    assert any("a refused take_over changed the call" in violation for violation in violations)


def test_the_checker_reports_a_request_answered_twice_or_never_and_an_attention_left_waiting() -> None:
    state = ev.state_after(ev.listening())
    asked = _record(state, op.attention())
    [answer] = _answers(asked.step)
    twice = Applied(
        raw=asked.raw, before=state, step=asked.step.then(Step(state=asked.step.state, effects=(answer,)))
    )
    never = Applied(
        raw=asked.raw,
        before=state,
        step=Step(state=asked.step.state, effects=tuple(e for e in asked.step.effects if e != answer)),
    )
    assert line_violations([asked]) == []
    assert any("answered 2 times" in violation for violation in line_violations([twice]))
    assert any("answered 0 times" in violation for violation in line_violations([never]))

    # The call ends, but the end's step forgets to answer the attention that waited.
    ended = _record(asked.step.state, ev.end_requested())
    unanswered = Applied(
        raw=ended.raw,
        before=ended.before,
        step=Step(
            state=ended.step.state,
            effects=tuple(e for e in ended.step.effects if not isinstance(e, LogEntry)),
        ),
    )
    assert line_violations([asked, ended]) == []
    assert any("attentions unanswered" in violation for violation in line_violations([asked, unanswered]))


def test_the_log_checker_reports_an_unanswered_attention_and_a_call_ended_that_is_not_last() -> None:
    call = Call()
    for raw in [*ev.listening(), op.attention(), ev.sideband_closed(1000)]:
        call.apply(raw)
    entries = call_log_of(call.applied)
    assert [entry.kind for entry in entries] == [
        "call.started",
        "attention.requested",
        "call.line",
        "attention.answered",
        "call.ended",
    ]
    assert log_violations(entries) == []

    unanswered = [entry for entry in entries if entry.kind != "attention.answered"]
    assert log_violations(unanswered) == ["the call ended with 1 attentions requested and 0 answered"]
    after_the_end = [*entries, entries[2].model_copy(update={"seq": 6})]
    assert log_violations(after_the_end) == ["the last entry is call.line, not call.ended"]
    twice = [*entries, entries[-1].model_copy(update={"seq": 6})]
    assert log_violations(twice) == ["call.ended appears 2 times"]
