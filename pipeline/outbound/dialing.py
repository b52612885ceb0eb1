"""A call Switchboard places, from the dial to what it came to (issue 26; docs/outbound.md).

A session created to call out (`state.outbound`) is dialled when its admission begins: the
decision is a `PlaceCall` effect, carried out once by a gateway, which claims the dial by the
call's id before the provider is asked (so a decision re-applied after a crash never dials twice).
Then, as the provider reports it (`Dialect.call_progress`):

- ringing → `call.ringing`; a call that rings past `RING_LIMIT_MS` ends `no_answer`;
- failed → `call.failed` with the provider's code, and the call's outcome (`busy`, `no_answer`,
  or `failed` with the code kept);
- answered → who answered is decided from the callee's first words
  (`pipeline.outbound.voicemail`): as soon as they tell (a machine's words, a greeting that runs
  on), when the callee pauses (`CALLEE_PAUSE_MS` after their last piece), or at
  `VERDICT_DEADLINE_MS` after the answer. `call.answered` says who, with the evidence. The model
  was told at startup to say nothing until then (Live has no way to cut its speech): a person
  (or nobody heard) is greeted once the model is told; a machine is hung up on, or, asked for,
  left the session's message once its greeting is over, and then hung up on.

When the session ends, the attempt's outcome is recorded (`OutboundEnded`): what the provider or
the verdict said, else `completed` for an answered call and `cancelled` for one ended before it
was answered by the app or a campaign, else `failed` with the end reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.call.progress import Answered, AskedNotToBeCalled, CallProgress, DialFailed, Ringing, Said
from pipeline.dialects import dialect_of
from pipeline.keypad.presses import opted_out
from pipeline.outbound.outcomes import failure_outcome
from pipeline.outbound.voicemail import (
    DECISION_DEADLINE_MS,
    GREETING_END_SILENCE_MS,
    SETTLE_SILENCE_MS,
    TONE_SILENCE_MS,
    Verdict,
    greeting_over,
    listen,
    settle,
)
from pipeline.outbound.voicemail import Heard as Piece
from pipeline.session.ending import finish
from pipeline.session.state import CallOutcome, Heard, OutboundCall, SessionState
from pipeline.session.step import (
    LogEntry,
    OutboundEnded,
    PlaceCall,
    RecordIncident,
    Step,
    cancel_timer,
    schedule_timer,
    unchanged,
)
from pipeline.session.timers import OutboundStage, OutboundWait

# The provider gives up ringing after about 3 minutes (LIVE_PROTOCOL.md §4) and says so; if it
# never does, the call is taken as unanswered a little after that.
RING_LIMIT_MS = 200_000
# A person says a few words and waits for an answer: this long after the callee's last piece,
# with no verdict yet, who answered is decided from what was heard; and past the deadline after
# the answer, with whatever was heard (nothing: unknown). The detector's own figures.
CALLEE_PAUSE_MS = SETTLE_SILENCE_MS
VERDICT_DEADLINE_MS = DECISION_DEADLINE_MS
# The message left on a machine is said once the agent has said nothing for this long after it,
# and the call is hung up then, or at the latest after `MESSAGE_LIMIT_MS`.
MESSAGE_PAUSE_MS = 1_500
MESSAGE_LIMIT_MS = 30_000
# How sure the provider's judge must be that the callee asked not to be called again before their
# number goes on the do-not-call list: a wrong "yes" loses a customer for good, a wrong "no" is
# the next call's to catch (and a key press or the app can add it any time).
DO_NOT_CALL_PROBABILITY = 0.8
# The callee's words kept while who answered is decided: far more than a verdict needs.
MAXIMUM_HEARD_PIECES = 24

# What the model is told once who answered is known (it was told at startup to wait for this).
A_PERSON_ANSWERED = "A person answered the call. Greet them now and say why you are calling."
NOBODY_SAID = (
    "The call was answered, but it is not clear by whom. Greet them now; if nobody answers, say goodbye."
)
LEAVE_THE_MESSAGE = (
    "You reached an answering machine and its greeting is over. Leave this message once, word "
    "for word, then say nothing more: {message}"
)

# How a call going out ends, by what it came to (`state.end_reason`).
END_REASONS: dict[str, str] = {
    "busy": "call_busy",
    "no_answer": "call_no_answer",
    "failed": "call_failed",
}
MACHINE_HUNG_UP = "answering_machine"
MESSAGE_LEFT = "voicemail_left"
# End reasons of a call stopped by whoever placed it before it was answered.
CANCELLED_BY = frozenset({"app_ended", "supervisor_ended", "campaign_cancelled"})


def dial(state: SessionState) -> Step:
    """The call's admission began: it is dialled, and the ringing is given its limit."""
    call = state.outbound
    if call is None or state.is_terminal:
        return unchanged(state)
    return Step(
        state=state,
        effects=(
            LogEntry(kind="call.dialing", data={"call": call.id, "to": call.to, "trunk": call.trunk}),
            PlaceCall(),
            schedule_timer(OutboundWait("ring"), delay_ms=RING_LIMIT_MS),
        ),
    )


