"""Idempotency-Key: what a POST carrying one does, given what is stored under it.

The first request with a key claims it (a row in state `running`), acts, and stores its answer
(state `done`) for KEPT_S. A request with the same key then gets, without acting:

- the same fingerprint (method, path and body), answered: the stored answer again (REPLAY);
- the same fingerprint, still running: 409 `request_in_progress` (IN_PROGRESS);
- another fingerprint: 422 `idempotency_key_reused` (REUSED), whatever the first's state.

A claim is taken over (PROCEED) when its answer is past KEPT_S, or when it has been running for
longer than any request can (STALE_CLAIM_S): the gateway that held it died half-way, and no
answer will ever come. A key belongs to the API key that sent it (the store keys it by owner),
so two apps choosing the same key never meet.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from enum import StrEnum

from pipeline.call.errors import MalformedIdempotencyKey
from pipeline.call.limits import API_REPLY_TIMEOUT_MS, COMPACTION_REPLY_TIMEOUT_MS

# An answer is replayed for a day (as Stripe's are): a client retries within minutes, not days.
KEPT_S = 24 * 3600
# The longest a request can run: a forced compaction waits 70 s for its worker, and `connect`
# (the longest chain) asks a worker twice and the provider once, each bounded by the reply
# timeout. A claim still running after this lost its gateway and is taken over.
STALE_CLAIM_S = (COMPACTION_REPLY_TIMEOUT_MS + 3 * API_REPLY_TIMEOUT_MS) / 1000
MAXIMUM_KEY_CHARS = 255
HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


class ClaimState(StrEnum):
    """A stored key is `running` (claimed, its request acting), `done` (its answer stored) or
    `released` (let go by a request that did nothing: free for the next)."""

    RUNNING = "running"
    DONE = "done"
    RELEASED = "released"


class Verdict(StrEnum):
    """What a request does with its key: PROCEED (act, holding the claim), REPLAY (answer the
    stored answer), REUSED (422: the key was used for another request), IN_PROGRESS (409)."""

    PROCEED = "proceed"
    REPLAY = "replay"
    REUSED = "reused"
    IN_PROGRESS = "in_progress"


@dataclass(frozen=True)
class StoredClaim:
    """What is stored under a key: the fingerprint of the request that claimed it, its state,
    and when it was claimed (epoch seconds)."""

    fingerprint: str
    state: ClaimState
    claimed_at: float


def checked_key(text: str) -> str:
    """The key as sent, if it is 1 to 255 printable ASCII characters (space to tilde)."""
    if not 1 <= len(text) <= MAXIMUM_KEY_CHARS or not all(" " <= c <= "~" for c in text):
        raise MalformedIdempotencyKey(
            f"{HEADER} must be 1 to {MAXIMUM_KEY_CHARS} printable ASCII characters"
            f" (got {len(text)} characters)"
        )
    return text


def fingerprint_key(deployment_secret: bytes, namespace: str = "") -> bytes:
    """The key a deployment's fingerprints and derived ids are made with, from a secret all its
    gateways share (a retry may reach any of them) and its namespace (two deployments on the
    development token are still two), used for nothing else."""
    label = b"switchboard idempotency\0" + namespace.encode()
    return hmac.new(deployment_secret, label, hashlib.sha256).digest()


def request_seed(key: bytes, owner: str, idempotency_key: str) -> str:
    """What the ids a keyed create makes derive from: the same for a retry of the request, so
    the retry finds what an earlier run made (insert-if-absent), and no other sender's key can
    name the same ids."""
    seed = hmac.new(key, digestmod=hashlib.sha256)
    for part in (b"request ids", owner.encode(), idempotency_key.encode()):
        seed.update(len(part).to_bytes(8, "big"))
        seed.update(part)
    return seed.hexdigest()


def derived_id(seed: str, kind: str) -> str:
    """The id of a `kind` ("sess", "call", "camp") a keyed create makes: `kind_` and 32 hex."""
    return f"{kind}_{hashlib.sha256(f'{seed}:{kind}'.encode()).hexdigest()[:32]}"


def fingerprint(method: str, target: str, body: bytes, key: bytes) -> str:
    """The HMAC-SHA256 of a request as an Idempotency-Key binds it: its method, path with query,
    and body bytes. Keyed, because a body may carry a secret (a trunk's password): an unkeyed
    digest stored for a day gave a common password back to whoever read the table, by trying
    guesses against it; without the deployment's key no guess can be checked."""
    digest = hmac.new(key, digestmod=hashlib.sha256)
    for part in (method.upper().encode(), target.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def is_expired(claimed_at: float, now: float) -> bool:
    return now - claimed_at >= KEPT_S


def verdict(stored: StoredClaim | None, request_fingerprint: str, now: float) -> Verdict:
    """What a request with this fingerprint does, finding `stored` under its key at `now`."""
    if stored is None or stored.state is ClaimState.RELEASED or is_expired(stored.claimed_at, now):
        return Verdict.PROCEED
    if stored.fingerprint != request_fingerprint:
        return Verdict.REUSED
    if stored.state is ClaimState.DONE:
        return Verdict.REPLAY
    if now - stored.claimed_at >= STALE_CLAIM_S:
        return Verdict.PROCEED
    return Verdict.IN_PROGRESS
