"""Admission: created → admitting → connected → listening, and the ways out of it."""

from __future__ import annotations

from typing import Any, Literal

from pipeline import delegation
from pipeline.errors import AdmissionRefused, SessionEnded
from pipeline.limits import (
    ADMISSION_TIMEOUT_MS,
    MAXIMUM_RECONNECT_ATTEMPTS,
    MAXIMUM_RECONNECT_DELAY_MS,
    RECONNECT_BACKOFF_MS,
)
from pipeline.live import SessionClose, commentary, instructions
from pipeline.prompt import offered_tools
from pipeline.state import IN_CALL, Phase, ResponseContext, SessionState
from pipeline.step import (
    CloseCall,
    OpenSideband,
    RecordIncident,
    Step,
    answering,
    schedule_timer,
    unchanged,
)
from pipeline.timers import AdmissionTimeout, SessionCeiling, SidebandReconnect, timer_name
from pipeline.transcript import (
    SAY_EXACTLY,
    ask_for_response,
    begin_directed,
    listen_again,
    may_respond,
    owed_next,
)
from pipeline.wire import (
    EndRequested,
    ResponseCancel,
    SessionUpdate,
    SessionUpdated,
    SidebandClosed,
    SidebandConnected,
)

# The names of the two admission timers (scheduled through `pipeline.timers`; named here for
# the tests and the end-to-end runs that fire them by name).
ADMISSION_TIMER = timer_name(AdmissionTimeout())
CEILING_TIMER = timer_name(SessionCeiling())

# Transcription model for the caller's audio: user transcript finals are what drive a turn.
TRANSCRIPTION_MODEL = "gpt-4o-transcribe"


def created(state: SessionState) -> Step:
    """A new session waits at most the admission timeout for its call to connect."""
    return Step(state=state, effects=(schedule_timer(AdmissionTimeout(), delay_ms=ADMISSION_TIMEOUT_MS),))


def begin_admission(state: SessionState, request_id: str | None = None) -> Step:
    """A connect request moves a created session to admitting; anything else is refused. The
    same request run again (its first run committed, then failed before it answered: Redis was
    away) finds its own admission and is answered as it was."""
    if state.is_terminal:
        raise SessionEnded(f"session is {state.phase}; it cannot connect")
    if state.phase is Phase.ADMITTING and request_id is not None and state.admitted_by == request_id:
        return unchanged(state)
    if state.phase is not Phase.CREATED:
        raise AdmissionRefused(f"session is {state.phase}; connect is allowed once, when created")
    return Step(state=state.evolve(phase=Phase.ADMITTING, admitted_by=request_id))


def attach_call(state: SessionState, call_id: str, medium: Literal["webrtc", "sip"] = "webrtc") -> Step:
    """The provider created the call: remember its id and have the gateway open the sideband.
    A session that failed meanwhile (admission timeout) hangs the fresh call up instead."""
    if state.is_terminal:
        return Step(
            state=state,
            effects=(CloseCall(reason="session_already_over", hangup=True, call_id=call_id),),
        )
    if state.phase is not Phase.ADMITTING:
        raise AdmissionRefused(f"session is {state.phase}; a call attaches only while admitting")
    return Step(state=state.evolve(call_id=call_id, medium=medium), effects=(OpenSideband(call_id=call_id),))


def fail_admission(state: SessionState, code: str, detail: str) -> Step:
    """Creating the provider call failed: the session fails with the provider's reason. Only
    a session still being admitted can fail admission: the same message replayed later (a
    dead letter) must not fail the call that connected since."""
    if state.phase not in (Phase.CREATED, Phase.ADMITTING):
        return unchanged(state)
    return fail(state, code, f"admission failed: {detail}")


def takeover_refusal(
    dead_gateway: str, new_gateway: str, *, dead_is_alive: bool, new_is_alive: bool
) -> str | None:
    """Why a session may not move from `dead_gateway` to `new_gateway` now, or None if it may.
    A takeover is asked for when a gateway's liveness key lapsed, but the message may run much
    later (a retry, a replayed dead letter): it holds only if the old owner is still dead and
    the new one alive (a gateway restarting under its own id takes its sessions back)."""
    if dead_is_alive and dead_gateway != new_gateway:
        return f"gateway {dead_gateway} is alive"
    if not new_is_alive:
        return f"gateway {new_gateway}, which would take the sessions over, is not alive"
    return None


