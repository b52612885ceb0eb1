"""One error code per state (docs/api.md, "One code per state"): whatever the verb, and whether
the gateway (reading the record) or the worker (applying the request in the call's order)
refuses it, a session that is over answers `session_ended` with its status and end reason, and
one whose call is not connected yet answers `session_not_connected` with its status."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.session.refusals import not_in_call, over
from pipeline.session.state import IN_CALL, TERMINAL_PHASES, Phase, SessionState
from pipeline.session.step import AnswerRequest
from tests.pipeline import events as ev

_ASKED = {"request_id": "req_1", "gateway_id": "gw1"}
# Every request a worker answers that needs the call in progress, as the gateway logs it.
_NEEDS_THE_CALL: dict[str, dict[str, Any]] = {
    "agent/say": {"type": "switchboard.agent_say", "text": "One moment."},
    "agent/reply": {"type": "switchboard.agent_reply", "instructions": "Offer a callback."},
    "hold": {"type": "switchboard.hold", "held": True},
    "unhold": {"type": "switchboard.hold", "held": False},
    "attention": {"type": "switchboard.attention", "reason": "a refund", "wait_s": 30},
    "collect": {"type": "switchboard.collect", "tool": "take_payment", "prompt": "Key in your card."},
    "supervisor": {
        "type": "switchboard.supervisor",
        "by": {"id": "sup_1", "name": "Sam"},
        "verb": {"type": "say", "text": "Hello."},
    },
}
# And those that only need the session not to be over.
_NEEDS_IT_NOT_OVER: dict[str, dict[str, Any]] = {
    "end": {"type": "switchboard.end_requested", "reason": "app_ended"},
    "prompt": {"type": "switchboard.prompt_set", "name": "tone", "text": "Be brief."},
}
_NOT_CONNECTED = {
    "created": [ev.session_created()],
    "admitting": [ev.session_created(), ev.admission_begun()],
}
_OVER = {
    ("ended", "caller_hung_up"): [*ev.listening(), ev.sideband_closed(1000)],
    ("ended", "app_ended"): [*ev.listening(), ev.end_requested()],
    ("failed", "provider_unavailable"): [ev.session_created(), ev.admission_begun(), ev.admission_failed()],
}


def _answered(state: SessionState, raw: dict[str, Any]) -> AnswerRequest:
    [answer] = [e for e in ev.step_of(state, {**raw, **_ASKED}).effects if isinstance(e, AnswerRequest)]
    return answer


@pytest.mark.parametrize("phase", list(Phase))
def test_each_phase_has_one_answer_for_a_request_that_needs_the_call(phase: Phase) -> None:
    refusal = not_in_call(str(phase), "caller_hung_up" if phase in TERMINAL_PHASES else None)
    if phase in IN_CALL:
        assert refusal is None
    elif phase in TERMINAL_PHASES:
        assert refusal is not None and refusal.body()["error"] == {
            "code": "session_ended",
            "message": f"session is {phase} (caller_hung_up)",
            "status": str(phase),
            "end_reason": "caller_hung_up",
        }
    else:
        assert refusal is not None and refusal.body()["error"]["code"] == "session_not_connected"
        assert refusal.body()["error"]["status"] == str(phase)
    assert (over(str(phase), None) is not None) == (phase in TERMINAL_PHASES)


@pytest.mark.parametrize("verb", sorted(_NEEDS_THE_CALL))
@pytest.mark.parametrize("status", sorted(_NOT_CONNECTED))
def test_a_verb_that_needs_the_call_answers_session_not_connected_before_it(verb: str, status: str) -> None:
    answer = _answered(ev.state_after(_NOT_CONNECTED[status]), _NEEDS_THE_CALL[verb])
    assert answer.status == 409
    assert answer.body["error"]["code"] == "session_not_connected"
    assert answer.body["error"]["status"] == status


@pytest.mark.parametrize("verb", sorted({**_NEEDS_THE_CALL, **_NEEDS_IT_NOT_OVER}))
@pytest.mark.parametrize(("status", "end_reason"), sorted(_OVER))
def test_every_verb_answers_session_ended_with_the_end_reason_after_it(
    verb: str, status: str, end_reason: str
) -> None:
    state = ev.state_after(_OVER[(status, end_reason)])
    assert (str(state.phase), state.end_reason) == (status, end_reason)
    answer = _answered(state, {**_NEEDS_THE_CALL, **_NEEDS_IT_NOT_OVER}[verb])
    assert answer.status == 409
    error = answer.body["error"]
    assert (error["code"], error["status"], error["end_reason"]) == ("session_ended", status, end_reason)


def test_typed_text_from_before_a_reconnect_answers_call_reconnected() -> None:
    """The sideband was opened again between the gateway's check and the worker's turn: the
    call is live, so neither state's code fits; the request is for the call as it was."""
    reconnected = ev.state_after(ev.listening()).evolve(generation=2)
    raw = {"type": "switchboard.text_injected", "item_id": "item_typed_1", "text": "hi", **_ASKED}
    [answer] = [e for e in ev.step_of(reconnected, raw, generation=1).effects if isinstance(e, AnswerRequest)]
    assert (answer.status, answer.body["error"]["code"]) == (409, "call_reconnected")
