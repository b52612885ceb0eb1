"""A Live call's decisions, without a database or a socket: the provider seam (which inputs a
Live session acts on), delegations from arrival to their one terminal commentary, the line's
verbs on Live, usage and its budget, and the end — every control checked strictly against
`openai.types.live`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.call.sideband import Submit
from pipeline.call.tokens import estimated_tokens
from pipeline.live import delegation
from pipeline.live.capabilities import APPEND_TOKEN_BUDGET
from pipeline.live.frames import COALESCE_GAP_MS, DELEGATION_SETTLE_MS, MAXIMUM_LINE_SPAN_MS
from pipeline.live.sideband import LiveSideband
from pipeline.live.tasks import settle_timer
from pipeline.platform.cost import ModelPrices, cost_usd, usage_added
from pipeline.records.call_log import LoggedInput, project
from pipeline.session.state import DelegationStatus, Phase, Provider, SessionState
from pipeline.session.step import (
    AnswerRequest,
    CancelTimer,
    CancelTool,
    InterruptToolStep,
    PersistTranscript,
    RecordIncident,
    RefuseToolStep,
    RequestToolStep,
    RunTool,
    ScheduleTimer,
    Step,
)
from pipeline.session.timeline import Speaker
from pipeline.session.wire import control_wire
from simulator.live_oracle import live_wire_errors
from tests.pipeline import events as ev
from tests.pipeline import live_calls as lc

ASK = "Where is my order 4417"
DANA = {"id": "sup_dana", "name": "Dana"}


def _on_the_wire(step: Step) -> list[dict[str, Any]]:
    """The step's controls as they go onto the sideband (with a control id), each checked
    strictly against the Live types."""
    wired = []
    for index, control in enumerate(step.controls):
        wire = control_wire(control.model_copy(update={"event_id": f"ctl_1_{index}"}))
        assert live_wire_errors(wire, direction="client") == [], wire
        wired.append(wire)
    return wired


def _run(state: SessionState, *raws: dict[str, Any]) -> tuple[SessionState, list[Step]]:
    steps = []
    for raw in raws:
        step = ev.step_of(state, raw)
        _on_the_wire(step)
        steps.append(step)
        state = step.state
    return state, steps


def _types(steps: list[Step]) -> list[str]:
    return [control.type for step in steps for control in step.controls]


def _listening(handler: str | None = "order_desk", **changes: Any) -> SessionState:
    return _run(SessionState(), *lc.listening(handler, **changes))[0]


def _running(text: str = ASK) -> SessionState:
    """A Live call whose one delegation ("D1", at the end of `text`) is running."""
    fragments = lc.words(Speaker.CALLER, text, 0)
    state, _ = _run(_listening(), lc.piece(fragments), lc.delegated("D1", fragments[-1].start_ms))
    assert state.live is not None and state.live.open[0].status is DelegationStatus.RUNNING
    return state


# ── the seam ────────────────────────────────────────────────────────────────────────────


def test_a_live_session_is_configured_by_its_delegation_and_listens_on_session_updated() -> None:
    """The sideband's first words are a `session.update` of the delegation settings only (the
    rest was fixed when the session was created); the provider's `session.updated` makes it
    listen."""
    state, steps = _run(SessionState(), *lc.listening())
    assert state.provider is Provider.LIVE and state.phase is Phase.LISTENING
    [update] = [wire for step in steps for wire in _on_the_wire(step)]
    assert update == {
        "type": "session.update",
        "event_id": "ctl_1_0",
        "session": {"delegation": {"type": "client", "acknowledgement_delay_ms": 400}},
    }


def test_a_greeting_on_live_is_spoken_from_commentary_once() -> None:
    state, steps = _run(SessionState(), *lc.listening(greeting={"say": "Welcome to Acme."}))
    assert [
        w["content"] for s in steps for w in _on_the_wire(s) if w["type"] == "session.commentary.append"
    ] == ["Welcome to Acme."]
    assert state.greeted


@pytest.mark.parametrize(
    "raw",
    [
        ev.user_final("item_1", "Hello"),
        ev.speech_started("item_1"),
        ev.response_created("resp_1"),
        ev.response_done("resp_1"),
        ev.function_call("call_1", "resp_1"),
        ev.assistant_final("resp_1", "item_2", "Hi"),
    ],
)
def test_a_live_session_acts_on_no_realtime_event(raw: dict[str, Any]) -> None:
    """A Realtime event on a Live session (recorded in the log) changes nothing and says nothing."""
    state = _listening()
    step = ev.step_of(state, raw)
    assert step.state == state and step.controls == () and step.effects == ()


@pytest.mark.parametrize(
    "raw", [lc.said(ASK, 0), lc.delegated("D1", 0), lc.usage(9), lc.closed("remote_hangup")]
)
def test_a_realtime_session_acts_on_no_live_event(raw: dict[str, Any]) -> None:
    state = ev.state_after(ev.listening())
    step = ev.step_of(state, raw)
    assert step.state == state and step.controls == () and step.effects == ()


def test_the_callers_and_the_agents_words_are_stored_and_the_callers_kept_for_the_next_task() -> None:
    state, steps = _run(_listening(), lc.said("Hello there", 0), lc.said("Hi!", 600, Speaker.AGENT))
    stored = [e for s in steps for e in s.effects if isinstance(e, PersistTranscript)]
    assert [(e.role, e.text) for e in stored] == [("user", "Hello there"), ("assistant", "Hi!")]
    assert state.live is not None
    assert [f.text for f in state.live.heard] == ["Hello", " there"] and state.live.heard_until_ms == 400


def test_the_words_kept_for_the_next_task_are_bounded() -> None:
    state = _listening()
    for start in range(0, 300 * lc.WORD_MS, 10 * lc.WORD_MS):
        state = ev.step_of(state, lc.said("one two three four five six seven eight nine ten", start)).state
    assert state.live is not None and len(state.live.heard) == delegation.MAXIMUM_HEARD_FRAGMENTS


def _stored(*raws: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """The transcript effects of these pieces: (role, line id, text, goes on the line)."""
    _, steps = _run(_listening(), *raws)
    return [
        (e.role, e.item_id, e.text, e.continues)
        for step in steps
        for e in step.effects
        if isinstance(e, PersistTranscript)
    ]


def test_words_said_over_each_other_are_two_whole_lines_whatever_pieces_they_came_in() -> None:
    """A captured Live call (recordings/captured/live_bound_history.jsonl): the agent answers
    while the caller's last words are still coming, the gateway writes each speaker down in
    pieces, and the pieces alternate. Each piece goes on its speaker's line: the caller's pieces
    follow their line without a pause, and the agent began before the caller's words ended."""
    caller = lc.words(Speaker.CALLER, "Can you remind me what my name is?", 600)
    agent = lc.words(Speaker.AGENT, "You mentioned your name is Ada.", 1600)
    pieces = [caller[:3], caller[3:6], agent[:2], agent[2:3], caller[6:], agent[3:]]
    stored = _stored(*(lc.piece(p) for p in pieces))
    first_caller, first_agent = caller[0].event_id, agent[0].event_id
    assert [(role, line, going_on) for role, line, _, going_on in stored] == [
        ("user", first_caller, False),
        ("user", first_caller, True),
        ("assistant", first_agent, False),
        ("assistant", first_agent, True),
        ("user", first_caller, True),
        ("assistant", first_agent, True),
    ]
    assert (
        "".join(text for role, _, text, _ in stored if role == "user") == "Can you remind me what my name is?"
    )


