"""How an attempt ended: the outcomes, and a failed setup's code mapped to one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.outbound.outcomes import (
    ALWAYS_FINAL,
    ATTEMPT_OUTCOMES,
    MAXIMUM_FAILURE_CODE_CHARS,
    NEVER_DIALLED,
    RETRYABLE,
    Outcome,
    answered_outcome,
    failure_outcome,
)


def test_every_outcome_is_an_attempt_s_or_a_contact_s_never_dialled() -> None:
    """Six outcomes end an attempt, two name a contact never dialled; each is retryable or final."""
    assert set(Outcome) == ATTEMPT_OUTCOMES | NEVER_DIALLED
    assert not ATTEMPT_OUTCOMES & NEVER_DIALLED
    assert set(Outcome) == RETRYABLE | ALWAYS_FINAL
    assert not RETRYABLE & ALWAYS_FINAL


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("busy", Outcome.BUSY),
        ("user_busy", Outcome.BUSY),
        ("USER-BUSY", Outcome.BUSY),
        ("486", Outcome.BUSY),
        ("sip_486", Outcome.BUSY),
        ("SIP 600", Outcome.BUSY),
        ("no_answer", Outcome.NO_ANSWER),
        ("timeout", Outcome.NO_ANSWER),
        ("ringing_timeout", Outcome.NO_ANSWER),
        ("480", Outcome.NO_ANSWER),
        ("408", Outcome.NO_ANSWER),
        ("487", Outcome.NO_ANSWER),
        (" No Answer ", Outcome.NO_ANSWER),
        ("rejected", Outcome.FAILED),
        ("declined", Outcome.FAILED),
        ("603", Outcome.FAILED),
        ("404", Outcome.FAILED),
        ("503", Outcome.FAILED),
    ],
)
def test_a_failed_setup_s_code_names_its_outcome(code: str, outcome: Outcome) -> None:
    """Busy codes are busy, ringing out is no answer, a rejection is failed; case, spaces and dashes aside."""
    assert failure_outcome(code) == (outcome, code)


@pytest.mark.parametrize("code", ["carrier_exploded", "", "4860", "sip_999", "Busy signal"])
def test_an_unknown_code_is_failed_and_kept_as_it_came(code: str) -> None:
    """A code nobody mapped is `failed`, and the code is kept exactly, to be read later."""
    assert failure_outcome(code) == (Outcome.FAILED, code)


@given(st.text())
def test_any_code_maps_to_an_attempt_outcome_and_keeps_its_start(code: str) -> None:
    """Whatever the code, the outcome is busy, no_answer or failed, and the code is kept (bounded)."""
    outcome, kept = failure_outcome(code)
    assert outcome in {Outcome.BUSY, Outcome.NO_ANSWER, Outcome.FAILED}
    assert kept == code[:MAXIMUM_FAILURE_CODE_CHARS]


def test_who_answered_names_the_outcome_of_an_answered_call() -> None:
    """A machine is voicemail; a person, or nobody could tell, is a completed call."""
    assert answered_outcome("machine") is Outcome.VOICEMAIL
    assert answered_outcome("human") is Outcome.COMPLETED
    assert answered_outcome("unknown") is Outcome.COMPLETED
