"""The Realtime sideband's rules, driven without a socket: frames in, actions out (in the manner
of websockets' tests/test_protocol.py)."""

from __future__ import annotations

import json
from typing import Any

from pipeline.call.sideband import Action, Delta, Final, Incident, Submit, Waited
from pipeline.realtime.sideband import RealtimeSideband
from pipeline.session.step import PersistTranscript
from tests.pipeline.events import (
    assistant_final,
    assistant_text_final,
    function_call,
    listening,
    maintenance,
    response_created,
    response_done,
    speech_started,
    state_after,
    step_of,
    unknown,
    user_final,
)

RECEIVED_AT = 1_700_000_000.0


def _delta(event_type: str, item_id: str, delta: str, response_id: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": event_type, "event_id": f"event_{item_id}_{delta}", "item_id": item_id}
    if response_id is not None:
        event["response_id"] = response_id
    return {**event, "output_index": 0, "content_index": 0, "delta": delta}


def _assistant_delta(item_id: str, delta: str, response_id: str = "resp_1") -> dict[str, Any]:
    return _delta("response.output_audio_transcript.delta", item_id, delta, response_id)


class SidebandCase:
    """A sideband fed JSON frames, with the assertions the tests read by."""

    def __init__(self) -> None:
        self.sideband = RealtimeSideband()

    def receive(self, event: dict[str, Any] | str | bytes, now: float = 0.0) -> list[Action]:
        frame = event if isinstance(event, str | bytes) else json.dumps(event)
        return self.sideband.receive(frame, RECEIVED_AT, now)

    def assert_submitted(self, event: dict[str, Any], now: float = 0.0) -> dict[str, Any]:
        """Feeding `event` submits it (and maybe a final line); answers what was submitted."""
        actions = self.receive(event, now)
        submitted = [action for action in actions if isinstance(action, Submit)]
        assert len(submitted) == 1 and actions[0] is submitted[0]
        assert submitted[0].received_at == RECEIVED_AT
        return submitted[0].event


def test_a_frame_that_is_not_json_is_an_incident_and_nothing_else() -> None:
    """A frame that is not JSON is one incident, quoting the frame, and no event."""
    actions = SidebandCase().receive("{not json")
    assert len(actions) == 1 and isinstance(actions[0], Incident)
    assert actions[0].code == "malformed_provider_frame"
    assert actions[0].context == {"frame_preview": "{not json", "bytes": 9}


def test_a_bad_frame_leaves_the_frames_after_it_alone() -> None:
    """After a bad frame, the next good frame is submitted as if nothing happened."""
    case = SidebandCase()
    assert isinstance(case.receive(b"\xff\xfe")[0], Incident)
    event = response_created("resp_1")
    assert case.assert_submitted(event) == event


def test_a_bad_frame_s_preview_is_bounded() -> None:
    """A long bad frame is quoted by its first 200 characters and counted whole."""
    frame = "[" + "1," * 500 + "1]"
    (incident,) = SidebandCase().receive(frame)
    assert isinstance(incident, Incident)
    assert incident.context == {"frame_preview": frame[:200], "bytes": len(frame)}


def test_a_host_event_from_the_provider_is_an_incident() -> None:
    """A provider never speaks for the host: a `switchboard.*` frame is refused."""
    (incident,) = SidebandCase().receive({"type": "switchboard.end_requested", "reason": "x"})
    assert isinstance(incident, Incident) and incident.code == "malformed_provider_frame"


def test_a_function_call_named_twice_is_submitted_once() -> None:
    """The provider names a call in function_call_arguments.done and again in output_item.done;
    only the first naming is submitted, and another call still is."""
    case = SidebandCase()
    first = function_call("call_1", "resp_1")
    case.assert_submitted(first)
    named_again = {
        "type": "response.output_item.done",
        "event_id": "event_item_done",
        "response_id": "resp_1",
        "output_index": 0,
        "item": {
            "id": first["item_id"],
            "type": "function_call",
            "status": "completed",
            "name": "lookup_order",
            "call_id": "call_1",
            "arguments": "{}",
        },
    }
    assert case.receive(named_again) == []
    assert case.receive(first) == []
    case.assert_submitted(function_call("call_2", "resp_1"))


def test_streamed_deltas_go_to_the_watchers_and_never_to_the_log() -> None:
    """Each transcript delta is one `Delta`, the caller's as the user's, and nothing is submitted."""
    case = SidebandCase()
    caller = _delta("conversation.item.input_audio_transcription.delta", "item_u1", "Hel")
    assert case.receive(caller) == [Delta("user", "item_u1", "Hel")]
    assert case.receive(_assistant_delta("item_a1", "Sure")) == [Delta("assistant", "item_a1", "Sure")]
    text = _delta("response.output_text.delta", "item_a2", "ok", "resp_1")
    assert case.receive(text) == [Delta("assistant", "item_a2", "ok")]


def test_a_beta_delta_is_streamed_under_its_ga_name() -> None:
    """A beta-named assistant delta is fanned out like its GA twin."""
    beta = _delta("response.audio_transcript.delta", "item_a1", "Hi", "resp_1")
    assert SidebandCase().receive(beta) == [Delta("assistant", "item_a1", "Hi")]


def test_finals_follow_their_durable_event() -> None:
    """A finished line is submitted, then shown to the watchers whole."""
    case = SidebandCase()
    heard = user_final("item_u1", "Where is my order?")
    assert case.receive(heard) == [
        Submit(heard, RECEIVED_AT),
        Final("user", "item_u1", "Where is my order?"),
    ]
    said = assistant_final("resp_1", "item_a1", "It ships today.")
    assert case.receive(said) == [Submit(said, RECEIVED_AT), Final("assistant", "item_a1", "It ships today.")]
    typed = assistant_text_final("resp_1", "item_a2", "Anything else?")
    assert case.receive(typed)[1] == Final("assistant", "item_a2", "Anything else?")


def test_an_event_without_a_line_is_submitted_alone() -> None:
    """A durable event that is no transcript line, and an unknown one, are only submitted."""
    case = SidebandCase()
    done = response_done("resp_1")
    assert case.receive(done) == [Submit(done, RECEIVED_AT)]
    strange = unknown("foo.bar")
    assert case.receive(strange) == [Submit(strange, RECEIVED_AT)]


def test_an_ignored_event_calls_for_nothing() -> None:
    """A known event nothing depends on is neither submitted nor shown."""
    ignored = {"type": "rate_limits.updated", "event_id": "event_rl", "rate_limits": []}
    assert SidebandCase().receive(ignored) == []


def test_the_provider_s_playback_is_never_trusted() -> None:
    """With nothing playing, a `playback` the provider put on speech_started is taken away."""
    event = {
        **speech_started("item_u2"),
        "playback": {"item_id": "forged", "response_id": "resp_x", "played_ms": 99},
    }
    submitted = SidebandCase().assert_submitted(event)
    assert submitted == {key: value for key, value in event.items() if key != "playback"}


def test_playback_is_what_this_socket_saw_playing() -> None:
    """speech_started carries the item whose first delta came last and how long it has played,
    in place of the provider's own."""
    case = SidebandCase()
    case.receive(_assistant_delta("item_a1", "Your order", "resp_1"), now=10.0)
    case.receive(_assistant_delta("item_a1", " ships", "resp_1"), now=10.4)
    event = {
        **speech_started("item_u2"),
        "playback": {"item_id": "forged", "response_id": "resp_x", "played_ms": 99},
    }
    submitted = case.assert_submitted(event, now=11.25)
    assert submitted["playback"] == {"item_id": "item_a1", "response_id": "resp_1", "played_ms": 1250}
    assert case.sideband.playback(12.0) == {"item_id": "item_a1", "response_id": "resp_1", "played_ms": 2000}


def test_a_new_item_restarts_playback() -> None:
    """The first delta of another item starts its own playback."""
    case = SidebandCase()
    case.receive(_assistant_delta("item_a1", "One", "resp_1"), now=1.0)
    case.receive(_assistant_delta("item_a2", "Two", "resp_2"), now=5.0)
    assert case.sideband.playback(5.5) == {"item_id": "item_a2", "response_id": "resp_2", "played_ms": 500}


def test_nothing_plays_before_the_first_delta() -> None:
    """A fresh sideband has no playback."""
    assert RealtimeSideband().playback(100.0) is None


def test_a_maintenance_response_s_words_are_not_streamed() -> None:
    """After a maintenance response is created, its deltas are shown to nobody and its durable
    frames are still submitted, without a final line."""
    case = SidebandCase()
    created = response_created("resp_m1", metadata=maintenance(1))
    assert case.receive(created) == [Submit(created, RECEIVED_AT)]
    assert case.receive(_delta("response.output_text.delta", "item_s1", "Summary", "resp_m1")) == []
    summary = assistant_text_final("resp_m1", "item_s1", "Summary: the caller asked about order 42.")
    assert case.receive(summary) == [Submit(summary, RECEIVED_AT)]
    done = response_done("resp_m1", metadata=maintenance(1))
    assert case.receive(done) == [Submit(done, RECEIVED_AT)]


def test_a_maintenance_response_does_not_silence_the_others() -> None:
    """Another response's words are streamed as ever."""
    case = SidebandCase()
    case.receive(response_created("resp_m1", metadata=maintenance(1)))
    case.receive(response_created("resp_2"))
    assert case.receive(_assistant_delta("item_a2", "Hello", "resp_2")) == [
        Delta("assistant", "item_a2", "Hello")
    ]


def test_a_maintenance_response_s_delta_does_not_start_playback() -> None:
    """Nobody hears a maintenance response, so its audio transcript is not what plays."""
    case = SidebandCase()
    case.receive(response_created("resp_m1", metadata=maintenance(1)))
    case.receive(_assistant_delta("item_s1", "Summary", "resp_m1"), now=3.0)
    assert case.sideband.playback(4.0) is None


def test_ticks_and_close_call_for_nothing() -> None:
    """A Realtime sideband holds nothing to write down: time and its close call for nothing."""
    sideband = RealtimeSideband()
    assert sideband.tick_every_s is None and sideband.closed_by_provider_within_s is None
    assert sideband.tick(RECEIVED_AT) == []
    assert sideband.close(RECEIVED_AT) == []


# ── the caller's wait (heard latency) ───────────────────────────────────────────


def _speech_stopped(item_id: str) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_stopped",
        "event_id": f"event_stop_{item_id}",
        "item_id": item_id,
        "audio_end_ms": 1_800,
    }