def test_a_turn_or_a_pause_begins_a_new_line() -> None:
    """The agent's words after the caller's end are a turn: the caller's next words are a new
    line. A pause of COALESCE_GAP_MS in one speaker's words is a new line too."""
    caller = lc.said("Where is my order", 0)
    answer = lc.said("Let me look", 1000, Speaker.AGENT)
    # Within COALESCE_GAP_MS of the caller's last words, but after the agent's turn began.
    again = lc.said("It is 4417", 1700)
    after_a_pause = lc.said("Thanks", 1700 + 3 * lc.WORD_MS + COALESCE_GAP_MS)
    assert [going_on for *_, going_on in _stored(caller, answer, again, after_a_pause)] == [
        False,
        False,
        False,
        False,
    ]


def test_a_line_goes_on_at_most_its_span() -> None:
    """A speaker who never pauses still gets a new line every MAXIMUM_LINE_SPAN_MS."""
    span = MAXIMUM_LINE_SPAN_MS
    pieces = [lc.said("one two three four five", start) for start in range(0, span + 1000, 1000)]
    going_on = [flag for *_, flag in _stored(*pieces)]
    assert going_on.count(False) == 2 and going_on[0] is False
    assert going_on.index(False, 1) == span // 1000


# ── a delegation, start to finish ───────────────────────────────────────────────────────


