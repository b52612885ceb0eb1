"""Whether a contact is dialled again, and when: by the rule of the outcome that ended its last
attempt, never past that rule's attempts; and with the window and the expiry, when exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.outbound.outcomes import ALWAYS_FINAL, RETRYABLE, Outcome
from pipeline.outbound.retry import Final, Retry, RetryPolicy, RetryRule, after_attempt
from pipeline.outbound.schedule import Dial, activity, first_dial, next_dial
from pipeline.outbound.window import Window, is_open

NOW = datetime(2024, 6, 4, 14, 0, tzinfo=UTC)
POLICY = RetryPolicy.model_validate(
    {"no_answer": {"attempts": 3, "after_s": 1_800}, "busy": {"attempts": 2, "after_s": 300}}
)


def test_the_default_policy_dials_each_contact_once() -> None:
    """With no rules given, every outcome is final after the first attempt."""
    for outcome in Outcome:
        assert after_attempt(RetryPolicy(), outcome, 1, NOW) == Final(outcome)


def test_a_retryable_outcome_is_retried_after_its_wait_until_its_attempts_are_made() -> None:
    """No answer with three attempts: dialled again 30 minutes later twice, then final."""
    assert after_attempt(POLICY, Outcome.NO_ANSWER, 1, NOW) == Retry(NOW + timedelta(minutes=30))
    assert after_attempt(POLICY, Outcome.NO_ANSWER, 2, NOW) == Retry(NOW + timedelta(minutes=30))
    assert after_attempt(POLICY, Outcome.NO_ANSWER, 3, NOW) == Final(Outcome.NO_ANSWER)


@pytest.mark.parametrize("outcome", sorted(ALWAYS_FINAL))
def test_completed_cancelled_suppressed_and_expired_are_always_final(outcome: Outcome) -> None:
    """However generous the policy, these end the contact."""
    generous = RetryPolicy.model_validate({name: {"attempts": 10} for name in RETRYABLE})
    assert after_attempt(generous, outcome, 1, NOW) == Final(outcome)


def test_attempts_made_counts_from_one() -> None:
    """After an attempt at least one was made."""
    with pytest.raises(ValueError, match="at least 1"):
        after_attempt(POLICY, Outcome.BUSY, 0, NOW)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"attempts": 0}, "greater than or equal to 1"),
        ({"attempts": 11}, "less than or equal to 10"),
        ({"after_s": 59}, "greater than or equal to 60"),
        ({"after_s": 86_401}, "less than or equal to 86400"),
        ({"attempts": "3"}, "valid integer"),
        ({"attempts": True}, "valid integer"),
        ({"tries": 3}, "Extra inputs"),
    ],
)
def test_a_rule_out_of_bounds_is_refused(rule: dict[str, object], message: str) -> None:
    """Attempts 1..10, a wait of 60 s to a day, whole numbers only, nothing else."""
    with pytest.raises(ValidationError, match=message):
        RetryPolicy.model_validate({"busy": rule})


def test_a_policy_for_an_outcome_that_is_never_retried_is_refused() -> None:
    """A rule for `completed` is a mistake, not a no-op."""
    with pytest.raises(ValidationError, match="Extra inputs"):
        RetryPolicy.model_validate({"completed": {"attempts": 2}})


RULES = st.builds(RetryRule, attempts=st.integers(1, 10), after_s=st.integers(60, 86_400))
POLICIES = st.builds(RetryPolicy, no_answer=RULES, busy=RULES, failed=RULES, voicemail=RULES)
OUTCOMES = st.sampled_from(sorted(Outcome))


@settings(max_examples=300)
@given(POLICIES, st.lists(OUTCOMES, min_size=1, max_size=60))
def test_a_contact_is_never_dialled_past_the_rule_of_its_last_outcome(
    policy: RetryPolicy, outcomes: list[Outcome]
) -> None:
    """Playing any run of outcomes: a contact is dialled again only while its attempts are fewer
    than the rule of the outcome that ended the last one, so it ends within the largest rule's
    attempts, and when every attempt ends alike, after exactly that rule's attempts (or at once
    for an outcome that is always final)."""
    made = 0
    now = NOW
    for outcome in outcomes:
        made += 1
        decided = after_attempt(policy, outcome, made, now)
        rule = policy.rule_for(outcome)
        if isinstance(decided, Retry):
            assert rule is not None
            assert made < rule.attempts
            assert decided.at == now + timedelta(seconds=rule.after_s)
            now = decided.at
            continue
        assert decided == Final(outcome)
        assert rule is None or made >= rule.attempts
        break
    assert made <= max(
        rule.attempts for rule in (policy.no_answer, policy.busy, policy.failed, policy.voicemail)
    )
    alike = outcomes[0]
    alike_rule = policy.rule_for(alike)
    expected = 1 if alike_rule is None else alike_rule.attempts
    played = 1
    while isinstance(after_attempt(policy, alike, played, NOW), Retry):
        played += 1
    assert played == expected


# ── with the window and the expiry ─────────────────────────────────────────────────────

WEEKDAYS_9_TO_5 = Window.model_validate(
    {
        "timezone": "America/New_York",
        "days": ["mon", "tue", "wed", "thu", "fri"],
        "start": "09:00",
        "end": "17:00",
    }
)


def test_a_contact_is_first_dialled_when_its_window_opens() -> None:
    """At 08:00 in New York the first dial waits for 09:00."""
    early = datetime(2024, 6, 4, 12, 0, tzinfo=UTC)
    assert first_dial(WEEKDAYS_9_TO_5, None, early) == Dial(datetime(2024, 6, 4, 13, 0, tzinfo=UTC))


def test_a_suppressed_or_expired_contact_is_never_dialled() -> None:
    """Suppressed first; a window that opens only at or after the expiry expires the contact."""
    early = datetime(2024, 6, 4, 12, 0, tzinfo=UTC)
    assert first_dial(None, None, early, is_suppressed=True) == Final(Outcome.SUPPRESSED)
    expiry = datetime(2024, 6, 4, 13, 0, tzinfo=UTC)
    assert first_dial(WEEKDAYS_9_TO_5, None, early, expires_at=expiry) == Final(Outcome.EXPIRED)


def test_a_retry_waits_for_the_window_and_not_past_the_expiry() -> None:
    """A retry due at 17:10 waits for the next morning; one that would be after expiry leaves the
    last outcome final."""
    late = datetime(2024, 6, 4, 20, 40, tzinfo=UTC)  # 16:40 in New York
    assert next_dial(POLICY, Outcome.NO_ANSWER, 1, WEEKDAYS_9_TO_5, None, late) == Dial(
        datetime(2024, 6, 5, 13, 0, tzinfo=UTC)
    )
    expiry = datetime(2024, 6, 5, 0, 0, tzinfo=UTC)
    decided = next_dial(POLICY, Outcome.NO_ANSWER, 1, WEEKDAYS_9_TO_5, None, late, expires_at=expiry)
    assert decided == Final(Outcome.NO_ANSWER)
    assert next_dial(POLICY, Outcome.BUSY, 1, None, None, late, is_suppressed=True) == Final(Outcome.BUSY)


@settings(max_examples=200, deadline=None)
@given(
    POLICIES,
    OUTCOMES,
    st.integers(1, 10),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)),
    st.none() | st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=10)),
)
def test_a_dial_is_inside_the_window_and_before_the_expiry(
    policy: RetryPolicy, outcome: Outcome, made: int, now: datetime, lasting: timedelta | None
) -> None:
    """Every dial decided is at or after now, in the window, and before the campaign expires."""
    expiry = None if lasting is None else now + lasting
    for decided in (
        first_dial(WEEKDAYS_9_TO_5, "Europe/Paris", now, expires_at=expiry),
        next_dial(policy, outcome, made, WEEKDAYS_9_TO_5, "Europe/Paris", now, expires_at=expiry),
    ):
        if isinstance(decided, Dial):
            assert decided.at >= now
            assert is_open(WEEKDAYS_9_TO_5, "Europe/Paris", decided.at)
            assert expiry is None or decided.at < expiry


def test_a_campaign_outside_its_window_says_it_waits_for_it_not_that_it_runs() -> None:
    """At 08:00 in New York, its first contact due at the 09:00 opening: waiting for its window."""
    early = datetime(2024, 6, 4, 12, 0, tzinfo=UTC)
    opening = datetime(2024, 6, 4, 13, 0, tzinfo=UTC)
    assert activity("running", 0, opening, WEEKDAYS_9_TO_5, None, early) == "waiting for its window"
    assert activity("scheduled", 0, opening, WEEKDAYS_9_TO_5, None, early) == "waiting for its window"


def test_a_campaign_says_what_it_is_doing_when_its_window_is_open() -> None:
    """A call up, a contact due, or a retry later in the open window; nothing beside a status
    that says it all."""
    assert activity("running", 2, NOW, WEEKDAYS_9_TO_5, None, NOW) == "calling"
    assert activity("running", 0, NOW - timedelta(seconds=1), WEEKDAYS_9_TO_5, None, NOW) == "dialing"
    retry = NOW + timedelta(minutes=30)
    assert activity("running", 0, retry, WEEKDAYS_9_TO_5, None, NOW) == "waiting to retry"
    assert activity("running", 0, retry, None, None, NOW) == "waiting to retry"
    assert activity("paused", 0, retry, WEEKDAYS_9_TO_5, None, NOW) is None
    assert activity("completed", 0, None, None, None, NOW) is None