def sideband_connected(state: SessionState, event: SidebandConnected) -> Step:
    """The sideband is up: configure the session so that Switchboard drives every response.
    A re-opened sideband of a live call needs no configuration (the provider kept it)."""
    if state.is_terminal:
        return unchanged(state)
    if state.sideband_down:
        state = state.evolve(sideband_down=False, reconnect_attempts=0)
        if state.phase in IN_CALL:
            return _reconnected(state)
    if state.phase in (Phase.CREATED, Phase.ADMITTING):
        # A Live session was configured when it was created or accepted; the update only
        # confirms its delegation settings (the one thing a Live sideband may change), so the
        # provider's session.updated says the sideband is heard, as on Realtime.
        configuration = live_update(state) if state.is_live else session_configuration(state)
        return Step(
            state=state.evolve(phase=Phase.CONNECTED, call_id=event.call_id),
            controls=(SessionUpdate(session=configuration),),
            effects=(schedule_timer(SessionCeiling(), delay_ms=state.limits.max_session_seconds * 1_000),),
        )
    return unchanged(state)


def session_updated(state: SessionState, event: SessionUpdated) -> Step:
    """The provider confirmed the configuration: the session listens, and greets the caller if
    it was created with a greeting (once; never on a closed line)."""
    if state.phase is Phase.CONNECTED and event.type == "session.updated" and state.is_live:
        return _live_listening(state.evolve(phase=Phase.LISTENING))
    if state.phase is Phase.CONNECTED and event.type == "session.updated":
        listening = state.evolve(phase=Phase.LISTENING)
        greeting = state.greeting
        if greeting is None or state.greeted or listening.line_closed:
            # What was asked for while the session was configured (a person's words) starts now.
            return owed_next(listening) if state.turn is None else Step(state=listening)
        greeted = listening.evolve(greeted=True)
        if greeting.say is not None:
            instructions = SAY_EXACTLY.format(text=greeting.say)
        else:
            instructions = f"{state.instructions}\n\n{greeting.reply}"
        # Tool-free: a model offered end_call while it greets may hang up before the caller speaks.
        context = ResponseContext(
            instructions=instructions,
            max_output_tokens=state.limits.max_output_tokens,
            input_item_id="",
            tool_choice="none",
        )
        return begin_directed(greeted, context)
    return unchanged(state)


def _live_listening(listening: SessionState) -> Step:
    """A Live session listens: the model holds the conversation, so a greeting is context it
    speaks from (the words as commentary, a reply's steer as instructions), once."""
    greeting = listening.greeting
    if greeting is None or listening.greeted or listening.line_closed:
        return delegation.deliver_owed(listening)
    greeted = listening.evolve(greeted=True)
    if greeting.say is not None:
        return Step(state=greeted, controls=(commentary(greeting.say, delegation_id=None),))
    assert greeting.reply is not None
    return Step(state=greeted, controls=(instructions(greeting.reply),))


def end(state: SessionState, event: EndRequested) -> Step:
    """An end request closes the call; ending an ended session changes nothing. The request
    that asked is answered: 202 if it ended the call, 409 if the call was over already."""
    if state.is_terminal:
        step = unchanged(state)
        status = 409
        body: dict[str, Any] = {
            "error": {"code": "session_ended", "message": f"session is {state.phase}"},
        }
    else:
        step = finish(state, event.reason)
        status = 202
        body = {"status": "ending", "reason": event.reason}
    return answering(step, event.request_id, event.gateway_id, status, body)


def finish(state: SessionState, reason: str) -> Step:
    """End the session normally: the sideband is closed and the provider call hung up."""
    return Step(
        state=state.evolve(phase=Phase.ENDED, end_reason=reason, turn=None),
        controls=_closing(state),
        effects=(CloseCall(reason=reason, hangup=state.call_id is not None),),
    )