def _buffer_started(response_id: str) -> dict[str, Any]:
    return {
        "type": "output_audio_buffer.started",
        "event_id": f"event_ob_{response_id}",
        "response_id": response_id,
    }


def _audio_delta(response_id: str) -> dict[str, Any]:
    return {
        "type": "response.output_audio.delta",
        "event_id": f"event_audio_{response_id}",
        "response_id": response_id,
        "item_id": "item_a1",
        "output_index": 0,
        "content_index": 0,
        "delta": "AAAA",
    }


def _receive_at(sideband: RealtimeSideband, event: dict[str, Any], at: float) -> list[Action]:
    return sideband.receive(json.dumps(event), at, 0.0)


def test_the_answer_s_done_carries_the_caller_s_wait_and_it_is_counted_once() -> None:
    """speech_stopped at t, the answer's first audio (its audio buffer starting, as on WebRTC) at
    t + 0.7 s: its response.done is submitted with `heard` holding both, then one `Waited` of
    700 ms follows it; neither the speech_stopped nor the audio is submitted itself."""
    sideband = RealtimeSideband()
    t = RECEIVED_AT
    assert _receive_at(sideband, _speech_stopped("item_u1"), t) == []
    _receive_at(sideband, response_created("resp_1"), t + 0.3)
    assert _receive_at(sideband, _buffer_started("resp_1"), t + 0.7) == []
    assert [type(a) for a in _receive_at(sideband, _assistant_delta("item_a1", "Hi", "resp_1"), t + 0.8)] == [
        Delta
    ]
    actions = _receive_at(sideband, response_done("resp_1"), t + 2.0)
    assert [type(action) for action in actions] == [Submit, Waited]
    submit, waited = actions
    assert isinstance(submit, Submit) and submit.event["heard"] == {
        "speech_ended_at": t,
        "first_audio_at": t + 0.7,
    }
    assert waited == Waited("realtime", 700)


