"""A call Switchboard places, without a database or a socket: dialled once when admitted, its
progress as the Live provider reports it (ringing, answered, failed), who answered decided from
the callee's first words, a machine hung up on or left a message, and what the call came to
recorded once when its session ends — every control checked strictly against `openai.types.live`."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.live.configuration import WAIT_FOR_THE_ANSWER, live_configuration
from pipeline.outbound.dialing import (
    A_PERSON_ANSWERED,
    CALLEE_PAUSE_MS,
    dialling_gateway,
)
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import LogEntry, OutboundEnded, PlaceCall, ScheduleTimer, Step
from pipeline.session.timeline import Speaker
from pipeline.session.timers import OutboundWait, timer_name
from pipeline.session.wire import control_wire
from simulator.live_oracle import live_wire_errors
from tests.pipeline import events as ev
from tests.pipeline import live_calls as lc

TO = "+14155550123"


def _outbound(voicemail: str = "hangup", message: str | None = None) -> dict[str, Any]:
    return {
        "id": "call_1",
        "to": TO,
        "trunk": "main",
        "caller_number": "+12125550100",
        "voicemail": voicemail,
        "message": message,
    }


def _run(state: SessionState, *raws: dict[str, Any]) -> tuple[SessionState, list[Step]]:
    steps = []
    for raw in raws:
        step = ev.step_of(state, raw)
        for index, control in enumerate(step.controls):
            wire = control_wire(control.model_copy(update={"event_id": f"ctl_1_{index}"}))
            assert live_wire_errors(wire, direction="client") == [], wire
        steps.append(step)
        state = step.state
    return state, steps


BEGUN = {"type": "switchboard.admission_begun", "request_id": "req_1"}


def _dialled(**outbound: Any) -> tuple[SessionState, list[Step]]:
    created = lc.created(None, outbound=_outbound(**outbound))
    return _run(SessionState(), created, BEGUN)


def _ringing(**outbound: Any) -> SessionState:
    state, _ = _dialled(**outbound)
    state, _ = _run(
        state,
        ev.call_attached(lc.LIVE_ID, medium="sip"),
        ev.sideband_connected(lc.LIVE_ID),
        {"type": "session.updated", "event_id": "ev_u", "session": {"id": lc.LIVE_ID}},
        {"type": "transport.ringing", "event_id": "ev_r", "session_id": lc.LIVE_ID},
    )
    return state


def _answered(**outbound: Any) -> SessionState:
    state, _ = _run(
        _ringing(**outbound), {"type": "transport.answered", "event_id": "ev_a", "session_id": lc.LIVE_ID}
    )
    return state


def _entries(steps: list[Step], kind: str) -> list[dict[str, Any]]:
    return [e.data for step in steps for e in step.effects if isinstance(e, LogEntry) and e.kind == kind]


def _fired(state: SessionState, wait: OutboundWait) -> tuple[SessionState, list[Step]]:
    return _run(state, ev.timer_fired(timer_name(wait)))


def _ended(steps: list[Step]) -> OutboundEnded:
    [ended] = [e for step in steps for e in step.effects if isinstance(e, OutboundEnded)]
    return ended


def test_a_call_going_out_is_dialled_once_when_its_admission_begins() -> None:
    """The dial is decided once, with the ringing given its limit; a re-run admission dials nothing."""
    state, steps = _dialled()
    assert [e for e in steps[1].effects if isinstance(e, PlaceCall)] == [PlaceCall()]
    assert _entries(steps, "call.dialing") == [{"call": "call_1", "to": TO, "trunk": "main"}]
    _again, more = _run(state, BEGUN)
    assert not any(isinstance(e, PlaceCall) for step in more for e in step.effects)


def test_the_model_of_a_call_going_out_is_told_to_wait_for_the_verdict() -> None:
    """A Live model's speech cannot be cut, so its startup instructions ask it to wait."""
    state, _ = _dialled()
    assert live_configuration(state)["instructions"].startswith(WAIT_FOR_THE_ANSWER)


def test_ringing_is_logged_once() -> None:
    state, _ = _dialled()
    state, steps = _run(
        state,
        ev.call_attached(lc.LIVE_ID, medium="sip"),
        ev.sideband_connected(lc.LIVE_ID),
        {"type": "transport.ringing", "event_id": "ev_r1", "session_id": lc.LIVE_ID},
        {"type": "transport.ringing", "event_id": "ev_r2", "session_id": lc.LIVE_ID},
    )
    assert _entries(steps, "call.ringing") == [{"call": "call_1"}]
    assert state.outbound is not None and state.outbound.progress == "ringing"