def is_being_dialled(state: SessionState) -> bool:
    """Whether the session's call going out was decided but has no provider call yet."""
    return state.outbound is not None and state.call_id is None and not state.is_terminal


def dial_again(state: SessionState, gateway_id: str) -> Step:
    """The gateway dialling the call died before the provider's answer reached it (or before it
    asked): `gateway_id` took the session over and dials again, as a new generation (its claim
    on the dial is a new one), under the same call id, which is the provider's idempotency key:
    a call the dead gateway had placed is answered again, never placed twice."""
    call = state.outbound
    assert call is not None
    incident = RecordIncident(
        code="gateway_lost",
        summary=f"the gateway dialling the call died; {gateway_id} took the session over and dials again",
        severity="warning",
        context={"phase": str(state.phase), "generation": state.generation, "gateway": gateway_id},
    )
    return Step(state=state.evolve(generation=state.generation + 1), effects=(incident, PlaceCall()))


def still_to_dial(state: SessionState, call_id: str) -> bool:
    """Whether the session, as committed, still has call `call_id` to dial. The gateway asks
    before it dials: a worker publishes the dial before its transaction commits, and one killed
    in between leaves a directive whose decision never happened (no session, the placing lost)
    and is made again under the same ids; only the decision that stands is dialled."""
    call = state.outbound
    return call is not None and call.id == call_id and not state.is_terminal


def dialling_gateway(call_id: str, gateways: Sequence[str]) -> str:
    """The live gateway a campaign's claimed call is dialled through: spread over them by the
    call's id (its first four random bytes, after `call_`), the same one for the same call."""
    return gateways[int(call_id[5:13], 16) % len(gateways)]


def progressed(state: SessionState, progress: CallProgress) -> Step:
    """What the provider said of the call going out."""
    call = state.outbound
    if call is None or state.is_terminal:
        return unchanged(state)
    match progress:
        case Ringing() if call.progress == "dialing":
            ringing = state.evolve(outbound=call.model_copy(update={"progress": "ringing"}))
            return Step(state=ringing, effects=(LogEntry(kind="call.ringing", data={"call": call.id}),))
        case Answered() if call.progress != "answered":
            answered = state.evolve(outbound=call.model_copy(update={"progress": "answered"}))
            return Step(
                state=answered,
                effects=(
                    cancel_timer(OutboundWait("ring")),
                    schedule_timer(OutboundWait("verdict"), delay_ms=VERDICT_DEADLINE_MS),
                ),
            )
        case DialFailed(code, message) if call.progress != "answered":
            outcome, kept = failure_outcome(code)
            logged = LogEntry(
                kind="call.failed",
                data={"call": call.id, "outcome": outcome, "code": kept, "message": message},
            )
            over = state.evolve(outbound=call.model_copy(update={"outcome": outcome, "failure": kept}))
            ended = finish(over, END_REASONS.get(outcome, "call_failed"), dialect_of(over).closing(over))
            return Step(state=over, effects=(logged, cancel_timer(OutboundWait("ring")))).then(ended)
        case Said(text, start_ms, end_ms, by_callee=True):
            return _callee_said(state, call, Heard(text=text, start_ms=start_ms, end_ms=end_ms))
        case AskedNotToBeCalled(probability) if probability >= DO_NOT_CALL_PROBABILITY and not call.opted_out:
            asked = state.evolve(outbound=call.model_copy(update={"opted_out": True}))
            return opted_out(asked, "model", ends=False)
        case Said(by_callee=False) if call.leaving == "said":
            # The agent is saying the message: the call is hung up once it has stopped.
            return _rearmed(
                state, call.model_copy(update={"pieces": call.pieces + 1}), "message_said", MESSAGE_PAUSE_MS
            )
    return unchanged(state)


