"""In-call context compaction (pipeline.realtime.compaction), driven without I/O: every path of a cycle."""

from __future__ import annotations

from typing import Any

from pipeline.call.limits import MAXIMUM_SUMMARY_BYTES
from pipeline.realtime import compaction
from pipeline.realtime.controls import ItemCreate, ItemDelete, ResponseCancel, ResponseCreate
from pipeline.session.state import Phase, SessionState
from pipeline.session.step import (
    AnswerRequest,
    CancelTimer,
    FinishCompaction,
    PersistTranscript,
    SaveCompactionSummary,
    ScheduleTimer,
    StartCompaction,
)
from pipeline.session.wire import control_wire
from simulator.oracle import wire_errors
from tests.pipeline import events as ev

THRESHOLD = 1_000
SUMMARY = "Caller Dana asked about order 4417: shipped 12 May, tracking ZX-991. Open: refund of 12.50."


def _turn(index: int, input_tokens: int = 400, status: str = "completed") -> list[dict[str, Any]]:
    """One spoken turn: the caller's final, the response, its transcript and its end."""
    return [
        ev.user_final(f"item_U{index}", f"Question number {index}?"),
        ev.response_created(f"resp_{index}"),
        ev.assistant_final(f"resp_{index}", f"item_A{index}", f"Answer number {index}."),
        ev.response_done(f"resp_{index}", status, input_tokens=input_tokens),
    ]


def _talked(turns: int, *, last_input_tokens: int = 400) -> SessionState:
    """A listening session after `turns` turns, none of them over the threshold but the last
    (which reports `last_input_tokens`)."""
    events = [*ev.listening(limits={"max_output_tokens": 512, "compaction_input_tokens": THRESHOLD})]
    for index in range(1, turns):
        events += _turn(index)
    events += _turn(turns, last_input_tokens)[:-1]
    state = ev.state_after(events)
    assert state.phase is Phase.RESPONDING
    return state


def _compacting(turns: int = 5) -> SessionState:
    """A session whose last turn crossed the threshold: compaction 1 is running as resp_m."""
    state = _talked(turns)
    state = ev.step_of(state, ev.response_done(f"resp_{turns}", input_tokens=THRESHOLD)).state
    return ev.step_of(state, ev.response_created("resp_m", metadata=ev.maintenance(1))).state


def _summarized(turns: int = 5) -> SessionState:
    state = _compacting(turns)
    return ev.step_of(state, ev.assistant_text_final("resp_m", "item_M", SUMMARY)).state


def _wire(control: Any) -> dict[str, Any]:
    return control_wire(control.model_copy(update={"event_id": "ctl_1_0"}))


# ── the trigger ──────────────────────────────────────────────────────────────────────────


def test_a_turn_over_the_threshold_starts_one_text_only_maintenance_response() -> None:
    """At the quiet boundary after a response reporting ≥ the threshold, the host asks for one
    out-of-band, text-only, tool-free response of at most 2,048 tokens, and records the start."""
    state = _talked(5)

    step = ev.step_of(state, ev.response_done("resp_5", input_tokens=THRESHOLD))

    [create] = step.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.conversation == "none"
    assert create.response.output_modalities == ("text",)
    assert create.response.tool_choice == "none"
    assert create.response.max_output_tokens == 2_048
    assert create.response.metadata == {"switchboard": "compaction", "compaction": "1"}
    assert "do not speak to the person" in (create.response.instructions or "")
    assert wire_errors(_wire(create), direction="client") == []
    assert [e for e in step.effects if not isinstance(e, CancelTimer)] == [
        StartCompaction(number=1, forced=False, trigger_input_tokens=THRESHOLD, items_before=10),
        ScheduleTimer(name="compaction_deadline:1", delay_ms=60_000),
    ]
    assert step.state.phase is Phase.LISTENING and step.state.realtime.turn is None
    assert step.state.realtime.compaction is not None and step.state.realtime.compaction.number == 1


def test_below_the_threshold_nothing_starts() -> None:
    step = ev.step_of(_talked(5), ev.response_done("resp_5", input_tokens=THRESHOLD - 1))
    assert step.controls == () and step.state.realtime.compaction is None


def test_a_cancelled_response_is_not_a_quiet_boundary() -> None:
    step = ev.step_of(_talked(5), ev.response_done("resp_5", "cancelled", input_tokens=THRESHOLD))
    assert step.state.realtime.compaction is None
    assert not any(isinstance(c, ResponseCreate) for c in step.controls)