def test_a_greeting_and_the_same_response_s_later_audio_answer_no_wait() -> None:
    """A response that no speech_stopped came before waits for nobody; once the caller stops while
    it still plays (a barge-in), its own later audio is no answer: the next response's is."""
    sideband = RealtimeSideband()
    t = RECEIVED_AT
    _receive_at(sideband, _audio_delta("resp_1"), t)
    _receive_at(sideband, _speech_stopped("item_u1"), t + 1.0)
    _receive_at(sideband, _audio_delta("resp_1"), t + 1.1)
    done = _receive_at(sideband, response_done("resp_1"), t + 1.2)
    [submitted] = done
    assert isinstance(submitted, Submit) and "heard" not in submitted.event
    _receive_at(sideband, _audio_delta("resp_2"), t + 1.5)
    _receive_at(sideband, _audio_delta("resp_2"), t + 1.6)
    answered = _receive_at(sideband, response_done("resp_2"), t + 2.0)
    assert answered[1] == Waited("realtime", 500)


def test_the_provider_cannot_say_how_long_the_caller_waited() -> None:
    """A `heard` the provider puts on its response.done is dropped: only the gateway's stands."""
    forged = {**response_done("resp_1"), "heard": {"speech_ended_at": 0.0, "first_audio_at": 1.0}}
    submitted = SidebandCase().assert_submitted(forged)
    assert "heard" not in submitted


