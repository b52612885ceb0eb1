"""Session invariants over random event sequences (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.dialects import parse_inbound
from pipeline.realtime.controls import ResponseCreate
from pipeline.realtime.events import ResponseDone
from pipeline.session.state import SessionState, Usage
from pipeline.session.step import PersistTranscript, Step
from tests.pipeline import events as ev

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)

_ITEMS = st.sampled_from(["item_U1", "item_U2", "item_U3"])
_RESPONSES = st.sampled_from(["resp_1", "resp_2", "resp_3"])
_STATUSES = st.sampled_from(["completed", "cancelled", "failed", "incomplete"])
_TOKENS = st.integers(min_value=0, max_value=5_000)

# The small alphabet: what a provider and a caller can throw at a live session.
EVENT = st.one_of(
    st.builds(ev.user_final, _ITEMS, st.sampled_from(["Hi", "Actually, wait.", "Goodbye"])),
    st.builds(ev.response_created, _RESPONSES),
    st.builds(
        lambda rid, status, i, o: ev.response_done(rid, status, input_tokens=i, output_tokens=o),
        _RESPONSES,
        _STATUSES,
        _TOKENS,
        _TOKENS,
    ),
    st.builds(ev.assistant_final, _RESPONSES, st.sampled_from(["item_A1", "item_A2"]), st.just("Sure.")),
    st.builds(ev.speech_started, _ITEMS),
    st.builds(ev.session_updated),
    st.builds(ev.sideband_closed, st.just(1000)),
    st.builds(ev.end_requested),
    st.builds(ev.provider_error),
    st.builds(ev.unknown, st.sampled_from(["foo.bar", "rate_limits.updated", "conversation.item.added"])),
)

# Where the sequence starts: a created, connected or listening session.
PREFIX = st.sampled_from([[ev.session_created()], ev.admitted(), ev.listening()])

SEQUENCE = st.tuples(PREFIX, st.lists(EVENT, max_size=30)).map(lambda parts: [*parts[0], *parts[1]])


def _walk(raws: list[dict[str, Any]]) -> list[tuple[SessionState, dict[str, Any], Step]]:
    """Every step of the fold, with the state it was applied to and its event."""
    state = SessionState()
    walked = []
    for raw in raws:
        step = ev.step_of(state, raw)
        walked.append((state, raw, step))
        state = step.state
    return walked


def _finishes_turn(before: SessionState, raw: dict[str, Any]) -> bool:
    event = parse_inbound(raw)
    return (
        isinstance(event, ResponseDone)
        and before.realtime.turn is not None
        and not before.realtime.turn.refused
        and before.realtime.turn.response_id in (event.response.id, None)
    )


@PROPERTY_SETTINGS
@given(SEQUENCE)
def test_ended_and_failed_are_absorbing(raws: list[dict[str, Any]]) -> None:
    """Once a session is ended or failed, no later step sends a control, changes it, or does more
    than persist a transcript."""
    for before, _, step in _walk(raws):
        if before.is_terminal:
            assert step.controls == ()
            assert step.state == before
            assert all(isinstance(effect, PersistTranscript) for effect in step.effects)


@PROPERTY_SETTINGS
@given(SEQUENCE)
def test_at_most_one_response_is_owed_at_a_time(raws: list[dict[str, Any]]) -> None:
    """A step asks for one response at most, only when no turn is active or it just ended one."""
    owed = 0
    for before, raw, step in _walk(raws):
        created = [c for c in step.controls if isinstance(c, ResponseCreate)]
        finished = _finishes_turn(before, raw)
        assert len(created) <= 1
        retried = before.realtime.turn is not None and before.realtime.turn.refused
        if created:
            assert before.realtime.turn is None or finished or retried
            assert step.state.realtime.turn is not None
        if retried and created:
            # The refused request asked again: still the same one owed response.
            continue
        if finished and before.phase == "responding":
            owed -= 1
        elif before.realtime.turn is not None and step.state.realtime.turn is None:
            # The turn ended with the session (end, close), not by a response.done.
            owed = 0
        owed += len(created)
        assert owed == (1 if step.state.realtime.turn is not None else 0)


@PROPERTY_SETTINGS
@given(SEQUENCE)
def test_the_fold_is_deterministic(raws: list[dict[str, Any]]) -> None:
    """Folding the same sequence twice gives equal states, controls and effects."""
    first_state, first_steps = ev.fold(raws)
    second_state, second_steps = ev.fold(raws)

    assert first_state == second_state
    assert ev.controls_of(first_steps) == ev.controls_of(second_steps)
    assert ev.effects_of(first_steps) == ev.effects_of(second_steps)


def _never_less(before: Usage, after: Usage) -> bool:
    return (
        after.input_tokens >= before.input_tokens
        and after.output_tokens >= before.output_tokens
        and after.total_tokens >= before.total_tokens
        and after.responses >= before.responses
    )


@PROPERTY_SETTINGS
@given(SEQUENCE)
def test_usage_never_decreases(raws: list[dict[str, Any]]) -> None:
    """No step makes any usage counter smaller."""
    for before, _, step in _walk(raws):
        assert _never_less(before.usage, step.state.usage)


@PROPERTY_SETTINGS
@given(SEQUENCE)
def test_every_user_final_is_persisted(raws: list[dict[str, Any]]) -> None:
    """Every caller's final transcript is persisted exactly once, whatever the phase."""
    _, steps = ev.fold(raws)
    finals = [raw["item_id"] for raw in raws if raw["type"].endswith("transcription.completed")]

    persisted = [e.item_id for e in ev.effects_of(steps, PersistTranscript) if e.role == "user"]

    assert persisted == finals
