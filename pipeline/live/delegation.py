"""Client delegations on Live: from `session.delegation.created` to exactly one terminal
commentary (LIVE_PROTOCOL.md §1.3, §5.2, §5.4).

The rules, as this module states them:

- **Taken up once.** A delegation is taken up the first time its id is seen; the same id again
  (the provider repeating it, a gateway re-sending it) changes nothing.
- **Progress first.** As it is taken up, one `thinking` note tells the model the work is under
  way, well inside the acknowledgement delay: the model keeps the caller company instead of
  stalling, and does not guess the result.
- **The task waits for its words.** Its task is the caller's words from just after the previous
  task's offset up to its own `offset_ms` (`pipeline.live.build_task`). If the caller's
  transcript has not passed the offset yet, it waits for it — at most `DELEGATION_SETTLE_MS`, a
  durable timer (DESIGN invariant 9) — and then goes ahead with what there is.
- **A durable tool step.** The task runs as a tool step on tool_runs: the session's registered
  delegation handler, under the tool bodies' time limit, deadline timer and cancellation.
- **Exactly one terminal commentary** per delegation, whatever happened: the handler's result,
  its refusal, a limit (more than `MAXIMUM_OPEN_DELEGATIONS` at once, or no handler), a
  timeout, a failure, or its deadline passing without an outcome. It is sent when the line
  allows (the call live, its sideband up, the line not held); until then it waits, decided,
  and goes out when the line opens again. A session that ends first sends none — nobody is left
  to hear it — and its running steps are marked interrupted (DESIGN invariant 7 on Live).

Nothing here does I/O; wall time never enters (the settle window is a timer).
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.call.catalog import ToolOutcome
from pipeline.call.limits import MAXIMUM_TOOL_MS, TOOL_DEADLINE_GRACE_MS, bounded
from pipeline.live.controls import commentary, instructions, thinking
from pipeline.live.events import BackendCalled, Delegated, LiveTranscript
from pipeline.live.frames import DELEGATION_SETTLE_MS, line_of
from pipeline.live.reports import closing
from pipeline.live.tasks import build_task
from pipeline.session import ending
from pipeline.session.state import IN_CALL, Delegation, DelegationStatus, LiveCall, SessionState, SpokenLine
from pipeline.session.step import (
    CancelTool,
    InterruptToolStep,
    PersistTranscript,
    RecordIncident,
    RefuseToolStep,
    RequestToolStep,
    RunTool,
    Step,
    cancel_timer,
    schedule_timer,
    unchanged,
)
from pipeline.session.timeline import Speaker, TranscriptFragment
from pipeline.session.timers import DELEGATION_DEADLINE_PREFIX, DelegationDeadline, DelegationSettle

# Timers named with this prefix and a delegation id check that its handler's outcome came back
# (named through `pipeline.session.timers.DelegationDeadline`; the prefix stays here for the tests).
DEADLINE_TIMER = DELEGATION_DEADLINE_PREFIX
# A tool_runs message naming a delegation handler starts with this: a tool's name cannot hold a
# colon (`pipeline.call.catalog.TOOL_NAME_PATTERN`), so it is never taken for a tool's.
DELEGATION_RUN_PREFIX = "delegation:"

# Delegations being worked on at once (settling, running, or answered and waiting for the
# line). A caller revising a request makes two; more than this is a model looping.
MAXIMUM_OPEN_DELEGATIONS = 4
# The caller's words kept for the next task: about half a minute of continuous speech, which
# bounds the state every event of the call writes.
MAXIMUM_HEARD_FRAGMENTS = 128
# Delegation ids remembered after their answer: far more than a repeat can arrive late by.
ANSWERED_KEPT = 64
# How a session ends whose Responses delegation waits on the host for a tool it does not serve.
RESPONSES_NOT_SERVED = "responses_delegation_not_served"

PROGRESS = (
    "Switchboard is working on this request now; its result will follow. Let the caller know "
    "you are on it, and do not guess the result while you wait."
)
NO_RESULT = "The request was done, and there is nothing to report."
REFUSED = "This request cannot be done: {reason}. Tell the caller so, kindly."
TOO_MANY = (
    "Too many requests are being worked on at once, so this one was not started. Ask the caller "
    "to wait for the answers already on their way, then to ask again."
)
NO_HANDLER = (
    "Nothing here can work on requests like this one. Tell the caller it cannot be done on this call."
)
TIMED_OUT = (
    "The request took too long and was stopped; its result is unknown. Tell the caller it could "
    "not be done just now, and offer to try again."
)
NOT_BACK = (
    "The request did not report back in time; its result is unknown. Tell the caller it could "
    "not be done just now, and offer to try again."
)
FAILED = "The request failed ({code}). Tell the caller it could not be done just now."
RECONFIRM = (
    "The connection to the backend was lost for a moment. If the caller asked for something "
    "whose answer you have not given them, ask them to confirm the request."
)
STILL_WORKING = " These requests are still being worked on and their results will follow: {tasks}."


def delegation_run(handler: str) -> str:
    """The name a delegation handler's run travels under on tool_runs."""
    return f"{DELEGATION_RUN_PREFIX}{handler}"


