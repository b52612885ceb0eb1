"""The line: hold and unhold, a caller waiting for a person, and a supervisor's six verbs —
each answered, each in the call log, and no response asked for on a closed line but a person's
own words."""

from __future__ import annotations

from typing import Any

from pipeline.operator.line import NOBODY_TOOK_IT
from pipeline.realtime.controls import InputAudioBufferClear, ItemCreate, ResponseCancel, ResponseCreate
from pipeline.realtime.turns import SUPERVISOR_METADATA
from pipeline.session.state import Phase
from pipeline.session.step import (
    AnswerRequest,
    CancelTimer,
    CloseCall,
    LogEntry,
    ScheduleTimer,
    Step,
    TransferCall,
)
from pipeline.session.wire import SessionUpdate
from tests.pipeline import events as ev
from tests.pipeline import line_events as op


def _answer(step: Step) -> tuple[int, dict[str, Any]]:
    [answer] = [effect for effect in step.effects if isinstance(effect, AnswerRequest)]
    return answer.status, answer.body


def _entries(step: Step) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, e.data) for e in step.effects if isinstance(e, LogEntry)]


def _creates(step: Step) -> list[ResponseCreate]:
    return [c for c in step.controls if isinstance(c, ResponseCreate)]


def _answering() -> list[dict[str, Any]]:
    """A live call whose agent is speaking (response resp_1 runs)."""
    return [*ev.listening(), ev.user_final("item_u1", "Where is my order?"), ev.response_created("resp_1")]


def test_hold_cuts_the_agent_switches_turn_detection_off_and_answers_nothing() -> None:
    state = ev.state_after(_answering())

    held = ev.step_of(state, op.hold())

    assert any(isinstance(c, ResponseCancel) and c.response_id == "resp_1" for c in held.controls)
    [update] = [c for c in held.controls if isinstance(c, SessionUpdate)]
    assert update.session["audio"]["input"]["turn_detection"] is None
    assert _entries(held) == [("call.line", {"held": True})]
    assert _answer(held) == (200, {"status": "held", "changed": True})
    # The cancelled response ends the turn; what the caller says meanwhile is kept, not answered.
    state = ev.step_of(held.state, ev.response_done("resp_1", "cancelled")).state
    heard = ev.step_of(state, ev.user_final("item_u2", "Hello? Anyone?"))
    assert _creates(heard) == [] and heard.state.realtime.queued_input_item_id is None
    assert heard.state.phase is Phase.LISTENING


def test_unhold_clears_the_input_buffer_and_restores_turn_detection() -> None:
    state = ev.state_after([*ev.listening(), op.hold()])

    free = ev.step_of(state, op.hold(held=False))

    assert isinstance(free.controls[0], InputAudioBufferClear)
    [update] = [c for c in free.controls if isinstance(c, SessionUpdate)]
    assert update.session["audio"]["input"]["turn_detection"] == {
        "type": "server_vad",
        "create_response": False,
        "interrupt_response": False,
    }
    assert _creates(free) == [] and not free.state.held
    assert _entries(free) == [("call.line", {"held": False})]
    again = ev.step_of(free.state, op.hold(held=False))
    assert again.controls == () and _answer(again) == (200, {"status": "free", "changed": False})