def test_a_covered_delegation_starts_at_once_after_its_progress_note() -> None:
    """The caller's words had passed the offset: thinking first (it stops the automatic
    acknowledgement), then the durable step and its run on tool_runs, under a deadline."""
    fragments = lc.words(Speaker.CALLER, ASK, 0)
    _, steps = _run(_listening(), lc.piece(fragments), lc.delegated("D1", fragments[-1].start_ms))
    step = steps[-1]
    [thinking] = _on_the_wire(step)
    assert (thinking["type"], thinking["delegation_id"]) == ("session.thinking.append", "D1")
    [request] = [e for e in step.effects if isinstance(e, RequestToolStep)]
    [run] = [e for e in step.effects if isinstance(e, RunTool)]
    task = json.loads(request.arguments)
    assert (task["task"], task["covered"], task["delegation_id"]) == (ASK, True, "D1")
    assert (request.name, request.version, request.response_id) == ("order_desk", "1", None)
    assert run.name == "delegation:order_desk" and run.arguments == request.arguments
    assert any(isinstance(e, ScheduleTimer) and e.name == "delegation_deadline:D1" for e in step.effects)


def test_a_delegation_ahead_of_its_words_waits_for_them_at_most_the_settle_window() -> None:
    """The covering fragment may arrive after the delegation: its task waits on a durable timer
    of DELEGATION_SETTLE_MS and starts the moment the words pass the offset."""
    fragments = lc.words(Speaker.CALLER, ASK, 0)
    offset = fragments[-1].start_ms
    state, steps = _run(_listening(), lc.piece(fragments[:-1]), lc.delegated("D1", offset))
    assert ScheduleTimer(name=settle_timer("D1"), delay_ms=DELEGATION_SETTLE_MS) in steps[-1].effects
    assert not any(isinstance(e, RunTool) for e in steps[-1].effects)
    state, steps = _run(state, lc.piece(fragments[-1:]))
    assert CancelTimer(name=settle_timer("D1")) in steps[-1].effects
    [request] = [e for e in steps[-1].effects if isinstance(e, RequestToolStep)]
    assert json.loads(request.arguments)["task"] == ASK
    # The timer, if it still fires, finds the delegation running: nothing happens.
    assert ev.step_of(state, ev.timer_fired(settle_timer("D1"))).effects == ()


def test_when_the_settle_window_ends_the_task_goes_ahead_with_the_words_there_are() -> None:
    fragments = lc.words(Speaker.CALLER, ASK, 0)
    state, _ = _run(_listening(), lc.piece(fragments[:-1]), lc.delegated("D1", fragments[-1].start_ms))
    state, steps = _run(state, ev.timer_fired(settle_timer("D1")))
    [request] = [e for e in steps[-1].effects if isinstance(e, RequestToolStep)]
    task = json.loads(request.arguments)
    assert (task["task"], task["covered"]) == ("Where is my order", False)


def test_each_task_takes_the_callers_words_after_the_previous_ones_offset() -> None:
    first = lc.words(Speaker.CALLER, "Check order 4417", 0)
    second = lc.words(Speaker.CALLER, "and order 9999 too", 2_000)
    _, steps = _run(
        _listening(),
        lc.piece(first),
        lc.delegated("D1", first[-1].start_ms),
        lc.piece(second),
        lc.delegated("D2", second[-1].start_ms),
    )
    tasks = [
        json.loads(e.arguments)["task"] for s in steps for e in s.effects if isinstance(e, RequestToolStep)
    ]
    assert tasks == ["Check order 4417", "and order 9999 too"]