def is_deliverable(state: SessionState) -> bool:
    """Whether a commentary can be sent now: the call is live, its sideband up, its line open."""
    return state.phase in IN_CALL and not state.sideband_down and not state.line_closed


def _live(state: SessionState) -> LiveCall:
    assert state.live is not None, "a Live transition on a session that is not Live"
    return state.live


# ── the caller's words ──────────────────────────────────────────────────────────────────


def heard(state: SessionState, event: LiveTranscript) -> Step:
    """A durable piece of transcript: stored, on its speaker's line when it goes on it; the
    caller's words are kept for the next task, and a delegation waiting for them goes ahead
    once they pass its offset."""
    role = "user" if event.speaker is Speaker.CALLER else "assistant"
    live = _live(state)
    line, continues = _line_of(live, event)
    stored = PersistTranscript(role=role, text=bounded(event.text), item_id=line.item_id, continues=continues)
    if event.speaker is not Speaker.CALLER:
        return Step(state=state.evolve(live=live.model_copy(update={"agent_line": line})), effects=(stored,))
    live = live.model_copy(update={"caller_line": line})
    kept = _kept(live, event.fragments)
    until = max([live.heard_until_ms, *(fragment.end_ms for fragment in event.fragments)])
    listened = state.evolve(live=live.model_copy(update={"heard": kept, "heard_until_ms": until}))
    step = Step(state=listened, effects=(stored,))
    for delegation in _settling(_live(listened)):
        if until > delegation.offset_ms:
            step = step.then(_start(step.state, delegation))
    return step


def _line_of(live: LiveCall, event: LiveTranscript) -> tuple[SpokenLine, bool]:
    """The line a piece is stored on (`pipeline.live.frames.line_of`), and whether it goes on
    its speaker's latest line."""
    own, other = (
        (live.caller_line, live.agent_line)
        if event.speaker is Speaker.CALLER
        else (live.agent_line, live.caller_line)
    )
    return line_of(own, other, event.item_id, event.start_ms, event.end_ms)


def _kept(live: LiveCall, fragments: tuple[TranscriptFragment, ...]) -> tuple[TranscriptFragment, ...]:
    """The caller's words for the next task with these added: each once, none a task took."""
    known = {fragment.event_id for fragment in live.heard}
    fresh = [
        fragment
        for fragment in fragments
        if fragment.event_id not in known and (live.claimed_ms is None or fragment.start_ms > live.claimed_ms)
    ]
    return (*live.heard, *fresh)[-MAXIMUM_HEARD_FRAGMENTS:]


def _settling(live: LiveCall) -> list[Delegation]:
    """The delegations waiting for their words, earliest offset first (a task takes the words
    after the previous one's offset, so they are built in that order)."""
    waiting = [d for d in live.open if d.status is DelegationStatus.SETTLING]
    return sorted(waiting, key=lambda delegation: delegation.offset_ms)


# ── a delegation arrives ────────────────────────────────────────────────────────────────


def delegated(state: SessionState, event: Delegated) -> Step:
    """The model delegated a task: taken up once — started when its words are in, else after
    at most the settle window — or refused at once (no handler, too many at once)."""
    live = _live(state)
    delegation_id = event.delegation.id
    if state.phase not in IN_CALL or live.find(delegation_id) or delegation_id in live.answered:
        return unchanged(state)
    if event.delegation.target != "client":
        # Switchboard configures client delegation only: a Responses or Decisions run is the
        # provider's own, and an append naming it would be refused.
        incident = RecordIncident(
            code="delegation_not_client",
            summary=f"a {event.delegation.target} delegation arrived on a client-delegation session",
            severity="warning",
            context={"delegation_id": delegation_id, "target": event.delegation.target},
        )
        return Step(state=state, effects=(incident,))
    arriving = Delegation(id=delegation_id, offset_ms=event.offset_ms)
    counted = live.model_copy(update={"delegations": live.delegations + 1})
    if live.setup.handler is None:
        return _refused_at_once(state.evolve(live=counted), arriving, "no_delegation_handler", NO_HANDLER)
    if len(live.open) >= MAXIMUM_OPEN_DELEGATIONS:
        return _refused_at_once(state.evolve(live=counted), arriving, "delegation_limit_reached", TOO_MANY)
    taken = state.evolve(live=counted.model_copy(update={"open": (*live.open, arriving)}))
    progress = Step(state=taken, controls=(thinking(PROGRESS, delegation_id=delegation_id),))
    if live.heard_until_ms > event.offset_ms:
        return progress.then(_start(taken, arriving))
    waiting = schedule_timer(DelegationSettle(delegation_id), delay_ms=DELEGATION_SETTLE_MS)
    return progress.then(Step(state=taken, effects=(waiting,)))