@pytest.mark.parametrize(
    ("code", "outcome", "reason"),
    [
        ("busy", "busy", "call_busy"),
        ("no_answer", "no_answer", "call_no_answer"),
        ("weird_9", "failed", "call_failed"),
    ],
)
def test_a_call_that_does_not_connect_ends_with_its_outcome(code: str, outcome: str, reason: str) -> None:
    """`transport.failed` ends the call: busy, unanswered, or failed with the code kept as it came."""
    failed = {
        "type": "transport.failed",
        "event_id": "ev_f",
        "session_id": lc.LIVE_ID,
        "error": {"type": "call_error", "code": code, "message": "no luck"},
    }
    state, steps = _run(_ringing(), failed)
    assert state.phase is Phase.ENDED and state.end_reason == reason
    [logged] = _entries(steps, "call.failed")
    assert (logged["outcome"], logged["message"]) == (outcome, "no luck")
    ended = _ended(steps)
    assert (ended.outcome, ended.answered_by) == (outcome, None)
    assert ended.code == logged["code"]
    [attempted] = _entries(steps, "call.attempted")
    assert attempted["outcome"] == outcome


def test_a_person_who_says_a_few_words_and_waits_is_a_person() -> None:
    """ "Hello?" then a pause: when the pause is long enough the person is greeted, once."""
    state, steps = _run(_answered(), lc.said("Hello?", 1_000))
    assert _entries(steps, "call.answered") == []
    timers = [e for e in steps[0].effects if isinstance(e, ScheduleTimer)]
    assert [(t.name, t.delay_ms) for t in timers] == [
        (timer_name(OutboundWait("callee_paused", 1)), CALLEE_PAUSE_MS)
    ]
    state, fired = _fired(state, OutboundWait("callee_paused", 1))
    [answered] = _entries(fired, "call.answered")
    assert answered["answered_by"] == "human" and answered["evidence"]
    assert [c.content for step in fired for c in step.controls] == [A_PERSON_ANSWERED]
    assert state.outbound is not None and state.outbound.answered_by == "human" and state.outbound.heard == ()
    # The verdict is not given twice.
    state, again = _fired(state, OutboundWait("verdict"))
    assert _entries(again, "call.answered") == [] and not [c for s in again for c in s.controls]


def test_a_pause_armed_before_the_callee_spoke_again_finds_nothing_to_decide() -> None:
    """Each piece re-arms the pause; the one before it fires and decides nothing."""
    state, _ = _run(_answered(), lc.said("Hello?", 1_000), lc.said("Hello, who is it?", 2_400))
    state, fired = _fired(state, OutboundWait("callee_paused", 1))
    assert _entries(fired, "call.answered") == []


def test_a_machine_s_words_hang_the_call_up() -> None:
    """A greeting that asks for a message is a machine: logged, and hung up on (`voicemail`)."""
    greeting = "Hi, you have reached Dana. Please leave a message after the tone."
    state, steps = _run(_answered(), lc.said(greeting, 1_000))
    [answered] = _entries(steps, "call.answered")
    assert answered["answered_by"] == "machine"
    assert state.phase is Phase.ENDED and state.end_reason == "answering_machine"
    assert (_ended(steps).outcome, _ended(steps).answered_by) == ("voicemail", "machine")


def test_a_message_is_left_once_the_greeting_is_over_then_the_call_hangs_up() -> None:
    message = "This is Acme: your appointment is tomorrow at nine."
    state, steps = _run(
        _answered(voicemail="leave_message", message=message),
        lc.said("You have reached Dana, please leave a message after the tone.", 1_000),
    )
    assert _entries(steps, "call.answered")[0]["answered_by"] == "machine"
    assert state.phase is not Phase.ENDED and not [c for s in steps for c in s.controls]
    # The greeting goes on: its end is awaited again from its last piece.
    state, _ = _run(state, lc.said("Beep.", 6_000))
    state, early = _fired(state, OutboundWait("greeting_over", state.outbound.pieces - 1))
    assert not [c for s in early for c in s.controls]
    state, over = _fired(state, OutboundWait("greeting_over", state.outbound.pieces))
    [said] = [c for s in over for c in s.controls]
    assert said.type == "session.commentary.append" and message in said.content
    # Said once; when the agent has said it and paused, the call hangs up.
    state, _spoken = _run(state, lc.said(message, 9_000, Speaker.AGENT))
    assert state.phase is not Phase.ENDED
    state, done = _fired(state, OutboundWait("message_said", state.outbound.pieces))
    assert state.phase is Phase.ENDED and state.end_reason == "voicemail_left"
    assert _ended(done).outcome == "voicemail"


def test_nothing_heard_by_the_deadline_is_unknown_and_the_model_speaks() -> None:
    _state, fired = _fired(_answered(), OutboundWait("verdict"))
    [answered] = _entries(fired, "call.answered")
    assert answered["answered_by"] == "unknown"
    assert [c.type for s in fired for c in s.controls] == ["session.instructions.append"]