def test_with_six_known_items_or_fewer_there_is_nothing_to_compact() -> None:
    """Three turns are six items: pruning would delete nothing, so no cycle starts."""
    step = ev.step_of(_talked(3), ev.response_done("resp_3", input_tokens=THRESHOLD * 5))
    assert step.state.realtime.compaction is None and step.controls == ()


def test_queued_input_blocks_the_trigger_and_is_answered_first() -> None:
    """The caller spoke while the response ran: the boundary answers them, not maintenance."""
    state = ev.step_of(_talked(5), ev.user_final("item_U9", "One more thing.")).state

    step = ev.step_of(state, ev.response_done("resp_5", input_tokens=THRESHOLD))

    assert step.state.realtime.compaction is None
    [create] = step.controls
    assert isinstance(create, ResponseCreate) and create.response is not None
    assert create.response.conversation is None  # the spoken answer, in the conversation


def test_no_compaction_while_a_tool_chain_runs() -> None:
    """The response that called a tool ends, but the chain is open: no cycle starts."""
    lookup = {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}
    events = [*ev.listening(tools=[lookup], limits={"compaction_input_tokens": THRESHOLD})]
    for index in range(1, 5):
        events += _turn(index)
    events += [
        ev.user_final("item_U5", "Where is 4417?"),
        ev.response_created("resp_5"),
        ev.function_call("call_5", "resp_5", "item_F5"),
    ]
    state = ev.state_after(events)

    step = ev.step_of(state, ev.response_done("resp_5", input_tokens=THRESHOLD * 2))

    assert step.state.realtime.chain.pending is not None
    assert step.state.realtime.compaction is None
    assert not any(isinstance(e, StartCompaction) for e in step.effects)


# ── the summary and the prune ────────────────────────────────────────────────────────────


def test_the_maintenance_text_is_persisted_as_the_summary_not_as_a_transcript() -> None:
    step = ev.step_of(_compacting(), ev.assistant_text_final("resp_m", "item_M", f"  {SUMMARY}\n"))

    assert step.effects == (SaveCompactionSummary(number=1, response_id="resp_m", summary=SUMMARY),)
    assert not any(isinstance(e, PersistTranscript) for e in step.effects)
    assert step.state.realtime.compaction is not None and step.state.realtime.compaction.summary == SUMMARY
    assert "item_M" not in step.state.realtime.known_items


