"""A Live model's cap of sessions in a call: which cap a session counts against, and when the
next one is refused."""

from __future__ import annotations

import pytest

from pipeline.admission import LiveCap, LiveCaps, connect_cap, over_cap, room_under
from pipeline.platform.config import Settings
from pipeline.session.state import ModelChoice, Phase, Provider, SessionState

CAPS = LiveCaps.of(Settings(live_max_sessions={"gpt-live-1.1": 2}, live_model="gpt-live-1.1"))


def test_a_session_counts_against_the_cap_of_the_model_it_talks_to() -> None:
    """A Live session on a capped model counts against that model's cap; one naming no model
    (stored before models were chosen per session) against its provider's default's."""
    named = CAPS.cap_for("live", "gpt-live-1.1")
    unnamed = CAPS.cap_for("live", "")
    assert named is not None and (named.model, named.sessions) == ("gpt-live-1.1", 2)
    assert unnamed == named
    assert CAPS.cap_for("live", None) == named


def test_a_model_not_named_in_the_caps_has_none() -> None:
    """The other Live model, and every Realtime one, is never counted."""
    assert CAPS.cap_for("live", "gpt-live-1") is None
    assert CAPS.cap_for("realtime", "") is None
    assert CAPS.cap_for("realtime", "gpt-realtime-2.1") is None
    assert LiveCaps.of(Settings()).cap_for("live", "gpt-live-1.1") is None


def test_each_live_model_has_a_cap_of_its_own() -> None:
    """Two caps set, each session counts against its own model's."""
    caps = LiveCaps.of(Settings(live_max_sessions={"gpt-live-1.1": 5, "gpt-live-1": 1}))
    first = caps.cap_for("live", "gpt-live-1")
    current = caps.cap_for("live", "gpt-live-1.1")
    assert first is not None and (first.model, first.sessions) == ("gpt-live-1", 1)
    assert current is not None and (current.model, current.sessions) == ("gpt-live-1.1", 5)


@pytest.mark.parametrize("in_a_call", [0, 1])
def test_a_model_under_its_cap_admits_the_next_session(in_a_call: int) -> None:
    """Fewer sessions in a call than the cap: nothing is refused, and the room is the rest."""
    cap = LiveCap("gpt-live-1.1", 2, CAPS.defaults)
    assert over_cap(cap, in_a_call) is None
    assert room_under(cap, in_a_call) == 2 - in_a_call


@pytest.mark.parametrize("in_a_call", [2, 3])
def test_a_model_at_its_cap_refuses_the_next_session_naming_the_model_and_the_cap(in_a_call: int) -> None:
    """As many sessions as the cap (or more: a cap lowered under calls in progress): refused
    with the typed code, the model and the cap in the answer."""
    refused = over_cap(LiveCap("gpt-live-1.1", 2, CAPS.defaults), in_a_call)
    assert refused is not None
    assert refused.body()["error"] == {
        "code": "live_model_at_capacity",
        "message": str(refused),
        "model": "gpt-live-1.1",
        "cap": 2,
    }
    assert room_under(LiveCap("gpt-live-1.1", 2, CAPS.defaults), in_a_call) == 0


def _live(phase: Phase, model: str = "gpt-live-1.1") -> SessionState:
    return SessionState(phase=phase, provider=Provider.LIVE, model=ModelChoice(id=model))


def test_only_a_created_session_s_connect_is_counted() -> None:
    """A connect asked again of a session admitting (or of one connected, or over) admits
    nothing, so it never counts against the cap; a created one's does."""
    assert connect_cap(_live(Phase.CREATED), CAPS) == CAPS.cap_for("live", "gpt-live-1.1")
    for phase in (Phase.ADMITTING, Phase.LISTENING, Phase.ENDED, Phase.FAILED):
        assert connect_cap(_live(phase), CAPS) is None
    assert connect_cap(_live(Phase.CREATED, "gpt-live-1"), CAPS) is None