def test_a_cut_answer_s_late_audio_does_not_restart_the_next_answer_s_wait() -> None:
    """The caller stops twice: a late audio frame of the first answer between the second answer's
    frames is no first audio of anything, and the second answer keeps the wait it answered."""
    sideband = RealtimeSideband()
    t = RECEIVED_AT
    _receive_at(sideband, _speech_stopped("item_u1"), t)
    _receive_at(sideband, _audio_delta("resp_1"), t + 0.5)
    _receive_at(sideband, _speech_stopped("item_u2"), t + 1.0)
    _receive_at(sideband, _audio_delta("resp_2"), t + 1.4)
    _receive_at(sideband, _audio_delta("resp_1"), t + 1.5)
    _receive_at(sideband, _speech_stopped("item_u3"), t + 1.6)
    _receive_at(sideband, _audio_delta("resp_2"), t + 1.7)
    assert _receive_at(sideband, response_done("resp_1", "cancelled"), t + 1.8)[1] == Waited("realtime", 500)
    assert _receive_at(sideband, response_done("resp_2"), t + 2.0)[1] == Waited("realtime", 400)


def _user_item(item_id: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "conversation.item.added",
        "event_id": f"event_{item_id}",
        "previous_item_id": None,
        "item": {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": list(content),
        },
    }


def test_a_line_another_client_typed_is_durable_and_shown_and_the_host_s_own_is_not() -> None:
    """A user text message another client added (a WebRTC client's data channel) is the
    caller's side of the conversation: submitted and shown as a final line. The echo of
    Switchboard's own typed item was recorded when it was sent; a user audio item is the
    caller's speech, recorded by its transcription: neither is submitted. A beta
    `conversation.item.created` is the same event."""
    case = SidebandCase()
    typed = _user_item(
        "item_c1",
        {"type": "input_text", "text": "What is the weather"},
        {"type": "input_text", "text": " in London?"},
    )
    actions = case.receive(typed)
    # It opens the conversation: its place says so (`pipeline.call.conversation_order`).
    placed = {**typed, "place": {"after": None}}
    assert actions == [
        Submit(placed, RECEIVED_AT),
        Final("user", "item_c1", "What is the weather in London?"),
    ]
    assert case.receive(_user_item("item_typed_0123456789abcdef", {"type": "input_text", "text": "Hi"})) == []
    assert case.receive(_user_item("item_spoken", {"type": "input_audio", "transcript": None})) == []
    beta = {
        **_user_item("item_c2", {"type": "input_text", "text": "Thanks"}),
        "type": "conversation.item.created",
    }
    [submitted, _] = case.receive(beta)
    assert isinstance(submitted, Submit) and submitted.event["type"] == "conversation.item.added"


def test_an_assistant_line_another_client_seeded_is_durable_shown_and_recorded() -> None:
    """A conversation seeded with a history (the call so far) holds the agent's lines beside the
    caller's: an assistant text message another client added is submitted, shown as the agent's
    final line and stored as the agent's line, as the seeded caller lines are. The assistant item
    a response is producing (added in progress, without its words) is the model's own, recorded
    from its final."""
    case = SidebandCase()
    seeded = {
        **_user_item(
            "item_seed_agent", {"type": "output_text", "text": "Hello Sam, what would you like to know?"}
        ),
        "previous_item_id": "item_seed_caller",
    }
    seeded["item"] = {**seeded["item"], "role": "assistant"}
    [submitted, shown] = case.receive(seeded)
    assert isinstance(submitted, Submit) and submitted.event["item"]["id"] == "item_seed_agent"
    assert shown == Final("assistant", "item_seed_agent", "Hello Sam, what would you like to know?")
    answering = {
        **seeded,
        "item": {**seeded["item"], "id": "item_answer", "status": "in_progress", "content": []},
    }
    assert case.receive(answering) == []
    step = step_of(state_after(listening()), submitted.event)
    assert step.controls == ()
    assert step.effects == (
        PersistTranscript(
            role="assistant", text="Hello Sam, what would you like to know?", item_id="item_seed_agent"
        ),
    )


def test_a_typed_line_of_the_wrong_shape_or_unstorable_is_an_incident_and_nothing_else() -> None:
    """Another client's typed line is now kept, so it is checked as every kept event is: text
    that is not a string, or that PostgreSQL could never store (U+0000), is one incident and
    no event; the frames after it go on."""
    case = SidebandCase()
    for bad in (
        _user_item("item_c1", {"type": "input_text", "text": 4417}),
        _user_item("item_c2", {"type": "input_text", "text": "card \u0000 4417"}),
    ):
        (incident,) = case.receive(bad)
        assert isinstance(incident, Incident) and incident.code == "malformed_provider_frame"
    good = _user_item("item_c3", {"type": "input_text", "text": "Thanks"})
    placed = {**good, "place": {"after": None}}
    assert case.receive(good) == [Submit(placed, RECEIVED_AT), Final("user", "item_c3", "Thanks")]