def test_a_long_summary_is_bounded_on_a_character_boundary() -> None:
    long = "é" * MAXIMUM_SUMMARY_BYTES
    step = ev.step_of(_compacting(), ev.assistant_text_final("resp_m", "item_M", long))
    [save] = step.effects
    assert isinstance(save, SaveCompactionSummary)
    assert len(save.summary.encode()) <= MAXIMUM_SUMMARY_BYTES
    assert save.summary == "é" * (MAXIMUM_SUMMARY_BYTES // 2)


def test_completion_deletes_all_but_the_six_newest_items_and_adds_one_summary() -> None:
    """Ten known items: the oldest four are deleted in order, then exactly one system message
    carries the summary; the cycle is released and three responses of cooldown begin."""
    state = _summarized()
    assert len(state.realtime.known_items) == 10

    step = ev.step_of(state, ev.response_done("resp_m", input_tokens=9_000, metadata=ev.maintenance(1)))

    deletes = [c for c in step.controls if isinstance(c, ItemDelete)]
    assert [d.item_id for d in deletes] == ["item_U1", "item_A1", "item_U2", "item_A2"]
    creates = [c for c in step.controls if isinstance(c, ItemCreate)]
    assert len(creates) == 1 and step.controls[-1] is creates[0]
    assert creates[0].item == {
        "type": "message",
        "role": "system",
        "content": [{"type": "input_text", "text": f"Earlier conversation compacted. Summary: {SUMMARY}"}],
    }
    for control in step.controls:
        assert wire_errors(_wire(control), direction="client") == []
    assert step.effects == (FinishCompaction(number=1, status="completed", items_deleted=4, items_after=7),)
    assert step.state.realtime.compaction is None
    assert step.state.realtime.compaction_cooldown == 3
    assert step.state.realtime.known_items == (
        "item_U3",
        "item_A3",
        "item_U4",
        "item_A4",
        "item_U5",
        "item_A5",
    )
    # The maintenance response costs usage, but it is not what the trigger reads.
    assert step.state.usage.responses == state.usage.responses + 1
    assert step.state.realtime.last_response_input_tokens == THRESHOLD


def test_the_cooldown_lasts_three_spoken_responses() -> None:
    state = ev.step_of(_summarized(), ev.response_done("resp_m", metadata=ev.maintenance(1))).state
    started = []
    for index in range(6, 10):
        for raw in _turn(index, input_tokens=THRESHOLD):
            step = ev.step_of(state, raw)
            state = step.state
            started += [e for e in step.effects if isinstance(e, StartCompaction)]
        if index < 8:
            assert started == [], f"started during the cooldown, after turn {index}"
    assert [s.number for s in started] == [2]


# ── abandoning ───────────────────────────────────────────────────────────────────────────


def test_a_cancelled_maintenance_response_prunes_nothing() -> None:
    step = ev.step_of(_summarized(), ev.response_done("resp_m", "cancelled", metadata=ev.maintenance(1)))
    assert step.controls == ()
    assert step.effects == (FinishCompaction(number=1, status="abandoned", reason="maintenance_cancelled"),)
    assert step.state.realtime.compaction is None and step.state.realtime.compaction_cooldown == 3
    assert len(step.state.realtime.known_items) == 10


def test_an_empty_summary_prunes_nothing() -> None:
    state = ev.step_of(_compacting(), ev.assistant_text_final("resp_m", "item_M", "   ")).state
    step = ev.step_of(state, ev.response_done("resp_m", metadata=ev.maintenance(1)))
    assert step.controls == ()
    assert step.effects == (FinishCompaction(number=1, status="abandoned", reason="empty_summary"),)


def test_a_summary_cut_by_the_token_cap_is_not_used() -> None:
    step = ev.step_of(_summarized(), ev.response_done("resp_m", "incomplete", metadata=ev.maintenance(1)))
    assert step.controls == ()
    assert step.effects == (FinishCompaction(number=1, status="abandoned", reason="maintenance_incomplete"),)


def test_the_caller_speaking_supersedes_the_compaction_and_is_answered_at_once() -> None:
    """A real turn never waits: the maintenance response is cancelled, the turn begins in the
    same step, and the maintenance response's late events change nothing."""
    state = _summarized()

    step = ev.step_of(state, ev.user_final("item_U6", "Actually, wait."))

    cancel, create = step.controls
    assert cancel == ResponseCancel(response_id="resp_m")
    assert isinstance(create, ResponseCreate) and create.response and create.response.conversation is None
    assert FinishCompaction(number=1, status="abandoned", reason="superseded_by_input") in step.effects
    assert step.state.realtime.compaction is None and step.state.phase is Phase.RESPONDING
    turn = step.state.realtime.turn

    late = ev.step_of(step.state, ev.response_done("resp_m", "cancelled", metadata=ev.maintenance(1)))
    assert late.state.realtime.turn == turn and late.controls == () and late.effects == ()


def test_input_before_the_maintenance_response_started_cancels_it_when_it_does() -> None:
    state = _talked(5)
    state = ev.step_of(state, ev.response_done("resp_5", input_tokens=THRESHOLD)).state
    state = ev.step_of(state, ev.user_final("item_U6", "Hello?")).state
    assert (
        state.realtime.compaction is None
        and state.realtime.turn is not None
        and state.realtime.turn.response_id is None
    )

    step = ev.step_of(state, ev.response_created("resp_m", metadata=ev.maintenance(1)))

    assert step.controls == (ResponseCancel(response_id="resp_m"),)
    assert step.state.realtime.turn == state.realtime.turn  # not taken for the caller's response
    text = ev.step_of(step.state, ev.assistant_text_final("resp_m", "item_M", SUMMARY))
    assert text.effects == () and text.state.realtime.compaction is None


def test_the_deadline_abandons_a_cycle_that_never_finished() -> None:
    state = _compacting()
    assert ev.step_of(state, ev.timer_fired("compaction_deadline:7")).state == state

    step = ev.step_of(state, ev.timer_fired("compaction_deadline:1"))

    assert step.controls == (ResponseCancel(response_id="resp_m"),)
    assert step.effects == (FinishCompaction(number=1, status="abandoned", reason="maintenance_timed_out"),)


def test_a_summary_that_could_not_be_stored_abandons_the_compaction_not_the_call() -> None:
    step = ev.step_of(_summarized(), ev.compaction_unsaved(1))
    assert FinishCompaction(number=1, status="abandoned", reason="summary_not_persisted") in step.effects
    assert any(getattr(e, "code", None) == "compaction_summary_not_persisted" for e in step.effects)
    assert step.state.phase is Phase.LISTENING

    done = ev.step_of(step.state, ev.response_done("resp_m", metadata=ev.maintenance(1)))
    assert not any(isinstance(c, ItemDelete | ItemCreate) for c in done.controls)


def test_a_session_ending_mid_compaction_records_it_abandoned() -> None:
    step = ev.step_of(_compacting(), ev.end_requested())
    assert step.state.is_terminal
    assert FinishCompaction(number=1, status="abandoned", reason="app_ended") in step.effects


# ── forced from the API ──────────────────────────────────────────────────────────────────


def _listening_after(turns: int) -> SessionState:
    state = _talked(turns)
    return ev.step_of(state, ev.response_done(f"resp_{turns}", input_tokens=10)).state


def test_a_forced_compaction_ignores_the_threshold_and_answers_when_it_completes() -> None:
    state = _listening_after(5)
    started = ev.step_of(state, ev.compaction_requested("req_9", "gw2"))
    assert [type(e) for e in started.effects] == [StartCompaction, ScheduleTimer]
    assert started.effects[0] == StartCompaction(
        number=1, forced=True, trigger_input_tokens=10, items_before=10
    )

    state = ev.step_of(started.state, ev.response_created("resp_m", metadata=ev.maintenance(1))).state
    state = ev.step_of(state, ev.assistant_text_final("resp_m", "item_M", SUMMARY)).state
    done = ev.step_of(state, ev.response_done("resp_m", metadata=ev.maintenance(1)))

    [answer] = [e for e in done.effects if isinstance(e, AnswerRequest)]
    assert answer.request_id == "req_9" and answer.gateway_id == "gw2"
    assert answer.body["compacted"] is True
    assert answer.body["items_before"] == 10
    assert answer.body["items_deleted"] == 4
    assert answer.body["items_after"] == 7
    assert answer.body["summary_length"] == len(SUMMARY)


def test_a_forced_compaction_keeps_the_guards_and_says_why_not() -> None:
    responding = _talked(5)
    cooling = ev.step_of(_summarized(), ev.response_done("resp_m", metadata=ev.maintenance(1))).state
    ended = ev.step_of(_listening_after(5), ev.end_requested()).state
    for state, reason in [
        (responding, "response_in_flight"),
        (cooling, "cooling_down"),
        (_compacting(), "compaction_in_flight"),
        (_listening_after(3), "nothing_to_compact"),
        (ended, "session_not_live"),
    ]:
        step = ev.step_of(state, ev.compaction_requested())
        [answer] = step.effects
        assert isinstance(answer, AnswerRequest)
        assert answer.body["compacted"] is False
        assert answer.body["reason"] == reason
        assert answer.body["message"]
        assert step.controls == ()
        assert step.state == state


def test_a_forced_compaction_that_is_abandoned_answers_why() -> None:
    state = ev.step_of(_listening_after(5), ev.compaction_requested("req_3")).state
    state = ev.step_of(state, ev.response_created("resp_m", metadata=ev.maintenance(1))).state
    step = ev.step_of(state, ev.user_final("item_U9", "Hello?"))
    [answer] = [e for e in step.effects if isinstance(e, AnswerRequest)]
    assert answer.body["compacted"] is False and answer.body["reason"] == "superseded_by_input"


# ── known items ──────────────────────────────────────────────────────────────────────────


def test_known_items_are_the_newest_64_without_repeats() -> None:
    state = SessionState()
    for index in range(70):
        state = compaction.track(state, f"item_{index}")
    state = compaction.track(state, "item_10")
    assert len(state.realtime.known_items) == 64
    assert state.realtime.known_items[-1] == "item_10" and state.realtime.known_items.count("item_10") == 1
    # item_0..item_5 fell off; item_10 moved to the newest end.
    assert state.realtime.known_items[0] == "item_6"


def test_an_item_the_provider_deleted_is_forgotten() -> None:
    state = _listening_after(5)
    step = ev.step_of(state, ev.item_deleted("item_U2"))
    assert "item_U2" not in step.state.realtime.known_items and len(step.state.realtime.known_items) == 9
