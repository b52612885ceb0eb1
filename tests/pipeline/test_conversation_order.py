"""A call's lines in the conversation's order (pipeline.call.conversation_order), and the places a
Realtime sideband notes on the finals (pipeline.realtime.conversation)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.call.conversation_order import ConversationPlace, PlacedLine, in_conversation_order, place_of
from pipeline.call.sideband import Final, Submit
from pipeline.realtime.conversation import REMEMBERED_ITEMS, ConversationChain
from pipeline.realtime.sideband import RealtimeSideband


def _after(item_id: str, after: str | None) -> PlacedLine:
    return PlacedLine(item_id=item_id, place=ConversationPlace(after=after))


def _unplaced(item_id: str) -> PlacedLine:
    return PlacedLine(item_id=item_id, place=None)


def _ordered(lines: list[PlacedLine]) -> list[str]:
    return [lines[index].item_id for index in in_conversation_order(lines)]


def test_a_short_line_transcribed_before_the_question_it_follows_is_read_after_it() -> None:
    """Server VAD: "Please look it up." is transcribed before the long question said before it;
    the record reads the question first."""
    arrived = [_after("greeting", None), _after("look_it_up", "question"), _after("question", "greeting")]
    assert _ordered(arrived) == ["greeting", "question", "look_it_up"]


def test_an_answer_cut_short_before_its_question_was_transcribed_is_read_after_the_question() -> None:
    """A barge-in: the cut answer's final comes before the caller's line it answered, which
    opens the conversation; then the line that cut it."""
    arrived = [_after("cut_answer", "question"), _after("question", None), _after("cut_in", "cut_answer")]
    assert _ordered(arrived) == ["question", "cut_answer", "cut_in"]


def test_a_line_without_a_place_follows_the_line_that_arrived_before_it() -> None:
    """No place (a Live call, a record written before places, an item the gateway never saw
    added) keeps the arrival order; so does a place naming an item that has no line."""
    assert _ordered([_unplaced("a"), _unplaced("b"), _unplaced("c")]) == ["a", "b", "c"]
    arrived = [_after("a", None), _after("b", "a"), _after("c", "failed_transcription"), _after("d", "c")]
    assert _ordered(arrived) == ["a", "b", "c", "d"]
    # Placed lines around an unplaced one: it stays after the one it arrived after.
    arrived = [_after("u1", None), _unplaced("typed"), _after("a1", "typed"), _after("u2", "a1")]
    assert _ordered(arrived) == ["u1", "typed", "a1", "u2"]


def test_lines_that_follow_the_same_line_keep_their_arrival_order_and_circles_are_broken() -> None:
    """Two lines placed after one line (an item inserted mid-conversation) keep the order they
    arrived in; places that lead in a circle (no provider sends them) still give every line once."""
    assert _ordered([_after("a", None), _after("b", "a"), _after("c", "a")]) == ["a", "b", "c"]
    circle = [_after("a", "b"), _after("b", "a"), _after("c", "b")]
    assert sorted(_ordered(circle)) == ["a", "b", "c"]
    assert _ordered([_after("a", "a")]) == ["a"]


def test_a_place_is_read_from_a_logged_event_and_a_malformed_one_is_none() -> None:
    assert place_of({"place": {"after": "item_1"}}) == ConversationPlace(after="item_1")
    assert place_of({"place": {"after": None}}) == ConversationPlace(after=None)
    assert place_of({"place": {"after": 4}}) is None
    assert place_of({"place": "item_1"}) is None
    assert place_of({}) is None and place_of(None) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=12).flatmap(lambda n: st.permutations(range(n))))
def test_whatever_order_the_finals_come_in_the_record_reads_in_the_conversation_s_order(
    arrival: list[int],
) -> None:
    """A conversation of n lines, each placed after the one before it: the finals may arrive in
    any order, and the lines are read in the conversation's."""
    lines = [_after(f"item_{index}", f"item_{index - 1}" if index else None) for index in arrival]
    assert _ordered(lines) == [f"item_{index}" for index in range(len(arrival))]


# ── the places a sideband notes ─────────────────────────────────────────────────────────


def _added(item_id: str, previous: str | None, kind: str = "message", role: str = "user") -> dict[str, Any]:
    item: dict[str, Any] = {"id": item_id, "object": "realtime.item", "type": kind, "status": "completed"}
    if kind == "message":
        item.update(role=role, content=[])
    return {
        "type": "conversation.item.added",
        "event_id": f"e_{item_id}",
        "previous_item_id": previous,
        "item": item,
    }


def test_a_place_passes_over_the_items_that_bear_no_line_and_keeps_the_first_announcement() -> None:
    """The answer after a tool round follows the caller's question, not the function call or its
    output; an item is placed where it was first announced (the caller's audio by its commit;
    `conversation.item.done` may name no previous item); an item never seen has no place."""
    chain = ConversationChain()
    chain.see("input_audio_buffer.committed", {"previous_item_id": None, "item_id": "question"})
    chain.see("conversation.item.added", _added("question", "someone_else"))
    chain.see("conversation.item.added", _added("call", "question", kind="function_call"))
    chain.see("conversation.item.added", _added("output", "call", kind="function_call_output"))
    chain.see("conversation.item.added", _added("answer", "output", role="assistant"))
    chain.see(
        "conversation.item.done",
        {**_added("answer", None, role="assistant"), "type": "conversation.item.done"},
    )
    assert chain.place_of("question") == ConversationPlace(after=None)
    assert chain.place_of("answer") == ConversationPlace(after="question")
    assert chain.place_of("never_added") is None
    # A system message bears no line either.
    chain.see("conversation.item.added", _added("note", "answer", role="system"))
    chain.see("conversation.item.added", _added("next", "note", role="assistant"))
    assert chain.place_of("next") == ConversationPlace(after="answer")


def test_the_chain_forgets_its_oldest_items_past_its_bound() -> None:
    chain = ConversationChain()
    for index in range(REMEMBERED_ITEMS + 1):
        chain.see("conversation.item.added", _added(f"i{index}", f"i{index - 1}" if index else None))
    assert chain.place_of("i0") is None
    assert chain.place_of(f"i{REMEMBERED_ITEMS}") == ConversationPlace(after=f"i{REMEMBERED_ITEMS - 1}")


def test_the_sideband_notes_each_final_s_place_and_never_the_provider_s() -> None:
    """The caller's final and the assistant's carry the place of their item; a `place` the
    provider sent is dropped; a final whose item was never seen added carries none."""
    sideband = RealtimeSideband()

    def receive(event: dict[str, Any]) -> list[Any]:
        return sideband.receive(json.dumps(event), 1.0, 1.0)

    receive(
        {"type": "input_audio_buffer.committed", "event_id": "e1", "previous_item_id": None, "item_id": "q"}
    )
    receive(_added("a", "q", role="assistant"))
    final = {
        "type": "response.output_audio_transcript.done",
        "event_id": "e2",
        "response_id": "r1",
        "item_id": "a",
        "output_index": 0,
        "content_index": 0,
        "transcript": "Sure.",
        "place": {"after": "forged"},
    }
    [submitted, shown] = receive(final)
    assert submitted == Submit({**final, "place": {"after": "q"}}, 1.0)
    assert shown == Final("assistant", "a", "Sure.")
    heard = {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "e3",
        "item_id": "unseen",
        "content_index": 0,
        "transcript": "Hello?",
        "place": {"after": "forged"},
    }
    [submitted, _shown] = receive(heard)
    assert isinstance(submitted, Submit) and "place" not in submitted.event
