"""A Live call's turns among its durable events (`pipeline.live.turns`): the caller's words,
then the agent's answer, the boundaries heard latency reads."""

from __future__ import annotations

from typing import Any

from pipeline.live.frames import live_transcript
from pipeline.live.turns import LiveTurns, TurnStep, spoken_by
from pipeline.timeline import Speaker, TranscriptFragment


def _words(speaker: Speaker, start_ms: int) -> dict[str, Any]:
    fragment = TranscriptFragment(
        speaker=speaker, event_id=f"event_{start_ms}", start_ms=start_ms, end_ms=start_ms + 200, text="words"
    )
    return live_transcript([fragment])


DELEGATED = {"type": "session.delegation.created", "event_id": "event_d", "offset_ms": 900}


def test_a_turn_is_the_callers_words_then_the_agents_answer_up_to_the_callers_next_words() -> None:
    turns = LiveTurns()
    steps = [
        turns.step(event)
        for event in (
            _words(Speaker.AGENT, 0),  # a greeting: no turn
            _words(Speaker.CALLER, 500),  # opens the first turn
            _words(Speaker.CALLER, 800),  # more of the caller's words: the same turn
            DELEGATED,
            _words(Speaker.AGENT, 1_200),  # the answer
            _words(Speaker.AGENT, 2_000),  # more of it
            _words(Speaker.CALLER, 3_000),  # ends the first turn, opens the second
        )
    ]
    assert steps == [
        TurnStep(),
        TurnStep(opens=True),
        TurnStep(),
        TurnStep(),
        TurnStep(),
        TurnStep(),
        TurnStep(ends=True, opens=True),
    ]
    assert turns.close() is True
    assert turns.close() is False


def test_only_written_down_words_have_a_speaker() -> None:
    assert spoken_by(_words(Speaker.CALLER, 0)) is Speaker.CALLER
    assert spoken_by(_words(Speaker.AGENT, 0)) is Speaker.AGENT
    assert spoken_by(DELEGATED) is None
    assert spoken_by({"type": "switchboard.live_transcript", "speaker": "nobody"}) is None