def test_a_response_that_starts_on_a_held_line_is_cancelled() -> None:
    """A response asked for just before the hold starts after it: it is cancelled as it starts."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_u1", "Hi."), op.hold()])
    assert state.realtime.turn is not None and state.realtime.turn.response_id is None

    started = ev.step_of(state, ev.response_created("resp_1"))

    assert started.controls == (ResponseCancel(response_id="resp_1"),)


def test_agent_say_and_reply_are_refused_on_a_held_line() -> None:
    state = ev.state_after([*ev.listening(), op.hold()])
    step = ev.step_of(
        state, {"type": "switchboard.agent_say", "text": "Hi", "request_id": "r", "gateway_id": "g"}
    )
    assert step.controls == () and _answer(step)[0] == 409
    assert _answer(step)[1]["error"]["code"] == "line_held"


def test_attention_holds_the_caller_and_nobody_coming_gives_the_line_back_and_tells_the_model() -> None:
    state = ev.state_after(ev.listening())

    asked = ev.step_of(state, op.attention("wants a refund", 45))

    assert _answer(asked) == (202, {"status": "waiting", "wait_s": 45})
    assert _entries(asked) == [
        ("attention.requested", {"reason": "wants a refund", "wait_s": 45, "by": "app"}),
        ("call.line", {"held": True}),
    ]
    assert ScheduleTimer(name="attention:1", delay_ms=45_000) in asked.effects
    again = ev.step_of(asked.state, op.attention())
    assert _answer(again)[0] == 409 and _answer(again)[1]["error"]["code"] == "already_waiting"

    fired = ev.step_of(asked.state, ev.timer_fired("attention:1"))

    kinds = _entries(fired)
    assert kinds[0] == (
        "attention.answered",
        {"ok": False, "by": None, "error": NOBODY_TOOK_IT.format(wait_s=45)},
    )
    assert kinds[1] == ("call.line", {"held": False})
    [note] = [c for c in fired.controls if isinstance(c, ItemCreate)]
    assert note.item["role"] == "system" and "nobody took the line" in note.item["content"][0]["text"]
    assert len(_creates(fired)) == 1 and fired.state.phase is Phase.RESPONDING
    # A second firing (the delayed message and the sweeper) changes nothing.
    assert ev.step_of(fired.state, ev.timer_fired("attention:1")).effects == ()


def test_take_over_answers_the_attention_and_keeps_the_model_quiet_until_release() -> None:
    state = ev.state_after([*ev.listening(), op.attention()])

    taken = ev.step_of(state, op.supervisor({"type": "take_over"}))

    assert _answer(taken) == (200, {"status": "taken"})
    assert [kind for kind, _ in _entries(taken)] == [
        "supervisor.took_over",
        "attention.answered",
        "call.line",
    ]
    assert dict(_entries(taken))["attention.answered"]["ok"] is True
    assert CancelTimer(name="attention:1") in taken.effects
    # The caller is heard (turn detection back on) but not answered.
    heard = ev.step_of(taken.state, ev.user_final("item_u2", "Is someone there?"))
    assert _creates(heard) == []
    second = ev.step_of(heard.state, op.supervisor({"type": "take_over"}, by=op.OTHER_SUPERVISOR))
    assert _answer(second)[1]["error"]["code"] == "already_held"
    # The person speaks through say: the one response a closed line allows.
    said = ev.step_of(heard.state, op.supervisor({"type": "say", "text": "Hi, this is Dana."}))
    [create] = _creates(said)
    assert create.response is not None and create.response.metadata == SUPERVISOR_METADATA
    assert _answer(said) == (202, {"status": "speaking"})
    state = ev.fold([ev.response_created("resp_s"), ev.response_done("resp_s")], said.state)[0]

    released = ev.step_of(state, op.supervisor({"type": "release"}))

    assert released.state.taken_by is None and _answer(released) == (200, {"status": "released"})
    assert [kind for kind, _ in _entries(released)] == ["supervisor.released"]
    assert len(_creates(released)) == 1
    nobody = ev.step_of(released.state, op.supervisor({"type": "release"}))
    assert _answer(nobody)[1]["error"]["code"] == "nobody_holds"


def test_a_tool_outcome_while_a_person_holds_the_line_is_delivered_without_a_response() -> None:
    tool = {"type": "function", "name": "lookup_order", "description": "d", "parameters": {"type": "object"}}
    state = ev.state_after(
        [
            *ev.listening(tools=[tool]),
            ev.user_final("item_u1", "Order 7?"),
            ev.response_created("resp_1"),
            ev.function_call("call_1", "resp_1"),
            ev.response_done("resp_1"),
            op.supervisor({"type": "take_over"}),
        ]
    )
    finished = ev.step_of(
        state,
        {
            "type": "switchboard.tool_finished",
            "call_id": "call_1",
            "outcome": {"status": "succeeded", "result": 1, "elapsed_ms": 5},
        },
    )
    assert _creates(finished) == []
    assert [c.item["type"] for c in finished.controls if isinstance(c, ItemCreate)] == [
        "function_call_output"
    ]


def test_whisper_notes_and_replies_unless_a_person_holds_the_line() -> None:
    state = ev.state_after(ev.listening())
    whispered = ev.step_of(state, op.supervisor({"type": "whisper", "text": "Offer the 10% discount."}))
    assert [c.type for c in whispered.controls] == ["conversation.item.create", "response.create"]
    assert _answer(whispered) == (202, {"status": "replying"})

    taken = ev.state_after([*ev.listening(), op.supervisor({"type": "take_over"})])
    quiet = ev.step_of(taken, op.supervisor({"type": "whisper", "text": "Note this."}))
    assert [c.type for c in quiet.controls] == ["conversation.item.create"]
    assert _answer(quiet) == (202, {"status": "noted"})


def test_end_ends_the_call_at_once_by_the_supervisor() -> None:
    state = ev.state_after(_answering())
    ended = ev.step_of(state, op.supervisor({"type": "end", "reason": "abusive caller"}))
    assert ended.state.phase is Phase.ENDED and ended.state.end_reason == "supervisor_ended"
    assert any(isinstance(e, CloseCall) and e.hangup for e in ended.effects)
    assert _entries(ended)[0][0] == "supervisor.ended"


def test_transfer_is_refused_on_a_webrtc_call_and_refers_a_phone_call() -> None:
    state = ev.state_after(ev.listening())
    refused = ev.step_of(state, op.supervisor({"type": "transfer", "to": "tel:+14155550123"}))
    assert _answer(refused)[1]["error"]["code"] == "not_a_phone_call" and refused.controls == ()

    phone = state.evolve(medium="sip")
    asked = ev.step_of(phone, op.supervisor({"type": "transfer", "to": "tel:+14155550123"}))
    assert TransferCall(to="tel:+14155550123") in asked.effects
    assert _answer(asked) == (202, {"status": "transferring", "to": "tel:+14155550123"})

    done = ev.step_of(asked.state, op.transfer_finished("tel:+14155550123"))
    assert done.state.end_reason == "transferred"
    assert _entries(done) == [("call.transferred", {"to": "tel:+14155550123", "ok": True, "error": None})]
    failed = ev.step_of(asked.state, op.transfer_finished("tel:+14155550123", ok=False, error="busy"))
    assert failed.state.phase is Phase.LISTENING and failed.state.transferring_to is None


def test_an_attention_still_waiting_when_the_call_ends_is_answered_before_the_end() -> None:
    state = ev.state_after([*ev.listening(), op.attention()])
    ended = ev.step_of(state, ev.sideband_closed(1000))
    assert [kind for kind, _ in _entries(ended)] == ["attention.answered"]
    assert ended.state.attention is None


def test_requests_to_an_ended_call_are_refused_as_ended() -> None:
    state = ev.state_after([*ev.listening(), ev.end_requested()])
    for request in (
        op.hold(),
        op.attention(),
        op.supervisor({"type": "take_over"}),
        op.prompt_set("faq", "x"),
    ):
        step = ev.step_of(state, request)
        assert _answer(step)[0] == 409 and _answer(step)[1]["error"]["code"] == "session_ended"
        assert step.controls == ()


def test_no_compaction_starts_while_the_line_is_held() -> None:
    state = ev.state_after([*ev.listening(), op.hold()])
    step = ev.step_of(state, ev.compaction_requested())
    assert _creates(step) == []
    [answer] = [e for e in step.effects if isinstance(e, AnswerRequest)]
    assert answer.body["compacted"] is False and answer.body["reason"] == "line_held"


def test_a_supervisors_words_asked_for_before_the_call_listens_are_spoken_when_it_does() -> None:
    state = ev.state_after(ev.admitted())
    asked = ev.step_of(state, op.supervisor({"type": "say", "text": "One moment please."}))
    assert _creates(asked) == [] and _answer(asked) == (202, {"status": "after_response"})

    listening = ev.step_of(asked.state, ev.session_updated())

    [create] = _creates(listening)
    assert create.response is not None and create.response.metadata == SUPERVISOR_METADATA


def test_a_whisper_while_a_persons_words_wait_is_only_noted() -> None:
    state = ev.state_after(
        [*_answering(), op.supervisor({"type": "take_over"}), op.supervisor({"type": "say", "text": "Hi."})]
    )
    whispered = ev.step_of(state, op.supervisor({"type": "whisper", "text": "VIP caller."}))
    assert [c.type for c in whispered.controls] == ["conversation.item.create"]
    assert _answer(whispered) == (202, {"status": "noted"})
