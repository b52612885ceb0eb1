"""The line: who speaks to the caller. The app holds it or asks for a person; a supervisor says,
whispers, takes it over, releases it, ends or transfers the call.

While the line is held the agent neither speaks nor hears: a running response is cut, turn
detection is switched off, and nothing is answered. While a person holds it the model answers
nobody (the caller is still transcribed, so the person can follow), and the person speaks through
`say`. A supervisor's `say` is the one response asked for while the line is closed. Every change
writes its call-log entry; every request is answered (200/202, or 409 with the reason).

What a sideband cannot do: play music while the caller waits (it carries events, never audio),
or bridge a person's own voice into the call (a warm transfer needs a media path). A phone call
can be handed on cold, with the provider's `refer`.
"""

from __future__ import annotations

from typing import Any

from pipeline import admission
from pipeline.call.capabilities import Ability, refusal, too_long
from pipeline.call.messages import Playback
from pipeline.dialects import capabilities_of, dialect_of
from pipeline.session import ending
from pipeline.session.refusals import not_in_call_for
from pipeline.session.state import Attention, Person, SessionState
from pipeline.session.step import (
    LogEntry,
    RecordIncident,
    Step,
    TransferCall,
    answering,
    cancel_timer,
    refused,
    refused_by,
    refused_for,
    schedule_timer,
    unchanged,
)
from pipeline.session.timers import AttentionWait
from pipeline.session.wire import (
    AttentionRequested,
    EndVerb,
    HoldRequested,
    ReleaseVerb,
    SayVerb,
    SupervisorRequested,
    TakeOverVerb,
    TransferFinished,
    TransferVerb,
    WhisperVerb,
)

NOBODY_TOOK_IT = "nobody took the line within {wait_s:g}s"
GIVEN_BACK = "the line was given back before a person took it"
CALL_ENDED = "the call ended before a person took the line"

# Notes the model is given as system messages (the caller hears none of them).
A_WHISPER = "A supervisor tells you this; the caller does not hear it: {text}"
A_RELEASE = (
    "A person from the team was on the line with the caller and has handed the call back to "
    "you. Carry on from where they left it."
)
NOBODY_CAME = (
    "You asked for a person ({reason}), but nobody took the line within {wait_s:g}s. Tell the "
    "caller so, and offer to go on helping them yourself."
)


def hold(state: SessionState, event: HoldRequested) -> Step:
    """Hold the line or give it back (200; the same request again changes nothing)."""
    refusal = _not_in_call(state, event.request_id, event.gateway_id)
    if refusal is not None:
        return refusal
    if event.held == state.held:
        body = {"status": "held" if state.held else "free", "changed": False}
        return answering(unchanged(state), event.request_id, event.gateway_id, 200, body)
    if event.held:
        step = hold_line(state, event.playback)
    else:
        answered = _answered(state, ok=False, error=GIVEN_BACK)
        step = answered.then(give_back(answered.state))
    body = {"status": "held" if event.held else "free", "changed": True}
    return answering(step, event.request_id, event.gateway_id, 200, body)


def hold_line(state: SessionState, playback: Playback | None) -> Step:
    """The agent neither speaks nor hears: what it is saying is cut where the provider can cut
    it, the caller's audio no longer reaches the model, and no caller input waits to be answered."""
    dialect = dialect_of(state)
    cut = dialect.silence(state, playback)
    held = cut.state.evolve(held=True)
    logged = Step(state=held, effects=(LogEntry(kind="call.line", data={"held": True}),))
    return cut.then(dialect.mute(held)).then(logged)


def hold_quietly(state: SessionState) -> Step:
    """Held without cutting what the agent is saying: its own response asked for the hold (a
    keypad collection), and ends as it would; nothing is answered after it."""
    held = state.evolve(held=True)
    logged = Step(state=held, effects=(LogEntry(kind="call.line", data={"held": True}),))
    return dialect_of(state).mute(held).then(logged)


def give_back(state: SessionState) -> Step:
    """The agent hears and speaks again: what the caller said meanwhile is not answered, and
    what waited for the line goes out."""
    if not state.held:
        return unchanged(state)
    free = state.evolve(held=False)
    dialect = dialect_of(state)
    logged = Step(state=free, effects=(LogEntry(kind="call.line", data={"held": False}),))
    return dialect.unmute(free).then(logged).then(dialect.line_freed(free))