def test_the_handlers_result_is_the_one_terminal_commentary() -> None:
    state, steps = _run(_running(), lc.finished("D1"))
    [commentary] = _on_the_wire(steps[-1])
    assert commentary == {
        "type": "session.commentary.append",
        "event_id": "ctl_1_0",
        "delegation_id": "D1",
        "content": "Order 4417 ships Friday.",
    }
    assert CancelTimer(name="delegation_deadline:D1") in steps[-1].effects
    assert state.live is not None and state.live.open == () and state.live.answered == ("D1",)
    # The same outcome again, or the delegation again, says nothing more.
    assert ev.step_of(state, lc.finished("D1")).controls == ()
    assert ev.step_of(state, lc.delegated("D1", 0)).controls == ()


@pytest.mark.parametrize(
    ("status", "starts"),
    [
        ("refused", "This request cannot be done: the task was refused."),
        ("timed_out", "The request took too long"),
        ("failed", "The request failed (code_failed)."),
        ("unavailable", "Nothing here can work on requests"),
        ("cancelled", "The request did not report back in time"),
    ],
)
def test_every_way_a_delegation_can_end_is_said_once(status: str, starts: str) -> None:
    _, steps = _run(_running(), lc.finished("D1", status))
    [commentary] = _on_the_wire(steps[-1])
    assert commentary["content"].startswith(starts)


def test_a_result_that_is_not_text_is_said_as_json_and_an_empty_one_as_nothing_to_report() -> None:
    _, steps = _run(_running(), lc.finished("D1", result={"eta": "Friday"}))
    assert _on_the_wire(steps[-1])[0]["content"] == '{"eta": "Friday"}'
    _, steps = _run(_running(), lc.finished("D1", result="  "))
    assert _on_the_wire(steps[-1])[0]["content"] == delegation.NO_RESULT
    long = "word " * 1_000
    _, steps = _run(_running(), lc.finished("D1", result=long))
    assert estimated_tokens(_on_the_wire(steps[-1])[0]["content"]) <= APPEND_TOKEN_BUDGET


def test_a_result_in_a_supplementary_plane_is_cut_to_the_token_bound_before_it_is_sent() -> None:
    """1,733 characters of CJK Extension B are 6,932 bytes of UTF-8, far over Live's 500 tokens
    under any tokenizer, though well under the old bound of 1,800 characters: the commentary
    says the start of them, cut with an ellipsis, and the oracle accepts it."""
    rare = "".join(chr(0x20000 + i) for i in range(1_733))
    _, steps = _run(_running(), lc.finished("D1", result=rare))
    [commentary] = _on_the_wire(steps[-1])
    said = commentary["content"]
    assert estimated_tokens(said) <= APPEND_TOKEN_BUDGET and len(said.encode()) <= 4 * APPEND_TOKEN_BUDGET
    assert said.endswith("…") and rare.startswith(said.removesuffix("…"))


def test_a_deadline_with_no_outcome_interrupts_the_step_and_answers_it_once() -> None:
    state, steps = _run(_running(), ev.timer_fired("delegation_deadline:D1"))
    assert CancelTool(call_id="D1", reason="delegation_deadline_passed") in steps[-1].effects
    assert any(isinstance(e, InterruptToolStep) for e in steps[-1].effects)
    [commentary] = _on_the_wire(steps[-1])
    assert commentary["content"] == delegation.NOT_BACK
    # The outcome that comes after all is too late: the delegation was answered.
    assert ev.step_of(state, lc.finished("D1")).controls == ()


