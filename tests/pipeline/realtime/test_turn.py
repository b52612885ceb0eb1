"""The spoken turn: the caller's final transcript drives one response at a time."""

from __future__ import annotations

from pipeline.call.limits import MAXIMUM_DURABLE_TEXT_BYTES, RESPONSE_DEADLINE_MS
from pipeline.dialects import parse_inbound
from pipeline.realtime.controls import ResponseCreate, ResponseParams
from pipeline.realtime.events import AssistantTranscriptFinal
from pipeline.realtime.turns import RESPONSE_DEADLINE_TIMER
from pipeline.session.state import Phase, ResponseContext, Turn, Usage
from pipeline.session.step import CancelTimer, PersistTranscript, RecordIncident, ScheduleTimer
from tests.pipeline import events as ev


def test_user_final_while_listening_begins_one_response() -> None:
    """A caller's final transcript is persisted and answered with exactly one response.create,
    whose response deadline is armed."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.user_final("item_U1", "Hello, how are you?"))

    assert step.effects == (
        PersistTranscript(role="user", text="Hello, how are you?", item_id="item_U1"),
        ScheduleTimer(name="response_deadline:1", delay_ms=RESPONSE_DEADLINE_MS, swept_only=True),
    )
    assert step.controls == (
        ResponseCreate(
            response=ResponseParams(instructions=ev.INSTRUCTIONS, max_output_tokens=512, tool_choice="auto")
        ),
    )
    assert step.state.phase is Phase.RESPONDING
    assert step.state.realtime.turn == Turn(
        context=ResponseContext(instructions=ev.INSTRUCTIONS, max_output_tokens=512, input_item_id="item_U1"),
        asked=1,
        # Asked of the sideband the session opened (generation 1): not asked again on a re-attach.
        asked_generation=1,
    )


def test_response_create_carries_an_unbounded_output_limit() -> None:
    """A session whose output limit is 'inf' asks for responses with max_output_tokens 'inf'."""
    before = ev.state_after(ev.listening(limits={"max_output_tokens": "inf", "max_session_seconds": 60}))

    step = ev.step_of(before, ev.user_final("item_U1", "Hi"))

    (control,) = step.controls
    assert control.response.max_output_tokens == "inf"


def test_response_created_records_the_response_id() -> None:
    """The provider starting the response records its id on the turn."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])

    step = ev.step_of(state, ev.response_created("resp_1"))

    assert step.state.realtime.turn is not None
    assert step.state.realtime.turn.response_id == "resp_1"
    assert step.state.phase is Phase.RESPONDING
    assert step.controls == ()
    assert step.effects == ()


def test_a_second_response_created_does_not_replace_the_turns_response() -> None:
    """Once a turn has its response id, another response.created does not change it."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])

    step = ev.step_of(state, ev.response_created("resp_other"))

    assert step.state == state


def test_assistant_final_is_persisted_with_its_response() -> None:
    """The assistant's final transcript is persisted with its item and response ids."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])

    step = ev.step_of(state, ev.assistant_final("resp_1", "item_A1", "Hello, how can I assist you today?"))

    assert step.effects == (
        PersistTranscript(
            role="assistant",
            text="Hello, how can I assist you today?",
            item_id="item_A1",
            response_id="resp_1",
        ),
    )
    assert step.controls == ()
    # The item is now known by id (compaction may delete it later); nothing else changed.
    assert step.state == state.with_realtime(known_items=(*state.realtime.known_items, "item_A1"))


def test_output_text_done_is_an_assistant_final() -> None:
    """A text response's output_text.done is an assistant final, its text the transcript."""
    event = parse_inbound(ev.assistant_text_final("resp_1", "item_A1", "Sure, I can help with that."))

    assert isinstance(event, AssistantTranscriptFinal)
    assert event.transcript == "Sure, I can help with that."
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    step = ev.step_of(state, ev.assistant_text_final("resp_1", "item_A1", "Sure, I can help with that."))
    assert step.effects == (
        PersistTranscript(
            role="assistant",
            text="Sure, I can help with that.",
            item_id="item_A1",
            response_id="resp_1",
        ),
    )


def test_beta_transcript_done_is_renamed_to_ga() -> None:
    """A beta response.audio_transcript.done parses as the GA output_audio_transcript.done."""
    raw = {
        **ev.assistant_final("resp_1", "item_A1", "Hi there!"),
        "type": "response.audio_transcript.done",
    }

    event = parse_inbound(raw)

    assert isinstance(event, AssistantTranscriptFinal)
    assert event.type == "response.output_audio_transcript.done"
    assert event.transcript == "Hi there!"


