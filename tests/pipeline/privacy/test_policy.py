"""The privacy policy: the kinds it names, cards and SSNs always, and nothing unknown."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.privacy.policy import ALWAYS_REDACTED, Kind, PrivacyPolicy


def test_cards_and_ssns_are_redacted_whatever_the_policy_says() -> None:
    """An empty policy, or one naming only e-mail, still redacts cards and SSNs."""
    assert PrivacyPolicy().kinds == {Kind.CARD, Kind.SSN}
    assert PrivacyPolicy.model_validate({"redact": ["email"]}).kinds == {Kind.CARD, Kind.SSN, Kind.EMAIL}
    assert PrivacyPolicy.model_validate({"redact": []}).kinds >= ALWAYS_REDACTED


def test_every_kind_can_be_named() -> None:
    """The five kinds, by their names, are all accepted."""
    policy = PrivacyPolicy.model_validate({"redact": ["card", "ssn", "email", "phone", "iban"]})
    assert policy.kinds == frozenset(Kind)


@pytest.mark.parametrize(
    "body",
    [
        {"redact": ["e-mail"]},
        {"redact": ["CARD"]},
        {"redact": "card"},
        {"redact": [1]},
        {"redact": ["card"], "redacted": ["email"]},
    ],
)
def test_an_unknown_kind_or_field_is_refused(body: object) -> None:
    """A misspelt kind or field is a validation error, never a value silently left clear."""
    with pytest.raises(ValidationError):
        PrivacyPolicy.model_validate(body)


def test_a_policy_is_frozen() -> None:
    """A policy cannot be changed once made."""
    policy = PrivacyPolicy()
    with pytest.raises(ValidationError):
        policy.redact = (Kind.EMAIL,)  # type: ignore[misc]