def waited(state: SessionState, wait: OutboundWait) -> Step:
    """A call going out waited long enough at a stage."""
    call = state.outbound
    if call is None or state.is_terminal:
        return unchanged(state)
    match wait.stage:
        case "ring" if call.progress != "answered":
            logged = LogEntry(
                kind="call.failed",
                data={
                    "call": call.id,
                    "outcome": "no_answer",
                    "code": "ring_limit",
                    "message": "rang too long",
                },
            )
            over = state.evolve(
                outbound=call.model_copy(update={"outcome": "no_answer", "failure": "ring_limit"})
            )
            ended = finish(over, END_REASONS["no_answer"], dialect_of(over).closing(over))
            return Step(state=over, effects=(logged,)).then(ended)
        case "verdict" if call.answered_by is None:
            return _decided(state, call, settle(_pieces(call.heard)))
        case "callee_paused" if call.answered_by is None and wait.number == call.pieces:
            return _decided(state, call, settle(_pieces(call.heard)))
        case "greeting_over" if call.leaving == "waiting" and wait.number == call.pieces:
            if not greeting_over(_pieces(call.heard), _greeting_pause(call)):
                return unchanged(state)
            return _leave_the_message(state, call)
        case "message_said" if call.leaving == "said":
            # Its latest pause, or the limit (numbered 0, before the agent said anything).
            return finish(state, MESSAGE_LEFT, dialect_of(state).closing(state))
    return unchanged(state)


def ended(before: SessionState, step: Step) -> Step:
    """`step`, which ended the session, with its call's outcome recorded once."""
    after = step.state
    call = after.outbound
    if call is None or before.is_terminal or not after.is_terminal:
        return step
    outcome, code = outcome_of(call, after.end_reason or "")
    data: dict[str, Any] = {
        "call": call.id,
        "to": call.to,
        "outcome": outcome,
        "answered_by": call.answered_by,
        "code": code,
        "campaign_id": call.campaign_id,
        "attempt": call.attempt,
    }
    recorded = call.model_copy(update={"outcome": outcome, "heard": ()})
    return Step(
        state=after.evolve(outbound=recorded),
        controls=step.controls,
        effects=(
            *step.effects,
            LogEntry(kind="call.attempted", data=data),
            OutboundEnded(id=call.id, outcome=outcome, answered_by=call.answered_by, code=code),
        ),
    )


def outcome_of(call: OutboundCall, end_reason: str) -> tuple[CallOutcome, str | None]:
    """What a call going out came to, once its session ended: what the provider or the verdict
    said; else an answered call is `completed`, one its placer stopped before the answer is
    `cancelled`, and any other end is `failed` with its reason."""
    if call.outcome is not None:
        return call.outcome, call.failure
    if call.progress == "answered":
        return "completed", None
    if end_reason in CANCELLED_BY:
        return "cancelled", end_reason
    return "failed", end_reason or None


# ── who answered ─────────────────────────────────────────────────────────────────────────