def test_response_done_returns_to_listening_with_usage_counted() -> None:
    """The turn's response.done returns the session to listening and sums the usage."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])

    step = ev.step_of(state, ev.response_done("resp_1", input_tokens=127, output_tokens=148))

    assert step.state.phase is Phase.LISTENING
    assert step.state.realtime.turn is None
    assert step.state.usage == Usage(
        input_tokens=127,
        output_tokens=148,
        total_tokens=275,
        responses=1,
        input_text_tokens=127,
        output_audio_tokens=148,
    )
    assert step.state.realtime.last_response_input_tokens == 127
    assert step.controls == ()
    # The response came, so its deadline is no longer needed.
    assert step.effects == (CancelTimer(name=f"{RESPONSE_DEADLINE_TIMER}1"),)


def test_usage_sums_over_turns() -> None:
    """Usage is summed over every response of the session; the last input count is the latest."""
    state = ev.state_after(
        [
            *ev.listening(),
            ev.user_final("item_U1", "Hi"),
            ev.response_created("resp_1"),
            ev.response_done("resp_1", input_tokens=100, output_tokens=50),
            ev.user_final("item_U2", "And then?"),
            ev.response_created("resp_2"),
            ev.response_done("resp_2", input_tokens=300, output_tokens=20),
        ]
    )

    assert state.phase is Phase.LISTENING
    assert state.usage.model_dump(include={"input_tokens", "output_tokens", "total_tokens", "responses"}) == {
        "input_tokens": 400,
        "output_tokens": 70,
        "total_tokens": 470,
        "responses": 2,
    }
    # By modality, as the provider reported it (the builders report text in, audio out).
    assert (state.usage.input_text_tokens, state.usage.output_audio_tokens) == (400, 70)
    assert state.realtime.last_response_input_tokens == 300


def test_response_done_for_another_response_keeps_the_turn() -> None:
    """A response.done for a response that is not the turn's changes no phase."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])

    step = ev.step_of(state, ev.response_done("resp_other", input_tokens=10, output_tokens=5))

    assert step.state.phase is Phase.RESPONDING
    assert step.state.realtime.turn == state.realtime.turn
    assert step.controls == ()
    assert step.state.usage.responses == 1


def test_user_final_while_responding_is_queued() -> None:
    """A caller's final while a response is owed is persisted and queued, and nothing is sent."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])

    step = ev.step_of(state, ev.user_final("item_U2", "Actually, wait."))

    assert step.controls == ()
    assert step.effects == (PersistTranscript(role="user", text="Actually, wait.", item_id="item_U2"),)
    assert step.state.realtime.queued_input_item_id == "item_U2"
    assert step.state.realtime.turn == state.realtime.turn
    assert step.state.phase is Phase.RESPONDING


def test_user_final_before_response_created_is_queued() -> None:
    """A caller's final after response.create was sent but before it started is queued too."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])

    step = ev.step_of(state, ev.user_final("item_U2", "Hello?"))

    assert step.controls == ()
    assert step.state.realtime.queued_input_item_id == "item_U2"


def test_queued_input_is_answered_by_one_response_after_done() -> None:
    """The response.done of the turn begins exactly one response for the queued input."""
    state = ev.state_after(
        [
            *ev.listening(),
            ev.user_final("item_U1", "Hi"),
            ev.response_created("resp_1"),
            ev.user_final("item_U2", "Actually,"),
            ev.user_final("item_U3", "wait."),
        ]
    )

    step = ev.step_of(state, ev.response_done("resp_1"))

    (control,) = step.controls
    assert isinstance(control, ResponseCreate)
    assert step.state.phase is Phase.RESPONDING
    assert step.state.realtime.turn is not None
    assert step.state.realtime.turn.context.input_item_id == "item_U3"
    assert step.state.realtime.turn.response_id is None
    assert step.state.realtime.queued_input_item_id is None
    assert step.state.usage.responses == 1


def test_a_failed_response_records_a_warning() -> None:
    """A failed response records a warning incident and the session listens again."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])
    details = {
        "type": "failed",
        "error": {"type": "server_error", "code": "internal", "message": "boom"},
    }

    step = ev.step_of(state, ev.response_done("resp_1", "failed", status_details=details))

    (incident,) = [effect for effect in step.effects if isinstance(effect, RecordIncident)]
    assert isinstance(incident, RecordIncident)
    assert incident.code == "response_failed"
    assert incident.severity == "warning"
    assert incident.context["response_id"] == "resp_1"
    assert step.state.phase is Phase.LISTENING


def test_a_cancelled_response_releases_the_turn_without_an_incident() -> None:
    """A response cancelled by the caller's barge-in ends the turn quietly."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi"), ev.response_created("resp_1")])

    step = ev.step_of(
        state,
        ev.response_done(
            "resp_1", "cancelled", status_details={"type": "cancelled", "reason": "turn_detected"}
        ),
    )

    assert step.effects == (CancelTimer(name=f"{RESPONSE_DEADLINE_TIMER}1"),)
    assert step.state.phase is Phase.LISTENING


def test_user_final_before_the_session_is_live_is_only_persisted() -> None:
    """A caller's final before the sideband is connected is persisted and begins nothing."""
    before = ev.state_after([ev.session_created(), ev.admission_begun()])

    step = ev.step_of(before, ev.user_final("item_U1", "Hello?"))

    assert step.controls == ()
    # Known by id (it is in the provider's conversation), and nothing else changed.
    assert step.state == before.with_realtime(known_items=("item_U1",))
    assert step.effects == (PersistTranscript(role="user", text="Hello?", item_id="item_U1"),)