def _closing(state: SessionState) -> tuple[SessionClose, ...]:
    """What a Live call ending is told on its sideband: `session.close`, whose answer carries
    the final usage (without it, finalization is unconfirmed, §2.4). A Realtime call is hung
    up alone."""
    live_call = state.is_live and state.phase in IN_CALL and not state.sideband_down
    return (SessionClose(),) if live_call else ()


def sideband_closed(state: SessionState, event: SidebandClosed) -> Step:
    """The provider closed the sideband: a normal close ends the call. Anything else is a lost
    sideband: recorded, then re-opened on the same call after a backoff, as a new generation
    (events and controls of the old one are fenced off)."""
    if state.is_terminal or event.by_host:
        return unchanged(state)
    if event.code == 1000:
        return Step(
            state=state.evolve(phase=Phase.ENDED, end_reason="provider_call_ended", turn=None),
            effects=(CloseCall(reason="provider_call_ended", hangup=False),),
        )
    detail = f"sideband closed with code {event.code} {event.reason}".strip()
    if state.call_id is None:
        return fail(state, "sideband_lost", detail)
    delay_ms = min(RECONNECT_BACKOFF_MS * (state.reconnect_attempts + 1), MAXIMUM_RECONNECT_DELAY_MS)
    generation = state.generation + 1
    incident = RecordIncident(
        code="sideband_lost",
        summary=detail,
        severity="warning",
        context={
            "phase": str(state.phase),
            "generation": state.generation,
            "attempts": state.reconnect_attempts,
        },
    )
    return Step(
        state=state.evolve(sideband_down=True, generation=generation),
        effects=(incident, schedule_timer(SidebandReconnect(generation), delay_ms=delay_ms)),
    )


def reconnect_due(state: SessionState, generation: int) -> Step:
    """The backoff is over: re-open the sideband, or fail once the attempts are spent."""
    if state.is_terminal or not state.sideband_down or generation != state.generation:
        return unchanged(state)
    if state.reconnect_attempts >= MAXIMUM_RECONNECT_ATTEMPTS:
        return fail(
            state,
            "sideband_reconnect_exhausted",
            f"the sideband could not be re-opened in {MAXIMUM_RECONNECT_ATTEMPTS} attempts",
        )
    assert state.call_id is not None
    return Step(
        state=state.evolve(reconnect_attempts=state.reconnect_attempts + 1),
        effects=(OpenSideband(call_id=state.call_id),),
    )


def _reconnected(state: SessionState) -> Step:
    """The sideband is back. Whatever the provider said meanwhile is gone, and so may be a
    control sent while no sideband listened. A response the caller is owed is asked for again,
    under a new response deadline (a running one is cancelled first; if the provider still holds
    it active, the request is refused and repeated when that response ends), so the session never
    waits for a response.done nobody will see. A tool that runs still gets its output when it finishes,
    without driving a response."""
    if state.is_live:
        # Live has no response to re-ask: the model is asked to re-confirm what the gap may have
        # swallowed, and the answers that waited for the sideband go out.
        reconfirmed = delegation.reconfirmed(state)
        return reconfirmed.then(delegation.deliver_owed(reconfirmed.state))
    turn = state.turn
    if turn is None:
        return Step(state=state)
    cancel = (ResponseCancel(response_id=turn.response_id),) if turn.response_id else ()
    if not may_respond(state, turn.context):
        # The line closed meanwhile: what was owed is not asked for again.
        return Step(state=state, controls=cancel).then(listen_again(state))
    chain = state.chain
    if chain.pending is not None:
        moved_on = chain.model_copy(update={"response_completed": True, "continuation_allowed": False})
        return Step(state=state.evolve(chain=moved_on), controls=cancel)
    cancelled = Step(state=state.evolve(chain=state.chain.next_turn()), controls=cancel)
    return cancelled.then(ask_for_response(cancelled.state, turn))