def test_a_delegation_without_a_handler_or_past_the_limit_is_refused_at_once() -> None:
    state, steps = _run(_listening(handler=None), lc.said(ASK, 0), lc.delegated("D1", 200))
    [refused] = [e for e in steps[-1].effects if isinstance(e, RefuseToolStep)]
    assert (refused.status, refused.code) == ("unavailable", "no_delegation_handler")
    assert [w["content"] for w in _on_the_wire(steps[-1])] == [delegation.NO_HANDLER]

    state = _listening()
    raws = [lc.delegated(f"D{n}", 100 * n) for n in range(delegation.MAXIMUM_OPEN_DELEGATIONS + 1)]
    state, steps = _run(state, *raws)
    [refused] = [e for e in steps[-1].effects if isinstance(e, RefuseToolStep)]
    assert (refused.call_id, refused.code, refused.status) == (
        f"D{delegation.MAXIMUM_OPEN_DELEGATIONS}",
        "delegation_limit_reached",
        "refused",
    )
    assert _types(steps[-1:]) == ["session.commentary.append"]


def test_a_delegation_that_is_not_the_clients_is_only_noted() -> None:
    _, steps = _run(_listening(), lc.delegated("D1", 0, target="responses"))
    assert steps[-1].controls == () and [e.code for e in steps[-1].effects] == ["delegation_not_client"]


# Frames the Live API sent in a session with Responses delegation, verbatim: from pydantic-ai's
# cassette tests/realtime/cassettes/test_openai_live_ws/test_audio_in_delegated_tool_round.yaml
# at 0cf1dba05107c4364cc2ffbcb7fd961754b5dfd6 (MIT; recordings/captured/LICENSE.pydantic-ai).
RESPONSES_DELEGATION = "item_ERPviV38IWjTevtgdVZ3X"
CAPTURED_DELEGATED = {
    "type": "session.delegation.created",
    "offset_ms": 3800,
    "delegation": {
        "id": RESPONSES_DELEGATION,
        "type": "delegation",
        "response_id": "resp_0e27e46db52c8ed8006ab45566a99487d19505728b991f94e3",
        "target": "responses",
    },
    "event_id": "event_ERPviHu0oS84VsRoc2jnF",
}
CAPTURED_ARGUMENTS_DELTA = {
    "event_id": "event_ERPvjW1uWhoFR9wC0Osj2",
    "type": "response.event",
    "delegation_id": RESPONSES_DELEGATION,
    "event": {
        "type": "response.function_call_arguments.delta",
        "delta": '{"',
        "item_id": "fc_0e27e46db52c8ed8006ab45567572c87d1a83ce91932903ebb",
        "obfuscation": "lbmAaIi7D74waw",
        "output_index": 0,
        "sequence_number": 3,
    },
}
CAPTURED_CALL_DONE = {
    "event_id": "event_ERPvjsoNxd1yCnqfPA2ps",
    "type": "response.event",
    "delegation_id": RESPONSES_DELEGATION,
    "event": {
        "type": "response.output_item.done",
        "item": {
            "id": "fc_0e27e46db52c8ed8006ab45567572c87d1a83ce91932903ebb",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"city":"Amsterdam"}',
            "call_id": "call_sMcOazdoNl2difiyfEE12nUN",
            "name": "lookup_forecast",
        },
        "output_index": 0,
        "sequence_number": 9,
    },
}