def backend_called(state: SessionState, event: BackendCalled) -> Step:
    """A Responses delegation's backend called a function tool and waits for the host's output
    and `response.create`. Switchboard serves client delegation only: it holds no Responses tool
    and sends neither, so the backend would wait for ever and the caller with it. Such a session
    is refused — failed at once, the reason in its record — rather than left hanging."""
    if state.phase not in IN_CALL:
        return unchanged(state)
    call = event.event.item
    summary = (
        f"a Responses delegation's backend called {call.name} ({call.call_id}) and waits for the "
        "host's function_call_output and response.create; Switchboard serves client delegation "
        "only and sends neither"
    )
    return ending.fail(state, RESPONSES_NOT_SERVED, summary, closing(state))


def settled(state: SessionState, delegation_id: str) -> Step:
    """The settle window is over: the task goes ahead with the words there are (a delegation
    started already, or answered, is left as it is)."""
    live = _live(state)
    waiting = live.find(delegation_id)
    if state.is_terminal or waiting is None or waiting.status is not DelegationStatus.SETTLING:
        return unchanged(state)
    step = Step(state=state)
    # The words of a delegation made earlier are the earlier task's: it goes first.
    for delegation in _settling(live):
        if delegation.offset_ms <= waiting.offset_ms:
            step = step.then(_start(step.state, delegation))
    return step


def _start(state: SessionState, delegation: Delegation) -> Step:
    """Build the task from the caller's words and run the handler on tool_runs, under its
    deadline; the words it took are not asked again."""
    live = _live(state)
    handler = live.setup.handler
    assert handler is not None
    task = build_task(
        live.heard, delegation_id=delegation.id, offset_ms=delegation.offset_ms, since_ms=live.claimed_ms
    )
    claimed = delegation.offset_ms if live.claimed_ms is None else max(live.claimed_ms, delegation.offset_ms)
    running = delegation.model_copy(update={"status": DelegationStatus.RUNNING, "task": task.text})
    after = live.with_delegation(running).model_copy(
        update={
            "claimed_ms": claimed,
            "heard": tuple(fragment for fragment in live.heard if fragment.start_ms > claimed),
        }
    )
    arguments = _arguments(delegation, task.text, task.is_covered, task.fragment_ids)
    return Step(
        state=state.evolve(live=after),
        effects=(
            cancel_timer(DelegationSettle(delegation.id)),
            RequestToolStep(
                call_id=delegation.id,
                item_id=delegation.id,
                response_id=None,
                name=handler,
                arguments=arguments,
                version=live.setup.handler_version,
            ),
            RunTool(call_id=delegation.id, name=delegation_run(handler), arguments=arguments),
            schedule_timer(
                DelegationDeadline(delegation.id), delay_ms=MAXIMUM_TOOL_MS + TOOL_DEADLINE_GRACE_MS
            ),
        ),
    )


