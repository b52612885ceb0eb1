"""Idempotency keys in PostgreSQL: of concurrent claims one acts; an answer is kept and
replayed; a stale claim is taken over and its old holder's answer is not kept; keys are their
sender's; a day later they are swept."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from models import idempotency
from models.idempotency import StoredAnswer
from pipeline.api.idempotency import KEPT_S, STALE_CLAIM_S, Verdict, fingerprint, fingerprint_key

NOW = 1_800_000_000.0
KEY = fingerprint_key(b"the deployment's secret")
PRINT = fingerprint("POST", "/v1/sessions", b'{"instructions": "Hi"}', KEY)
ANSWER = StoredAnswer(201, [("content-type", "application/json")], b'{"session_id": "sess_1"}')


def _namespace() -> str:
    return f"idem-{uuid.uuid4().hex[:8]}"


def _claim(namespace: str, key: str, now: float = NOW, owner: str = "key_a", print_: str = PRINT) -> Any:
    claim_id = uuid.uuid4().hex
    return claim_id, idempotency.claim(namespace, owner, key, print_, claim_id, now)


def test_of_twenty_concurrent_claims_one_proceeds(database: Any) -> None:
    """Twenty requests with one key at once: exactly one may act, the rest see it running."""
    namespace = _namespace()
    with ThreadPoolExecutor(20) as pool:
        verdicts = list(pool.map(lambda _: _claim(namespace, "k")[1].verdict, range(20)))
    assert verdicts.count(Verdict.PROCEED) == 1
    assert verdicts.count(Verdict.IN_PROGRESS) == 19


def test_an_answer_kept_is_replayed_and_another_body_is_refused(database: Any) -> None:
    """After its answer is stored, the same request gets it back; another body under the key is
    refused."""
    namespace = _namespace()
    claim_id, first = _claim(namespace, "k")
    assert first.verdict is Verdict.PROCEED
    assert idempotency.finish(namespace, "key_a", "k", claim_id, ANSWER)
    again = _claim(namespace, "k", NOW + 5)[1]
    assert (again.verdict, again.answer) == (Verdict.REPLAY, ANSWER)
    other = fingerprint("POST", "/v1/sessions", b"{}", KEY)
    assert _claim(namespace, "k", NOW + 5, print_=other)[1].verdict is Verdict.REUSED


def test_a_key_belongs_to_the_api_key_that_sent_it(database: Any) -> None:
    """Another API key's same Idempotency-Key is its own."""
    namespace = _namespace()
    assert _claim(namespace, "k", owner="key_a")[1].verdict is Verdict.PROCEED
    assert _claim(namespace, "k", owner="key_b")[1].verdict is Verdict.PROCEED
    assert _claim(_namespace(), "k", owner="key_a")[1].verdict is Verdict.PROCEED


def test_a_stale_claim_is_taken_over_and_its_late_answer_is_not_kept(database: Any) -> None:
    """A claim left running by a dead gateway is taken over once stale; should its request
    answer after all, the new holder's answer is the one kept."""
    namespace = _namespace()
    dead_claim, _ = _claim(namespace, "k")
    assert _claim(namespace, "k", NOW + STALE_CLAIM_S - 1)[1].verdict is Verdict.IN_PROGRESS
    new_claim, taken = _claim(namespace, "k", NOW + STALE_CLAIM_S)
    assert taken.verdict is Verdict.PROCEED
    assert idempotency.stored(namespace, "key_a", "k")["claim"] == new_claim
    assert not idempotency.finish(namespace, "key_a", "k", dead_claim, StoredAnswer(503, [], b"late"))
    assert idempotency.finish(namespace, "key_a", "k", new_claim, ANSWER)
    assert _claim(namespace, "k", NOW + STALE_CLAIM_S + 1)[1].answer == ANSWER


def test_a_released_claim_frees_the_key(database: Any) -> None:
    """A request that failed before acting lets go of its key: the next one acts."""
    namespace = _namespace()
    claim_id, _ = _claim(namespace, "k")
    idempotency.release(namespace, "key_a", "k", claim_id)
    assert idempotency.stored(namespace, "key_a", "k")["state"] == "released"
    assert _claim(namespace, "k")[1].verdict is Verdict.PROCEED


def test_a_claim_made_after_its_release_keeps_nothing(database: Any) -> None:
    """Its gateway gave up on the claim and let it go before a worker took the claim's message:
    the late claim finds its own release and leaves the key free for the retry."""
    namespace = _namespace()
    late = uuid.uuid4().hex
    idempotency.release(namespace, "key_a", "k", late)
    assert idempotency.claim(namespace, "key_a", "k", PRINT, late, NOW).verdict is Verdict.IN_PROGRESS
    assert idempotency.stored(namespace, "key_a", "k")["state"] == "released"
    assert _claim(namespace, "k")[1].verdict is Verdict.PROCEED
    assert idempotency.stored(namespace, "key_a", "k")["state"] == "running"


def test_a_release_of_another_claim_leaves_the_key_held(database: Any) -> None:
    """A late release of a claim taken over since does not free the new holder's key."""
    namespace = _namespace()
    _claim(namespace, "k")
    idempotency.release(namespace, "key_a", "k", uuid.uuid4().hex)
    assert idempotency.stored(namespace, "key_a", "k")["state"] == "running"


def test_keys_past_their_day_are_swept_and_then_new(database: Any) -> None:
    """The sweep deletes keys claimed a day ago, not younger ones; a swept key acts again."""
    namespace = _namespace()
    old_claim, _ = _claim(namespace, "old", NOW - KEPT_S)
    idempotency.finish(namespace, "key_a", "old", old_claim, ANSWER)
    _claim(namespace, "young", NOW - KEPT_S + 60)
    assert idempotency.sweep_expired(NOW) >= 1
    assert idempotency.stored(namespace, "key_a", "old") is None
    assert idempotency.stored(namespace, "key_a", "young") is not None
    assert _claim(namespace, "old")[1].verdict is Verdict.PROCEED


def test_an_expired_key_not_yet_swept_acts_again(database: Any) -> None:
    """A key past its day that the sweep has not reached is taken over, another body or not."""
    namespace = _namespace()
    claim_id, _ = _claim(namespace, "k", NOW - KEPT_S)
    idempotency.finish(namespace, "key_a", "k", claim_id, ANSWER)
    other = fingerprint("POST", "/v1/calls", b"{}", KEY)
    assert _claim(namespace, "k", print_=other)[1].verdict is Verdict.PROCEED
    assert idempotency.stored(namespace, "key_a", "k")["state"] == "running"