def attention(state: SessionState, event: AttentionRequested) -> Step:
    """Hold the caller for a person for at most `wait_s` (202), once at a time."""
    refusal = _not_in_call(state, event.request_id, event.gateway_id)
    if refusal is not None:
        return refusal
    if state.attention is not None:
        message = "the caller is already waiting for a person"
        return refused(state, event.request_id, event.gateway_id, 409, "already_waiting", message)
    if state.taken_by is not None:
        message = f"{state.taken_by.id} already holds the line"
        return refused(state, event.request_id, event.gateway_id, 409, "already_held", message)
    number = state.attentions + 1
    waiting = state.evolve(
        attention=Attention(number=number, reason=event.reason, wait_s=event.wait_s), attentions=number
    )
    step = Step(
        state=waiting,
        effects=(
            LogEntry(
                kind="attention.requested",
                data={"reason": event.reason, "wait_s": event.wait_s, "by": event.by},
            ),
            schedule_timer(AttentionWait(number), delay_ms=round(event.wait_s * 1000)),
        ),
    )
    if not waiting.held:
        step = step.then(hold_line(waiting, event.playback))
    body = {"status": "waiting", "wait_s": event.wait_s}
    return answering(step, event.request_id, event.gateway_id, 202, body)


def nobody_came(state: SessionState, number: int) -> Step:
    """The attention's wait is over and nobody took the line: it is answered so, the line is
    given back, and the model is told, so it can tell the caller."""
    waiting = state.attention
    if state.is_terminal or waiting is None or waiting.number != number:
        return unchanged(state)
    answered = _answered(state, ok=False, error=NOBODY_TOOK_IT.format(wait_s=waiting.wait_s))
    given = answered.then(give_back(answered.state))
    note = NOBODY_CAME.format(reason=waiting.reason, wait_s=waiting.wait_s)
    return given.then(_noted_and_answered(given.state, note))


def supervise(state: SessionState, event: SupervisorRequested) -> Step:
    """One of a supervisor's verbs, each with its call-log entry before it acts."""
    refusal = _not_in_call(state, event.request_id, event.gateway_id)
    if refusal is not None:
        return refusal
    by, verb = event.by, event.verb
    who = _person(by)
    match verb:
        case SayVerb():
            return _say(state, event, verb.text)
        case WhisperVerb():
            cannot = too_long(capabilities_of(state), A_WHISPER.format(text=verb.text))
            if cannot is not None:
                return refused_by(state, event.request_id, event.gateway_id, cannot)
            logged = Step(
                state=state, effects=(LogEntry(kind="supervisor.whispered", data={**who, "text": verb.text}),)
            )
            replied = logged.then(_noted_and_answered(state, A_WHISPER.format(text=verb.text)))
            reply_owed = replied.state.directed is not None and not replied.state.directed.by_supervisor
            asked = dialect_of(state).asks_for_reply(replied.controls)
            status = "replying" if asked or reply_owed else "noted"
            return answering(replied, event.request_id, event.gateway_id, 202, {"status": status})
        case TakeOverVerb():
            return _take_over(state, event)
        case ReleaseVerb():
            if state.taken_by is None:
                message = "nobody holds the line, so there is nothing to release"
                return refused(state, event.request_id, event.gateway_id, 409, "nobody_holds", message)
            released = state.evolve(taken_by=None)
            step = Step(state=released, effects=(LogEntry(kind="supervisor.released", data=who),))
            step = step.then(_noted_and_answered(released, A_RELEASE))
            return answering(step, event.request_id, event.gateway_id, 200, {"status": "released"})
        case EndVerb():
            logged = Step(
                state=state, effects=(LogEntry(kind="supervisor.ended", data={**who, "reason": verb.reason}),)
            )
            step = logged.then(admission.finish(state, "supervisor_ended"))
            return answering(step, event.request_id, event.gateway_id, 202, {"status": "ending"})
        case TransferVerb():
            return _transfer(state, event, verb.to)
    return unchanged(state)


def transfer_finished(state: SessionState, event: TransferFinished) -> Step:
    """The provider answered the transfer: the call ends `transferred`, or goes on."""
    if state.is_terminal or state.transferring_to != event.to:
        return unchanged(state)
    outcome = {"to": event.to, "ok": event.ok, "error": event.error}
    asked_by_model = state.transfer_call_id
    logged = Step(
        state=state.evolve(transferring_to=None, transfer_call_id=None),
        effects=(LogEntry(kind="call.transferred", data=outcome),),
    )
    if event.ok:
        return logged.then(ending.transferred(logged.state, by_agent=asked_by_model is not None))
    incident = RecordIncident(
        code="transfer_failed",
        summary=f"the transfer to {event.to} failed: {event.error or 'no reason given'}",
        severity="warning",
        context={"to": event.to},
    )
    failed = logged.then(Step(state=logged.state, effects=(incident,)))
    if asked_by_model is None:
        return failed
    # The model that asked is told, and replies to it (the caller is still here).
    error = event.error or "the transfer failed"
    return failed.then(dialect_of(state).transfer_failed(failed.state, asked_by_model, error))


