"""Admission: created → admitting → connected → listening, and the ways out of it."""

from __future__ import annotations

from typing import Any

from pipeline.errors import AdmissionRefused, SessionEnded
from pipeline.limits import ADMISSION_TIMEOUT_MS
from pipeline.state import LIVE_PHASES, Phase, SessionState
from pipeline.step import CloseCall, OpenSideband, RecordIncident, ScheduleTimer, Step, unchanged
from pipeline.wire import EndRequested, SessionUpdate, SessionUpdated, SidebandClosed, SidebandConnected

ADMISSION_TIMER = "admission_timeout"
CEILING_TIMER = "session_ceiling"

# Transcription model for the caller's audio: user transcript finals are what drive a turn.
TRANSCRIPTION_MODEL = "gpt-4o-transcribe"


def created(state: SessionState) -> Step:
    """A new session waits at most the admission timeout for its call to connect."""
    return Step(state=state, effects=(ScheduleTimer(name=ADMISSION_TIMER, delay_ms=ADMISSION_TIMEOUT_MS),))


def begin_admission(state: SessionState) -> Step:
    """A connect request moves a created session to admitting; anything else is refused."""
    if state.is_terminal:
        raise SessionEnded(f"session is {state.phase}; it cannot connect")
    if state.phase is not Phase.CREATED:
        raise AdmissionRefused(f"session is {state.phase}; connect is allowed once, when created")
    return Step(state=state.evolve(phase=Phase.ADMITTING))


def attach_call(state: SessionState, call_id: str) -> Step:
    """The provider created the call: remember its id and have the gateway open the sideband.
    A session that failed meanwhile (admission timeout) hangs the fresh call up instead."""
    if state.is_terminal:
        return Step(
            state=state,
            effects=(CloseCall(reason="session_already_over", hangup=True, call_id=call_id),),
        )
    if state.phase is not Phase.ADMITTING:
        raise AdmissionRefused(f"session is {state.phase}; a call attaches only while admitting")
    return Step(state=state.evolve(call_id=call_id), effects=(OpenSideband(call_id=call_id),))


def fail_admission(state: SessionState, code: str, detail: str) -> Step:
    """Creating the provider call failed: the session fails with the provider's reason."""
    if state.is_terminal:
        return unchanged(state)
    return fail(state, code, f"admission failed: {detail}")


def sideband_connected(state: SessionState, event: SidebandConnected) -> Step:
    """The sideband is up: configure the session so that Switchboard drives every response."""
    if state.is_terminal:
        return unchanged(state)
    if state.phase in (Phase.CREATED, Phase.ADMITTING):
        return Step(
            state=state.evolve(phase=Phase.CONNECTED, call_id=event.call_id),
            controls=(SessionUpdate(session=session_configuration(state)),),
            effects=(ScheduleTimer(name=CEILING_TIMER, delay_ms=state.limits.max_session_seconds * 1_000),),
        )
    return unchanged(state)


def session_updated(state: SessionState, event: SessionUpdated) -> Step:
    """The provider confirmed the configuration: the session listens."""
    if state.phase is Phase.CONNECTED and event.type == "session.updated":
        return Step(state=state.evolve(phase=Phase.LISTENING))
    return unchanged(state)


def end(state: SessionState, event: EndRequested) -> Step:
    """An end request closes the call; ending an ended session changes nothing."""
    if state.is_terminal:
        return unchanged(state)
    return finish(state, event.reason)


def finish(state: SessionState, reason: str) -> Step:
    """End the session normally: the sideband is closed and the provider call hung up."""
    return Step(
        state=state.evolve(phase=Phase.ENDED, end_reason=reason, turn=None),
        effects=(CloseCall(reason=reason, hangup=state.call_id is not None),),
    )


def sideband_closed(state: SessionState, event: SidebandClosed) -> Step:
    """The provider closed the sideband: a normal close ends the call, anything else fails it."""
    if state.is_terminal or event.by_host:
        return unchanged(state)
    if event.code == 1000:
        return Step(
            state=state.evolve(phase=Phase.ENDED, end_reason="provider_call_ended", turn=None),
            effects=(CloseCall(reason="provider_call_ended", hangup=False),),
        )
    return fail(state, "sideband_lost", f"sideband closed with code {event.code} {event.reason}".strip())


def timer_fired(state: SessionState, name: str) -> Step:
    """A timer checks the state it finds: it acts only if its condition still holds."""
    if state.is_terminal:
        return unchanged(state)
    if name == ADMISSION_TIMER and state.phase in (Phase.CREATED, Phase.ADMITTING):
        return fail(state, "admission_timeout", "the call did not connect within the admission timeout")
    if name == CEILING_TIMER and state.phase in LIVE_PHASES:
        return finish(state, "session_timeout")
    return unchanged(state)


def fail(state: SessionState, code: str, summary: str) -> Step:
    """Fail the session: a durable incident, the sideband closed and the call hung up."""
    return Step(
        state=state.evolve(phase=Phase.FAILED, end_reason=code, turn=None),
        effects=(
            RecordIncident(code=code, summary=summary, context={"phase": str(state.phase)}),
            CloseCall(reason=code, hangup=state.call_id is not None),
        ),
    )


def session_configuration(state: SessionState) -> dict[str, Any]:
    """The `session.update` body: the host creates and interrupts responses itself, so the
    provider's VAD only reports speech, and the caller's audio is transcribed."""
    configuration: dict[str, Any] = {
        "type": "realtime",
        "instructions": state.instructions,
        "audio": {
            "input": {
                "transcription": {"model": TRANSCRIPTION_MODEL},
                "turn_detection": {
                    "type": "server_vad",
                    "create_response": False,
                    "interrupt_response": False,
                },
            }
        },
    }
    if state.tools:
        configuration["tools"] = [dict(tool) for tool in state.tools]
        configuration["tool_choice"] = "auto"
    return configuration