def test_speech_started_is_counted() -> None:
    """The caller starting to speak is counted and sends nothing."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.speech_started("item_U1"))

    assert step.state.realtime.speech_started_count == 1
    assert step.controls == ()


def test_transcription_failed_is_a_warning() -> None:
    """A caller's audio the provider could not transcribe is a warning incident, not a failure."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.user_failed("item_U1"))

    (incident,) = step.effects
    assert isinstance(incident, RecordIncident)
    assert incident.code == "transcription_failed"
    assert incident.severity == "warning"
    assert incident.summary == "The audio could not be transcribed."
    assert step.state == before


def test_provider_error_is_a_warning() -> None:
    """A provider error answering a control is a warning incident named by its code."""
    before = ev.state_after(ev.listening())

    step = ev.step_of(before, ev.provider_error())

    (incident,) = step.effects
    assert isinstance(incident, RecordIncident)
    assert incident.code == "provider_conversation_already_has_active_response"
    assert incident.severity == "warning"
    assert step.state == before


def test_a_long_transcript_is_bounded_on_a_character_boundary() -> None:
    """A transcript longer than the durable bound is cut without splitting a character."""
    before = ev.state_after(ev.listening())
    text = "é" * MAXIMUM_DURABLE_TEXT_BYTES

    step = ev.step_of(before, ev.user_final("item_U1", text))

    persisted = step.effects[0]
    assert isinstance(persisted, PersistTranscript)
    assert len(persisted.text.encode()) <= MAXIMUM_DURABLE_TEXT_BYTES
    assert persisted.text == "é" * (MAXIMUM_DURABLE_TEXT_BYTES // 2)


def test_a_refused_response_create_is_asked_again_when_the_blocking_response_ends() -> None:
    """`conversation_already_has_active_response` before our response started makes the next
    response.done ask for the same response again, with the same context."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])
    refused = ev.step_of(state, ev.provider_error()).state
    assert refused.realtime.turn is not None and refused.realtime.turn.refused
    retry = ev.step_of(refused, ev.response_done("resp_other", "completed"))
    (control,) = retry.controls
    assert isinstance(control, ResponseCreate)
    assert retry.state.realtime.turn is not None and not retry.state.realtime.turn.refused
    assert retry.state.realtime.turn.context == state.realtime.turn.context  # type: ignore[union-attr]


def test_a_response_done_without_its_response_created_ends_the_waiting_turn() -> None:
    """A response.done that arrives before any response.created releases the turn, so the
    session listens again instead of waiting forever."""
    state = ev.state_after([*ev.listening(), ev.user_final("item_U1", "Hi")])
    step = ev.step_of(state, ev.response_done("resp_1", "cancelled"))
    assert step.state.phase == "listening"
    assert step.state.realtime.turn is None


def test_a_response_the_provider_starts_itself_for_the_callers_line_is_not_asked_for_again() -> None:
    """A client that set `create_response` has the provider answer when the caller stops, before
    the line's transcript is final. That response is the line's answer: the host asking for its
    own as well (refused while it runs, asked again once it ended) made the caller hear two
    answers. Decided a defect: the host leaves the line to it. A line spoken after it began is
    asked for as ever."""
    listening = ev.state_after(ev.listening())
    state, steps = ev.fold(
        [
            ev.speech_started("item_U1"),
            ev.response_created("resp_auto"),
            ev.user_final("item_U1", "Hours?"),
            ev.assistant_final("resp_auto", "item_A1", "Nine to five."),
            ev.response_done("resp_auto"),
        ],
        listening,
    )
    assert ev.controls_of(steps) == []
    assert (
        state.phase is Phase.LISTENING
        and state.realtime.turn is None
        and state.realtime.unasked_response is None
    )

    # The caller talks over such a response: that line is not what it answers.
    state, steps = ev.fold(
        [
            ev.response_created("resp_auto2"),
            ev.speech_started("item_U2"),
            ev.user_final("item_U2", "And Sundays?"),
        ],
        state,
    )
    assert [type(c) for c in ev.controls_of(steps)] == [ResponseCreate]
    assert state.realtime.turn is not None and state.realtime.turn.context.input_item_id == "item_U2"


def test_a_line_another_client_typed_is_stored_as_the_caller_s_and_asks_for_nothing() -> None:
    """A user text message another client added to the conversation (captured:
    recordings/captured/tool_call_round.jsonl): stored as the caller's line, the item known for
    compaction, and no response asked for (that client asks for its own); late, it is still
    stored."""
    state = ev.state_after(ev.listening())
    typed = {
        "type": "conversation.item.added",
        "event_id": "event_typed",
        "previous_item_id": None,
        "item": {
            "id": "item_C1",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_text", "text": "What is the weather in London?"}],
        },
    }
    step = ev.step_of(state, typed)
    stored = PersistTranscript(role="user", text="What is the weather in London?", item_id="item_C1")
    assert (step.effects, step.controls) == ((stored,), ())
    assert step.state == state.with_realtime(known_items=(*state.realtime.known_items, "item_C1"))
    ended = ev.state_after([*ev.listening(), ev.sideband_closed(1000)])
    assert ended.is_terminal
    assert ev.step_of(ended, typed).effects == (stored,)