def test_a_captured_responses_delegation_s_function_call_waits_on_the_host_and_the_session_is_refused() -> (
    None
):
    """The real frames of a Responses delegation: the gateway logs the delegation and the
    finished function call (the arguments' delta is only shown). The delegation itself is noted
    once (`delegation_not_client`); its backend then called `lookup_forecast`, and the capture
    shows the run waiting for the host's `function_call_output` and `response.create`, which
    Switchboard, serving client delegation only, never sends. So the session is refused at the
    call: failed `responses_delegation_not_served`, its incident naming the tool, the Live
    session closed, rather than the caller left waiting for ever. The frames are valid but for
    `obfuscation` on the nested delta, newer than openai 3.57's types."""
    sideband = LiveSideband()
    frames = (CAPTURED_DELEGATED, CAPTURED_ARGUMENTS_DELTA, CAPTURED_CALL_DONE)
    submitted = [
        action.event
        for frame in frames
        for action in sideband.receive(json.dumps(frame), 1.0, 1.0)
        if isinstance(action, Submit)
    ]
    assert submitted == [CAPTURED_DELEGATED, CAPTURED_CALL_DONE]
    assert [live_wire_errors(frame, direction="server") for frame in frames] == [
        [],
        ["unknown field $.event.obfuscation"],
        [],
    ]
    state, steps = _run(_listening(), *submitted)
    assert steps[0].controls == () and [e.code for e in steps[0].effects] == ["delegation_not_client"]
    assert (state.phase, state.end_reason) == (Phase.FAILED, delegation.RESPONSES_NOT_SERVED)
    assert _types(steps[1:]) == ["session.close"]
    [incident] = [effect for effect in steps[1].effects if isinstance(effect, RecordIncident)]
    assert incident.code == "responses_delegation_not_served"
    assert "lookup_forecast (call_sMcOazdoNl2difiyfEE12nUN)" in incident.summary
    assert "function_call_output and response.create" in incident.summary
    # Its backend run's end comes after: logged, and it changes nothing.
    completed = {**CAPTURED_CALL_DONE, "event": {"type": "response.completed", "response": {}}}
    assert ev.step_of(state, completed).state == state


# ── the line decides when the answer is said ────────────────────────────────────────────


def test_an_answer_waits_while_the_line_is_held_and_is_said_once_when_it_is_given_back() -> None:
    state, steps = _run(_running(), lc.hold(True), lc.finished("D1"))
    assert _types(steps) == ["session.input_audio.mute"]
    assert state.live is not None and state.live.open[0].status is DelegationStatus.ANSWERED
    state, steps = _run(state, lc.hold(False))
    assert _types(steps) == ["session.input_audio.unmute", "session.commentary.append"]
    state, steps = _run(state, lc.hold(True), lc.hold(False))
    assert _types(steps) == ["session.input_audio.mute", "session.input_audio.unmute"]


def test_a_reattach_reconfirms_what_is_pending_and_says_the_answers_that_waited() -> None:
    """An answer decided while no sideband listened goes out on the next one, after the note
    asking the model to have the caller confirm what the gap may have swallowed."""
    state = _running()
    state, steps = _run(
        state,
        ev.sideband_closed(1011),
        lc.finished("D1"),
        ev.timer_fired(f"sideband_reconnect:{state.generation + 1}"),
        ev.sideband_connected(lc.LIVE_ID),
    )
    assert _types(steps) == ["session.instructions.append", "session.commentary.append"]
    note = steps[-1].controls[0]
    assert note.type == "session.instructions.append" and "confirm the request" in note.content


def test_a_call_that_ends_stops_its_running_handlers_and_says_nothing_for_them() -> None:
    state, steps = _run(_running(), ev.end_requested())
    assert _types(steps) == ["session.close"]
    assert CancelTool(call_id="D1", reason="app_ended") in steps[-1].effects
    assert any(isinstance(e, InterruptToolStep) and e.call_id == "D1" for e in steps[-1].effects)
    assert ev.step_of(state, lc.finished("D1")).controls == ()


# ── the verbs on Live ───────────────────────────────────────────────────────────────────


def _supervise(verb: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "switchboard.supervisor",
        "by": DANA,
        "verb": verb,
        "request_id": "r1",
        "gateway_id": "gw1",
    }


def _answer(step: Step) -> tuple[int, dict[str, Any]]:
    [answer] = [e for e in step.effects if isinstance(e, AnswerRequest)]
    return answer.status, answer.body