def test_a_call_that_rings_past_its_limit_is_unanswered() -> None:
    state, fired = _fired(_ringing(), OutboundWait("ring"))
    assert state.end_reason == "call_no_answer" and _ended(fired).outcome == "no_answer"
    # An answered call's ring limit, fired late, changes nothing.
    answered, late = _fired(_answered(), OutboundWait("ring"))
    assert answered.phase is not Phase.ENDED and not late[0].effects


def test_an_answered_call_that_ends_is_completed_and_recorded_once() -> None:
    state, _ = _fired(_answered(), OutboundWait("verdict"))
    state, steps = _run(state, ev.end_requested(), ev.end_requested())
    assert _ended(steps).outcome == "completed"
    assert len([e for s in steps for e in s.effects if isinstance(e, OutboundEnded)]) == 1


def test_a_call_ended_by_its_placer_before_the_answer_is_cancelled() -> None:
    _state, steps = _run(_ringing(), ev.end_requested())
    assert (_ended(steps).outcome, _ended(steps).code) == ("cancelled", "app_ended")


def test_a_dial_the_provider_refused_fails_with_its_reason() -> None:
    state, _ = _dialled()
    state, steps = _run(state, ev.admission_failed("dial_refused", "provider answered 403"))
    assert state.phase is Phase.FAILED
    assert (_ended(steps).outcome, _ended(steps).code) == ("failed", "dial_refused")


def test_an_inbound_call_has_no_outcome() -> None:
    state, steps = _run(SessionState(), *lc.listening(), ev.end_requested())
    assert state.outbound is None
    assert not [e for s in steps for e in s.effects if isinstance(e, OutboundEnded)]


def _decided(probability: float) -> dict[str, Any]:
    return {
        "type": "decision.event",
        "event_id": f"ev_d{probability}",
        "delegation_id": None,
        "trigger_id": "trg_1",
        "source_event_type": "session.input_transcript.delta",
        "event": {
            "type": "decision.completed",
            "decision": {
                "model": "gpt-5.5",
                "answers": [{"type": "predicate", "name": "do_not_call", "probability": probability}],
            },
        },
    }


def test_a_callee_the_provider_hears_ask_not_to_be_called_is_suppressed_once_and_the_call_goes_on() -> None:
    from pipeline.session.step import Suppress

    state, _ = _fired(_answered(), OutboundWait("verdict"))
    state, unsure = _run(state, _decided(0.5))
    assert not [e for s in unsure for e in s.effects if isinstance(e, Suppress)]
    state, steps = _run(state, _decided(0.97), _decided(0.99))
    assert [e for s in steps for e in s.effects if isinstance(e, Suppress)] == [
        Suppress(number=TO, source="model")
    ]
    assert _entries(steps, "call.opted_out") == [{"by": "model"}]
    assert state.phase is not Phase.ENDED  # the model says it will not call again, and goodbye


def test_a_call_going_out_asks_the_provider_s_decisions_whether_the_callee_opts_out() -> None:
    state, _ = _dialled()
    [trigger] = live_configuration(state)["triggers"]
    assert trigger["decisions"]["questions"][0]["name"] == "do_not_call"


def test_a_callee_who_presses_the_opt_out_key_is_suppressed_and_the_call_ends() -> None:
    from pipeline.session.step import Suppress

    created = lc.created(None, outbound=_outbound(), phone={"dialled": TO, "keys": {"9": "opt_out"}})
    state, _ = _run(SessionState(), created, BEGUN)
    state, _ = _run(
        state,
        ev.call_attached(lc.LIVE_ID, medium="sip"),
        ev.sideband_connected(lc.LIVE_ID),
        {"type": "session.updated", "event_id": "ev_u", "session": {"id": lc.LIVE_ID}},
        {"type": "transport.answered", "event_id": "ev_a", "session_id": lc.LIVE_ID},
    )
    state, _ = _fired(state, OutboundWait("verdict"))
    state, steps = _run(state, {"type": "transport.dtmf.received", "event_id": "ev_k", "event": "9"})
    assert [e for s in steps for e in s.effects if isinstance(e, Suppress)] == [
        Suppress(number=TO, source="opt_out")
    ]
    assert _entries(steps, "call.opted_out") == [{"by": "key"}]
    assert (state.phase, state.end_reason) == (Phase.ENDED, "opted_out")
    assert _ended(steps).outcome == "completed"


def test_a_campaign_s_call_is_dialled_through_the_same_gateway_every_time() -> None:
    """The gateway a claimed call is dialled through is picked by the call's id (its first four
    random bytes): the same call, the same gateway; the calls spread over every gateway."""
    gateways = ["gw1", "gw2", "gw3"]

    assert dialling_gateway("call_00000004ffffffff", gateways) == "gw2"
    assert dialling_gateway("call_00000005", gateways) == "gw3"
    assert {dialling_gateway(f"call_{index:08x}", gateways) for index in range(9)} == set(gateways)