def taken_over(state: SessionState, gateway_id: str) -> Step:
    """The gateway holding the sideband died and `gateway_id` took the session over: it opens
    the sideband again on the same call, as a new generation, at once. If the provider refuses,
    the usual reconnect attempts follow, then the failure (with a hangup)."""
    if state.is_terminal or state.call_id is None:
        return unchanged(state)
    generation = state.generation + 1
    incident = RecordIncident(
        code="gateway_lost",
        summary=f"the gateway holding the sideband died; {gateway_id} took the session over",
        severity="warning",
        context={"phase": str(state.phase), "generation": state.generation, "gateway": gateway_id},
    )
    return Step(
        state=state.evolve(generation=generation, sideband_down=True, reconnect_attempts=1),
        effects=(incident, OpenSideband(call_id=state.call_id)),
    )


def timer_fired(state: SessionState, timer: AdmissionTimeout | SessionCeiling) -> Step:
    """A timer checks the state it finds: it acts only if its condition still holds."""
    if state.is_terminal:
        return unchanged(state)
    if isinstance(timer, AdmissionTimeout) and state.phase in (Phase.CREATED, Phase.ADMITTING):
        return fail(state, "admission_timeout", "the call did not connect within the admission timeout")
    if isinstance(timer, SessionCeiling) and state.phase in IN_CALL:
        return finish(state, "session_timeout")
    return unchanged(state)


def fail(state: SessionState, code: str, summary: str) -> Step:
    """Fail the session: a durable incident, the sideband closed and the call hung up."""
    return Step(
        state=state.evolve(phase=Phase.FAILED, end_reason=code, turn=None),
        controls=_closing(state),
        effects=(
            RecordIncident(code=code, summary=summary, context={"phase": str(state.phase)}),
            CloseCall(reason=code, hangup=state.call_id is not None),
        ),
    )


def session_configuration(state: SessionState) -> dict[str, Any]:
    """The `session.update` body: the host creates and interrupts responses itself, so the
    provider's VAD only reports speech, and the caller's audio is transcribed. On Live, the
    startup configuration a session is created or accepted with (the gateway adds the model)."""
    if state.is_live:
        return live_configuration(state)
    configuration: dict[str, Any] = {
        "type": "realtime",
        "instructions": state.instructions,
        "audio": {
            "input": {
                "transcription": {"model": TRANSCRIPTION_MODEL},
                "turn_detection": turn_detection(state),
            }
        },
    }
    tools = offered_tools(state)
    if tools:
        configuration["tools"] = tools
        configuration["tool_choice"] = "auto"
    return configuration


def live_delegation(state: SessionState) -> dict[str, Any]:
    """Client delegation: the tasks come to Switchboard, and the provider acknowledges each
    aloud after the session's delay unless Switchboard's progress note comes first."""
    setup = state.live.setup if state.live is not None else None
    delay = setup.acknowledgement_delay_ms if setup is not None else 0
    return {"type": "client", "acknowledgement_delay_ms": delay}


def live_configuration(state: SessionState) -> dict[str, Any]:
    """A Live session's startup configuration (LIVE_PROTOCOL.md §2.1): its instructions are
    fixed from here on (changes are appended), and its delegations are the client's."""
    return {"instructions": state.instructions, "delegation": live_delegation(state)}


def live_update(state: SessionState) -> dict[str, Any]:
    """The `session.update` a Live sideband sends: only delegation settings may change."""
    return {"delegation": live_delegation(state)}


def turn_detection(state: SessionState) -> dict[str, Any] | None:
    """Speech is detected (never answered or interrupted by the provider) unless the line is
    held: then nothing is detected, so the agent hears nothing."""
    if state.held:
        return None
    detection: dict[str, Any] = {"type": "server_vad", "create_response": False, "interrupt_response": False}
    if state.phone is not None and state.phone.silences is not None:
        # The provider reports the caller's silence after this long (the route counts them).
        detection["idle_timeout_ms"] = state.phone.silence_ms
    return detection


def turn_detection_update(state: SessionState) -> dict[str, Any]:
    """The `session.update` body that switches turn detection to what the line needs."""
    return {"type": "realtime", "audio": {"input": {"turn_detection": turn_detection(state)}}}