def test_a_whisper_and_a_prompt_change_are_appended_as_instructions() -> None:
    state, steps = _run(_listening(), _supervise({"type": "whisper", "text": "Offer express shipping."}))
    [note] = _on_the_wire(steps[-1])
    assert note["type"] == "session.instructions.append" and note["delegation_id"] is None
    assert "Offer express shipping." in note["content"]
    assert _answer(steps[-1])[1]["status"] == "noted"
    prompt = {
        "type": "switchboard.prompt_set",
        "name": "policy",
        "text": "Never promise refunds.",
        "request_id": "r2",
        "gateway_id": "gw1",
    }
    _, steps = _run(state, prompt)
    [note] = _on_the_wire(steps[-1])
    assert "Never promise refunds." in note["content"] and "'policy'" in note["content"]
    too_long = {**prompt, "text": "x" * 4 * APPEND_TOKEN_BUDGET}
    _, steps = _run(state, too_long)
    assert steps[-1].controls == () and _answer(steps[-1])[0] == 422


CHINESE = "您的订单四四一七已经发货，预计星期五送到。"


@pytest.mark.parametrize("kind", ["say", "whisper"])
def test_a_say_or_whisper_of_chinese_over_the_token_bound_is_refused_on_live(kind: str) -> None:
    """Far fewer characters than the old bound of 1,800, but about a token each: refused with
    `too_long_for_live` rather than cut, nothing sent; the same words within the bound go out."""
    text = CHINESE * 25
    assert len(text) < 1_800 and estimated_tokens(text) > APPEND_TOKEN_BUDGET
    _, steps = _run(_listening(), _supervise({"type": kind, "text": text}))
    status, body = _answer(steps[-1])
    assert steps[-1].controls == () and (status, body["error"]["code"]) == (422, "too_long_for_live")
    assert "tokens" in body["error"]["message"]
    _, steps = _run(_listening(), _supervise({"type": kind, "text": CHINESE * 10}))
    [append] = _on_the_wire(steps[-1])
    assert CHINESE * 10 in append["content"]


def test_say_is_commentary_end_closes_and_take_over_is_refused_on_live() -> None:
    state = _listening()
    _, steps = _run(state, _supervise({"type": "say", "text": "A colleague will call you back."}))
    assert _on_the_wire(steps[-1])[0] == {
        "type": "session.commentary.append",
        "event_id": "ctl_1_0",
        "delegation_id": None,
        "content": "A colleague will call you back.",
    }
    _, steps = _run(state, _supervise({"type": "take_over"}))
    status, body = _answer(steps[-1])
    assert steps[-1].controls == () and (status, body["error"]["code"]) == (409, "not_supported_on_live")
    ended, steps = _run(state, _supervise({"type": "end"}))
    assert _types(steps) == ["session.close"] and ended.end_reason == "supervisor_ended"


def test_tools_and_compaction_are_refused_on_live() -> None:
    state = _listening()
    tools = {"type": "switchboard.tools_set", "tools": [], "request_id": "r1", "gateway_id": "gw1"}
    _, steps = _run(state, tools, ev.compaction_requested())
    assert [_answer(step)[0] for step in steps] == [409, 409]
    assert steps[0].controls == () and steps[1].controls == ()


# ── usage, budget and the end ───────────────────────────────────────────────────────────


def test_usage_is_cumulative_and_a_budget_of_active_seconds_warns_then_ends_the_call() -> None:
    state = _listening(limits={"usage_budget_seconds": 100})
    state, steps = _run(state, lc.usage(50, ratio=0.2), lc.usage(80), lc.usage(85), lc.usage(40))
    assert _types(steps) == ["session.instructions.append"]
    assert state.usage.seconds == 85 and state.live is not None and state.live.context_ratio == 0.01
    state, steps = _run(state, lc.usage(100))
    assert _types(steps) == ["session.close"] and state.end_reason == "usage_budget_reached"


@pytest.mark.parametrize(
    ("reason", "phase", "end_reason"),
    [
        ("remote_hangup", Phase.ENDED, "caller_hung_up"),
        ("close_requested", Phase.ENDED, "caller_hung_up"),
        ("expired", Phase.ENDED, "provider_session_expired"),
        ("content", Phase.ENDED, "provider_content_closed"),
        ("connection_lost", Phase.FAILED, "provider_connection_lost"),
    ],
)
def test_session_closed_ends_the_call_with_its_reason_and_final_usage(
    reason: str, phase: Phase, end_reason: str
) -> None:
    state, steps = _run(_listening(), lc.closed(reason, seconds=42))
    assert (state.phase, state.end_reason, state.usage.seconds) == (phase, end_reason, 42)
    assert steps[-1].controls == ()


