"""What a session's privacy policy asks to be redacted.

`privacy: {"redact": ["email", "phone"]}` on a session (or a route's session) names the kinds
to redact; card numbers and SSNs are redacted whatever it says, because no policy may make
Switchboard keep them readable (PCI DSS requirement 3.5: a card number is unreadable wherever
it is stored; an SSN is the key to a US identity). The gateway's boundary
(`pipeline.privacy.boundary`) redacts what it names before anything is kept.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pipeline.privacy.detect import Kind

ALWAYS_REDACTED = frozenset({Kind.CARD, Kind.SSN})


class PrivacyPolicy(BaseModel):
    """The kinds a session asks to redact (`redact`) and what is redacted (`kinds`)."""

    # Outbound-style strictness: a misspelt field ("redacted") or kind ("e-mail") is refused
    # (422 at the API) rather than silently leaving a value in the clear.
    model_config = ConfigDict(frozen=True, extra="forbid")

    redact: tuple[Kind, ...] = ()
    # Days after the call ended that its content is erased by the retention sweep (None: the
    # deployment's SWITCHBOARD_RETENTION_DAYS, or kept until erased on request).
    retention_days: int | None = Field(default=None, ge=1, le=3650)

    @property
    def kinds(self) -> frozenset[Kind]:
        """What is redacted: the kinds asked for, and cards and SSNs always."""
        return ALWAYS_REDACTED | frozenset(self.redact)