def _arguments(delegation: Delegation, task: str, covered: bool, fragment_ids: tuple[str, ...]) -> str:
    """What the step records and the handler is given: the task and where it came from."""
    return json.dumps(
        {
            "delegation_id": delegation.id,
            "task": task,
            "offset_ms": delegation.offset_ms,
            "covered": covered,
            "fragment_ids": list(fragment_ids),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _refused_at_once(state: SessionState, delegation: Delegation, code: str, message: str) -> Step:
    """A delegation that will not run: a refused step, and its one terminal commentary."""
    live = _live(state)
    refused = RefuseToolStep(
        call_id=delegation.id,
        item_id=delegation.id,
        response_id=None,
        name=live.setup.handler or "none",
        arguments=_arguments(delegation, "", False, ()),
        code=code,
        message=message,
        status="refused" if code == "delegation_limit_reached" else "unavailable",
        version=live.setup.handler_version or None,
    )
    recorded = Step(state=state.evolve(live=live.model_copy(update={"open": (*live.open, delegation)})))
    recorded = recorded.then(Step(state=recorded.state, effects=(refused,)))
    return recorded.then(_answer(recorded.state, delegation, message))


# ── the outcome ─────────────────────────────────────────────────────────────────────────


def finished(state: SessionState, delegation_id: str, outcome: ToolOutcome) -> Step:
    """The handler's outcome is in: the delegation's terminal commentary (now, or when the line
    allows). An outcome for a delegation already answered changes nothing."""
    running = _live(state).find(delegation_id)
    if state.is_terminal or running is None or running.status is not DelegationStatus.RUNNING:
        return unchanged(state)
    done = Step(state=state, effects=(cancel_timer(DelegationDeadline(delegation_id)),))
    return done.then(_answer(state, running, answer_of(outcome)))


def deadline_passed(state: SessionState, delegation_id: str) -> Step:
    """No outcome came back in time (a run lost for good): the step is interrupted, the run
    asked to stop, and the delegation answered as not having come back."""
    running = _live(state).find(delegation_id)
    if state.is_terminal or running is None or running.status is not DelegationStatus.RUNNING:
        return unchanged(state)
    stopped = Step(
        state=state,
        effects=(
            CancelTool(call_id=delegation_id, reason="delegation_deadline_passed"),
            InterruptToolStep(
                call_id=delegation_id,
                code="delegation_deadline_passed",
                message="The delegation's handler did not report back in time.",
            ),
        ),
    )
    return stopped.then(_answer(state, running, NOT_BACK))


def answer_of(outcome: ToolOutcome) -> str:
    """What the model is told of an outcome, to say to the caller in its own words."""
    if outcome.status == "succeeded":
        result = outcome.result
        if isinstance(result, dict) and isinstance(result.get("say"), str):
            result = result["say"]
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        return text if text.strip() and result is not None else NO_RESULT
    error = outcome.error
    if outcome.status == "refused":
        return REFUSED.format(reason=(error.message if error else "") or "no reason was given")
    if outcome.status == "timed_out":
        return TIMED_OUT
    if outcome.status == "unavailable":
        return NO_HANDLER
    if outcome.status in ("cancelled", "interrupted"):
        return NOT_BACK
    return FAILED.format(code=error.code if error else "unknown")


def _answer(state: SessionState, delegation: Delegation, text: str) -> Step:
    """The delegation's one terminal commentary: sent now if the line allows, else kept with
    the delegation until it does."""
    live = _live(state)
    if not is_deliverable(state):
        waiting = delegation.model_copy(update={"status": DelegationStatus.ANSWERED, "answer": text})
        return Step(state=state.evolve(live=live.with_delegation(waiting)))
    closed = live.model_copy(
        update={
            "open": tuple(d for d in live.open if d.id != delegation.id),
            "answered": (*live.answered, delegation.id)[-ANSWERED_KEPT:],
        }
    )
    return Step(state=state.evolve(live=closed), controls=(commentary(text, delegation_id=delegation.id),))


def deliver_owed(state: SessionState) -> Step:
    """The line allows commentary again (given back, the sideband re-opened): every answer that
    waited for it goes out, in the order the delegations were made."""
    if state.live is None or not is_deliverable(state):
        return unchanged(state)
    step = Step(state=state)
    for delegation in state.live.open:
        if delegation.status is DelegationStatus.ANSWERED and delegation.answer is not None:
            step = step.then(_answer(step.state, delegation, delegation.answer))
    return step


def reconfirmed(state: SessionState) -> Step:
    """After a reattach: whatever the provider said while no sideband listened is gone, a
    delegation among it too (it is never replayed), so the model is asked to have the caller
    confirm what is unanswered; the requests still being worked on are named."""
    live = _live(state)
    pending = [f"“{d.task}”" for d in live.open if d.task and d.status is DelegationStatus.RUNNING]
    note = RECONFIRM + (STILL_WORKING.format(tasks="; ".join(pending)) if pending else "")
    return Step(state=state, controls=(instructions(note),))


# ── the end ─────────────────────────────────────────────────────────────────────────────


def interrupted_by_end(before: SessionState, step: Step) -> Step:
    """A Live session that ends stops the handlers still running and records why; nothing is
    said for them (or for answers still waiting for the line): the call is over."""
    live = before.live
    if live is None or before.is_terminal or not step.state.is_terminal or not live.open:
        return step
    reason = step.state.end_reason or "session_ended"
    effects: list[Any] = []
    for delegation in live.open:
        if delegation.status is DelegationStatus.RUNNING:
            effects += [
                CancelTool(call_id=delegation.id, reason=reason),
                InterruptToolStep(
                    call_id=delegation.id, code=reason, message=f"The call ended ({reason}) while it ran."
                ),
            ]
    after = step.state.live
    assert after is not None
    return Step(
        state=step.state.evolve(live=after.model_copy(update={"open": ()})),
        controls=step.controls,
        effects=(*step.effects, *effects),
    )