def test_session_closed_after_the_end_still_brings_the_final_usage() -> None:
    state, _ = _run(_listening(), ev.end_requested())
    later = ev.step_of(state, lc.closed("close_requested", seconds=61))
    assert later.state.usage.seconds == 61 and later.controls == ()


# ── the call log ────────────────────────────────────────────────────────────────────────


def test_a_live_call_log_merges_a_speakers_pieces_into_turns_and_reads_like_a_realtime_one() -> None:
    """Pieces of one speaker with no pause between them are one turn; the delegation is a tool
    call and its result; the entries are numbered once and never change as the log grows."""
    first, rest = lc.words(Speaker.CALLER, "Could you check", 0), lc.words(Speaker.CALLER, "order 4417", 600)
    raws = [
        *lc.listening(),
        lc.piece(first),
        lc.piece(rest),
        lc.delegated("D1", rest[-1].start_ms),
        lc.said("Let me look.", 1_200, Speaker.AGENT),
        lc.finished("D1"),
        lc.said("It ships Friday.", 2_400, Speaker.AGENT),
        lc.said("Thanks bye", 5_000),
        lc.closed("remote_hangup"),
    ]
    logged = [
        LoggedInput(received_at=1_000.0 + i, disposition="applied", generation=1, payload=r)
        for i, r in enumerate(raws)
    ]
    entries = project(logged)
    assert [(e.kind, e.data.get("text")) for e in entries] == [
        ("call.started", None),
        ("turn.user", "Could you check order 4417"),
        ("tool.call", None),
        ("turn.agent", "Let me look."),
        ("tool.result", None),
        ("turn.agent", "It ships Friday."),
        ("turn.user", "Thanks bye"),
        ("call.ended", None),
    ]
    assert entries[-1].data["reason"] == "caller_hung_up" and entries[-1].data["ended_by"] == "caller"
    # A follower reading part of the call sees the same entries, numbered the same.
    partial = project(logged[:-2])
    assert partial == entries[: len(partial)]


def test_a_live_calls_cost_is_its_active_minutes_at_the_models_rate() -> None:
    """Live reports seconds: a Live model's price is per active minute (its token rates default
    to nothing), and a Realtime price table without one is unchanged."""
    state, _ = _run(_listening(), lc.usage(90))
    assert cost_usd(state.usage, ModelPrices(active_minute=0.05)) == 0.075
    assert cost_usd(state.usage, None) is None
    assert ModelPrices.model_validate({}).text.input == 0


def test_what_a_live_usage_report_added_is_priced_like_the_whole_call() -> None:
    """A usage report adds active seconds and no response: what it added is still counted (the
    workers' cost metric counted only transactions that added a response, so a Live call's
    cost was never counted), and nothing added is None."""
    before, _ = _run(_listening(), lc.usage(30))
    after, _ = _run(before, lc.usage(90))
    added = usage_added(before.usage, after.usage)
    assert added is not None and added.responses == 0 and added.active_seconds == 60
    assert cost_usd(added, ModelPrices(active_minute=0.05)) == 0.05
    assert usage_added(after.usage, after.usage) is None


def test_a_keypad_press_on_a_live_phone_call_does_what_its_route_maps_it_to() -> None:
    state = _listening(phone={"caller": "+1415", "dialled": "+1800", "keys": {"0": "attention", "9": "end"}})
    held, steps = _run(state, {"type": "transport.dtmf.received", "event_id": "e1", "event": "0"})
    assert _types(steps) == ["session.input_audio.mute"] and held.attention is not None
    ended, steps = _run(state, {"type": "transport.dtmf.received", "event_id": "e2", "event": "9"})
    assert _types(steps) == ["session.close"] and ended.end_reason == "caller_pressed_end"
    unmapped = {"type": "transport.dtmf.received", "event_id": "e3", "event": "5"}
    assert ev.step_of(state, unmapped).controls == ()
