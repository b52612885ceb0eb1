"""A Live session's startup configuration (pipeline/live/configuration.py) follows its model:
gpt-live-1.1 is told in plain words when to delegate (no marker token), gpt-live-1 is not; the
model and the voice are the session's."""

from __future__ import annotations

from datetime import date

from pipeline.admission import session_created_from
from pipeline.api.requests import SessionSpec
from pipeline.live.configuration import DELEGATION_POLICY, live_configuration
from pipeline.platform.config import Settings
from pipeline.session.state import SessionState
from pipeline.transitions import apply

TODAY = date(2026, 12, 7)


def _state(**spec: object) -> SessionState:
    created = session_created_from(
        SessionSpec.model_validate({"instructions": "You are the order desk.", "provider": "live", **spec}),
        tools={},
        handlers={"order_desk": "1"},
        settings=Settings(),
        today=TODAY,
    )
    return apply(SessionState(), created, 1).state


def test_gpt_live_1_1_is_told_in_plain_words_when_to_delegate() -> None:
    configuration = live_configuration(_state(model="gpt-live-1.1", live={"delegation": "order_desk"}))
    assert configuration["model"] == "gpt-live-1.1"
    assert configuration["instructions"] == f"You are the order desk.\n\n{DELEGATION_POLICY}"
    assert "<|" not in configuration["instructions"]  # no marker token


def test_gpt_live_1_and_a_session_without_a_handler_get_the_instructions_as_they_are() -> None:
    older = live_configuration(_state(model="gpt-live-1", live={"delegation": "order_desk"}))
    assert (older["model"], older["instructions"]) == ("gpt-live-1", "You are the order desk.")
    nothing_to_delegate = live_configuration(_state(model="gpt-live-1.1"))
    assert nothing_to_delegate["instructions"] == "You are the order desk."


def test_the_session_s_voice_is_its_startup_voice() -> None:
    assert live_configuration(_state(voice="vesper"))["audio"] == {"output": {"voice": "vesper"}}
    assert live_configuration(_state(voice="voice_abc123"))["audio"] == {
        "output": {"voice": {"id": "voice_abc123"}}
    }
    assert "audio" not in live_configuration(_state())