def _callee_said(state: SessionState, call: OutboundCall, piece: Heard) -> Step:
    if call.progress != "answered" or (call.answered_by is not None and call.leaving != "waiting"):
        return unchanged(state)
    listening = call.model_copy(
        update={"heard": (*call.heard, piece)[-MAXIMUM_HEARD_PIECES:], "pieces": call.pieces + 1}
    )
    if call.answered_by is not None:
        # A machine's greeting goes on: its end is awaited again from this piece.
        return _rearmed(state, listening, "greeting_over", _greeting_pause(listening))
    verdict = listen(_pieces(listening.heard))
    if verdict is not None:
        return _decided(state, listening, verdict)
    return _rearmed(state, listening, "callee_paused", CALLEE_PAUSE_MS)


def _rearmed(state: SessionState, call: OutboundCall, stage: OutboundStage, delay_ms: int) -> Step:
    """The call with a piece more counted, and its wait at `stage` armed anew from now (the one
    armed at the piece before is cancelled, and would find no row if its message came)."""
    return Step(
        state=state.evolve(outbound=call),
        effects=(
            cancel_timer(OutboundWait(stage, call.pieces - 1)),
            schedule_timer(OutboundWait(stage, call.pieces), delay_ms=delay_ms),
        ),
    )


def _decided(state: SessionState, call: OutboundCall, verdict: Verdict) -> Step:
    """Who answered is known: logged once, with the evidence; then the model is let speak, or
    the machine hung up on or left the message."""
    logged = LogEntry(
        kind="call.answered",
        data={"call": call.id, "answered_by": verdict.answered_by, "evidence": verdict.evidence},
    )
    stopped = (
        cancel_timer(OutboundWait("verdict")),
        cancel_timer(OutboundWait("callee_paused", call.pieces)),
    )
    if verdict.answered_by != "machine":
        answered = state.evolve(
            outbound=call.model_copy(update={"answered_by": verdict.answered_by, "heard": ()})
        )
        note = A_PERSON_ANSWERED if verdict.answered_by == "human" else NOBODY_SAID
        told = Step(state=answered, effects=(logged, *stopped))
        return told.then(dialect_of(answered).note(answered, note))
    machine = call.model_copy(update={"answered_by": "machine", "outcome": "voicemail"})
    if call.voicemail == "hangup" or not call.message:
        over = state.evolve(outbound=machine.model_copy(update={"heard": ()}))
        return Step(state=over, effects=(logged, *stopped)).then(
            finish(over, MACHINE_HUNG_UP, dialect_of(over).closing(over))
        )
    # The message is left once the greeting is over: when nothing more is heard for a while.
    waiting = state.evolve(outbound=machine.model_copy(update={"leaving": "waiting"}))
    return Step(
        state=waiting,
        effects=(
            logged,
            *stopped,
            schedule_timer(OutboundWait("greeting_over", call.pieces), delay_ms=_greeting_pause(call)),
        ),
    )


def _leave_the_message(state: SessionState, call: OutboundCall) -> Step:
    message = call.message or ""
    saying = state.evolve(outbound=call.model_copy(update={"leaving": "said", "heard": ()}))
    logged = LogEntry(kind="call.voicemail", data={"call": call.id, "chars": len(message)})
    said = dialect_of(saying).say(saying, LEAVE_THE_MESSAGE.format(message=message))
    limit = schedule_timer(OutboundWait("message_said", 0), delay_ms=MESSAGE_LIMIT_MS)
    return Step(state=saying, effects=(logged, limit)).then(said)


def _greeting_pause(call: OutboundCall) -> int:
    """How long after the greeting's last piece its end is looked for: a moment for the tone
    after "after the tone" (or the like), else a pause long enough to be no breath."""
    if greeting_over(_pieces(call.heard), TONE_SILENCE_MS):
        return TONE_SILENCE_MS
    return GREETING_END_SILENCE_MS


def _pieces(heard: tuple[Heard, ...]) -> list[Piece]:
    return [Piece(text=piece.text, start_ms=piece.start_ms, end_ms=piece.end_ms) for piece in heard]
