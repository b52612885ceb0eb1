"""A Live call's turns among its durable events (`pipeline.live.turns`): the caller's words,
then the agent's answer, the boundaries heard latency reads."""

from __future__ import annotations

from typing import Any

from pipeline.live.frames import live_transcript
from pipeline.live.turns import LiveTurns, spoken_by
from pipeline.session.timeline import Speaker, TranscriptFragment


def _words(speaker: Speaker, start_ms: int) -> dict[str, Any]:
    fragment = TranscriptFragment(
        speaker=speaker, event_id=f"event_{start_ms}", start_ms=start_ms, end_ms=start_ms + 200, text="words"
    )
    return live_transcript([fragment])


DELEGATED = {"type": "session.delegation.created", "event_id": "event_d", "offset_ms": 900}


def test_a_turn_is_the_callers_words_then_the_agents_answer_up_to_the_callers_next_words() -> None:
    """A turn opens with the caller's words, keeps their further words and everything up to the
    caller's next words after the agent answered; a greeting before it opens none."""
    turns = LiveTurns()
    steps = []
    for event in (
        _words(Speaker.AGENT, 0),
        _words(Speaker.CALLER, 500),
        _words(Speaker.CALLER, 800),
        DELEGATED,
        _words(Speaker.AGENT, 1_200),
        _words(Speaker.AGENT, 2_000),
        _words(Speaker.CALLER, 3_000),
    ):
        step = turns.step(event)
        steps.append((step.ends, step.opens))
        turns = step.turns
    assert steps == [
        (False, False),  # a greeting: no turn
        (False, True),  # the caller's words open the first turn
        (False, False),  # more of them before the answer: the same turn
        (False, False),
        (False, False),  # the answer
        (False, False),  # more of it
        (True, True),  # the caller again: the first turn ends, the second opens
    ]
    assert turns == LiveTurns(is_open=True)


def test_only_written_down_words_have_a_speaker() -> None:
    """`spoken_by` names the speaker of a durable transcript piece and of nothing else."""
    assert spoken_by(_words(Speaker.CALLER, 0)) is Speaker.CALLER
    assert spoken_by(_words(Speaker.AGENT, 0)) is Speaker.AGENT
    assert spoken_by(DELEGATED) is None
    assert spoken_by({"type": "switchboard.live_transcript", "speaker": "nobody"}) is None
