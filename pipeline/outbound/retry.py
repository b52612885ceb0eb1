"""Whether a contact is dialled again after an attempt, and when.

A campaign's `RetryPolicy` gives each outcome that may be retried (`no_answer`, `busy`,
`failed`, `voicemail`) a rule: at most `attempts` attempts in all, the next one `after_s`
seconds after the last ended. `attempts` counts every attempt of the contact, whatever each
ended in: "no_answer: 3" is "dial at most three times while nobody answers". So a contact is
dialled again only while the attempts made are fewer than the rule of the outcome that ended
the last one. A policy's default is one attempt for each: nothing is retried unless asked.

`completed`, `cancelled`, `suppressed` and `expired` are always final.

The retry's time is the earliest it may be dialled; the calling window and the campaign's
expiry are applied to it after (`pipeline.outbound.schedule`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from pipeline.outbound.outcomes import ALWAYS_FINAL, Outcome

# More than ten attempts at one contact is pestering, not a campaign.
MAXIMUM_ATTEMPTS = 10
# A retry sooner than a minute reaches the same busy line or the same unanswered phone.
MINIMUM_RETRY_AFTER_S = 60
# A day: a retry further out is a new campaign.
MAXIMUM_RETRY_AFTER_S = 86_400
# When a rule gives attempts but no wait: an hour, long enough for a busy person to be free.
DEFAULT_RETRY_AFTER_S = 3_600


class RetryRule(BaseModel):
    """How often a contact is dialled in all while its attempts end in one outcome, and how
    long after the last it is dialled again."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    attempts: int = Field(default=1, ge=1, le=MAXIMUM_ATTEMPTS)
    after_s: int = Field(default=DEFAULT_RETRY_AFTER_S, ge=MINIMUM_RETRY_AFTER_S, le=MAXIMUM_RETRY_AFTER_S)


class RetryPolicy(BaseModel):
    """A campaign's retry rule for each outcome that may be retried (one attempt by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    no_answer: RetryRule = RetryRule()
    busy: RetryRule = RetryRule()
    failed: RetryRule = RetryRule()
    voicemail: RetryRule = RetryRule()

    def rule_for(self, outcome: Outcome) -> RetryRule | None:
        """The rule for an outcome that may be retried; None for one that is always final."""
        rules = {
            Outcome.NO_ANSWER: self.no_answer,
            Outcome.BUSY: self.busy,
            Outcome.FAILED: self.failed,
            Outcome.VOICEMAIL: self.voicemail,
        }
        return rules.get(outcome)


@dataclass(frozen=True, slots=True)
class Retry:
    """The contact is dialled again, no sooner than `at`."""

    at: datetime


@dataclass(frozen=True, slots=True)
class Final:
    """The contact is done: this is its outcome."""

    outcome: Outcome


def after_attempt(policy: RetryPolicy, outcome: Outcome, attempts_made: int, now: datetime) -> Retry | Final:
    """After a contact's attempt number `attempts_made` (≥ 1) ended in `outcome` at `now`:
    dial it again (when), or its final outcome."""
    if attempts_made < 1:
        raise ValueError(f"attempts_made is {attempts_made}: an attempt has ended, so at least 1")
    rule = policy.rule_for(outcome)
    if outcome in ALWAYS_FINAL or rule is None or attempts_made >= rule.attempts:
        return Final(outcome)
    return Retry(now + timedelta(seconds=rule.after_s))