def answered_by_end(before: SessionState, step: Step) -> Step:
    """A caller still waiting for a person when the call ends gets their answer (every
    attention is answered exactly once)."""
    if before.attention is None or before.is_terminal or not step.state.is_terminal:
        return step
    answer = LogEntry(kind="attention.answered", data={"ok": False, "by": None, "error": CALL_ENDED})
    return Step(
        state=step.state.evolve(attention=None),
        controls=step.controls,
        effects=(answer, *step.effects),
    )


# ── the verbs ───────────────────────────────────────────────────────────────────────────


def _say(state: SessionState, event: SupervisorRequested, text: str) -> Step:
    """The person's words, spoken in the agent's voice: now if the agent is quiet (`speaking`),
    or after the response that is running (`after_response`); 409 if words already wait."""
    cannot = too_long(capabilities_of(state), text)
    if cannot is not None:
        return refused_by(state, event.request_id, event.gateway_id, cannot)
    said = LogEntry(kind="supervisor.said", data={**_person(event.by), "text": text})
    return dialect_of(state).person_says(state, text, said, event.request_id, event.gateway_id)


def _take_over(state: SessionState, event: SupervisorRequested) -> Step:
    """One person at a time takes the line: a waiting attention is answered, a held line is
    freed for them, and the agent is cut and answers nobody until they release it."""
    cannot = refusal(capabilities_of(state), Ability.TAKE_OVER)
    if cannot is not None:
        return refused_by(state, event.request_id, event.gateway_id, cannot)
    if state.taken_by is not None:
        # Any supervisor may release it (a lead may end a colleague's hold); the log says who.
        message = f"{state.taken_by.id} already holds the line; release it first"
        return refused(state, event.request_id, event.gateway_id, 409, "already_held", message)
    who = _person(event.by)
    step = Step(state=state, effects=(LogEntry(kind="supervisor.took_over", data=who),))
    if state.attention is not None:
        step = step.then(_answered(state, ok=True, by=event.by))
    step = step.then(give_back(step.state))
    step = step.then(dialect_of(state).silence(step.state, event.playback))
    step = Step(state=step.state.evolve(taken_by=event.by), controls=step.controls, effects=step.effects)
    return answering(step, event.request_id, event.gateway_id, 200, {"status": "taken"})


def _transfer(state: SessionState, event: SupervisorRequested, to: str) -> Step:
    if state.medium != "sip":
        message = "only a phone call can be transferred; this call came through WebRTC"
        return refused(state, event.request_id, event.gateway_id, 409, "not_a_phone_call", message)
    if state.transferring_to is not None:
        message = f"the call is already being transferred to {state.transferring_to}"
        return refused(state, event.request_id, event.gateway_id, 409, "already_transferring", message)
    logged = Step(
        state=state.evolve(transferring_to=to),
        effects=(
            LogEntry(kind="supervisor.transferred", data={**_person(event.by), "to": to, "mode": "cold"}),
            TransferCall(to=to),
        ),
    )
    return answering(logged, event.request_id, event.gateway_id, 202, {"status": "transferring", "to": to})


# ── shared ──────────────────────────────────────────────────────────────────────────────


def _not_in_call(state: SessionState, request_id: str | None, gateway_id: str | None) -> Step | None:
    """The refusal of a request that needs a live call, or None when the call is live."""
    refusal = not_in_call_for(state)
    return refused_for(state, request_id, gateway_id, refusal) if refusal is not None else None


def _answered(state: SessionState, *, ok: bool, by: Person | None = None, error: str | None = None) -> Step:
    """The waiting attention is answered (once), and its timer goes."""
    waiting = state.attention
    if waiting is None:
        return unchanged(state)
    data: dict[str, Any] = {"ok": ok, "by": by.model_dump(mode="json") if by is not None else None}
    if error is not None:
        data["error"] = error
    return Step(
        state=state.evolve(attention=None),
        effects=(
            LogEntry(kind="attention.answered", data=data),
            cancel_timer(AttentionWait(waiting.number)),
        ),
    )


def _noted_and_answered(state: SessionState, note: str) -> Step:
    """A note the model heeds (the caller does not hear it); the model replies to it unless the
    line is closed (now, or once the running response ends)."""
    return dialect_of(state).note(state, note)


def _person(by: Person) -> dict[str, Any]:
    return {"by": by.model_dump(mode="json")}
