"""What a request carrying an Idempotency-Key does with what is stored under it."""

from __future__ import annotations

import hashlib

import pytest

from pipeline.api.idempotency import (
    KEPT_S,
    MAXIMUM_KEY_CHARS,
    STALE_CLAIM_S,
    ClaimState,
    StoredClaim,
    Verdict,
    checked_key,
    fingerprint,
    fingerprint_key,
    verdict,
)
from pipeline.call.errors import MalformedIdempotencyKey
from pipeline.call.limits import COMPACTION_REPLY_TIMEOUT_MS

KEY = fingerprint_key(b"the deployment's secret")
NOW = 1_800_000_000.0
BODY = fingerprint("POST", "/v1/sessions", b'{"instructions": "Hi"}', KEY)


def _stored(state: ClaimState, age_s: float, print_: str = BODY) -> StoredClaim:
    return StoredClaim(fingerprint=print_, state=state, claimed_at=NOW - age_s)


def test_a_key_never_seen_is_claimed() -> None:
    """The first request with a key acts."""
    assert verdict(None, BODY, NOW) is Verdict.PROCEED


def test_the_same_request_answered_is_replayed() -> None:
    """The same method, path and body after the answer: the stored answer again."""
    assert verdict(_stored(ClaimState.DONE, 60), BODY, NOW) is Verdict.REPLAY


def test_the_same_request_still_running_is_in_progress() -> None:
    """A duplicate while the first still runs is told so, and does not act."""
    assert verdict(_stored(ClaimState.RUNNING, 1), BODY, NOW) is Verdict.IN_PROGRESS


def test_another_request_under_the_key_is_refused_whatever_the_first_state() -> None:
    """Another body (or path) under a key is the client's mistake, running or answered."""
    other = fingerprint("POST", "/v1/sessions", b'{"instructions": "Bye"}', KEY)
    assert verdict(_stored(ClaimState.DONE, 60), other, NOW) is Verdict.REUSED
    assert verdict(_stored(ClaimState.RUNNING, 1), other, NOW) is Verdict.REUSED


def test_a_claim_running_past_any_request_timeout_is_taken_over() -> None:
    """A claim whose gateway died half-way stays running; past STALE_CLAIM_S it is taken over."""
    assert STALE_CLAIM_S > COMPACTION_REPLY_TIMEOUT_MS / 1000
    assert verdict(_stored(ClaimState.RUNNING, STALE_CLAIM_S - 1), BODY, NOW) is Verdict.IN_PROGRESS
    assert verdict(_stored(ClaimState.RUNNING, STALE_CLAIM_S), BODY, NOW) is Verdict.PROCEED


def test_a_key_past_its_day_is_new_again() -> None:
    """After KEPT_S the stored answer is gone: any request under the key acts."""
    other = fingerprint("POST", "/v1/calls", b"{}", KEY)
    assert verdict(_stored(ClaimState.DONE, KEPT_S), other, NOW) is Verdict.PROCEED
    assert verdict(_stored(ClaimState.DONE, KEPT_S - 1), BODY, NOW) is Verdict.REPLAY


def test_the_fingerprint_binds_method_path_and_body() -> None:
    """Each of method, path (with its query) and body changes the fingerprint; parts cannot slide."""
    prints = {
        fingerprint("POST", "/v1/sessions", b"{}", KEY),
        fingerprint("PUT", "/v1/sessions", b"{}", KEY),
        fingerprint("POST", "/v1/sessions?x=1", b"{}", KEY),
        fingerprint("POST", "/v1/sessions", b"{ }", KEY),
        fingerprint("POST", "/v1/session", b"s{}", KEY),
    }
    assert len(prints) == 5
    assert fingerprint("post", "/v1/sessions", b"{}", KEY) == fingerprint("POST", "/v1/sessions", b"{}", KEY)


def test_a_fingerprint_cannot_be_checked_against_a_guess_without_the_deployments_key() -> None:
    """A trunk's body carries its password: what is stored for a day is keyed, so reading the
    table and hashing guessed bodies finds nothing; another deployment's key finds nothing."""
    body = b'{"name": "main", "password": "summer2026"}'
    stored = fingerprint("POST", "/v1/trunks", body, KEY)
    unkeyed = hashlib.sha256()
    for part in (b"POST", b"/v1/trunks", body):
        unkeyed.update(len(part).to_bytes(8, "big"))
        unkeyed.update(part)
    assert stored != unkeyed.hexdigest()
    assert stored != fingerprint("POST", "/v1/trunks", body, fingerprint_key(b"another deployment"))
    assert stored == fingerprint("POST", "/v1/trunks", body, fingerprint_key(b"the deployment's secret"))


@pytest.mark.parametrize("key", ["a", "order-42:retry", " ~!", "x" * MAXIMUM_KEY_CHARS])
def test_a_key_of_printable_ascii_up_to_255_characters_is_taken(key: str) -> None:
    """Any printable ASCII, space to tilde, 1 to 255 characters."""
    assert checked_key(key) == key


@pytest.mark.parametrize("key", ["", "x" * (MAXIMUM_KEY_CHARS + 1), "tab\there", "é", "nul\x00"])
def test_a_key_too_long_empty_or_unprintable_is_refused(key: str) -> None:
    """Anything else is refused as malformed (a 422)."""
    with pytest.raises(MalformedIdempotencyKey) as refused:
        checked_key(key)
    assert refused.value.code == "malformed_idempotency_key"
