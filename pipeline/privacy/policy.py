"""What a session's privacy policy asks to be redacted.

`privacy: {"redact": ["email", "phone"]}` on a session (or a route's session) names the kinds
to redact; card numbers and SSNs are redacted whatever it says, because no policy may make
Switchboard keep them readable (PCI DSS requirement 3.5: a card number is unreadable wherever
it is stored; an SSN is the key to a US identity). The gateway's boundary
(`pipeline.privacy.boundary`) redacts what it names before anything is kept.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Kind(StrEnum):
    """The kinds of sensitive value: card, ssn, email, phone, iban (`pipeline.privacy.detect`
    finds each)."""

    CARD = "card"
    SSN = "ssn"
    EMAIL = "email"
    PHONE = "phone"
    IBAN = "iban"


ALWAYS_REDACTED = frozenset({Kind.CARD, Kind.SSN})

# What a session keeps of a call: everything (masked), or only its metadata (timings, outcomes,
# end reason, usage, cost) once the call is over.
Storage = Literal["full", "metadata"]

# A recording notice is said like a greeting's words: as long as typed text may be.
MAXIMUM_CONSENT_CHARS = 2_000


class Consent(BaseModel):
    """The notice said before the greeting (`say`), and the keypad key with which a caller
    declines (`decline_key`; the model's built-in `decline_recording` tool declines too)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    say: str = Field(min_length=1, max_length=MAXIMUM_CONSENT_CHARS)
    decline_key: Literal["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "*", "#"] | None = None


class PrivacyPolicy(BaseModel):
    """The kinds a session asks to redact (`redact`) and what is redacted (`kinds`)."""

    # Outbound-style strictness: a misspelt field ("redacted") or kind ("e-mail") is refused
    # (422 at the API) rather than silently leaving a value in the clear.
    model_config = ConfigDict(frozen=True, extra="forbid")

    redact: tuple[Kind, ...] = ()
    consent: Consent | None = None
    # Days after the call ended that its content is erased by the retention sweep (None: the
    # deployment's SWITCHBOARD_RETENTION_DAYS, or kept until erased on request).
    retention_days: int | None = Field(default=None, ge=1, le=3650)

    @property
    def kinds(self) -> frozenset[Kind]:
        """What is redacted: the kinds asked for, and cards and SSNs always."""
        return ALWAYS_REDACTED | frozenset(self.redact)
