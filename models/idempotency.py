"""Idempotency keys in PostgreSQL: a key claimed by the request that acts, its answer stored,
and the rows past their day swept. What a request does with what it finds is decided in
`pipeline.api.idempotency`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from models.db import database
from pipeline.api.idempotency import KEPT_S, ClaimState, StoredClaim, Verdict, verdict


@dataclass(frozen=True)
class StoredAnswer:
    """An answer kept under a key: its status, headers (name, value) and body bytes."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


@dataclass(frozen=True)
class Claimed:
    """What claiming a key decided, and the stored answer when it is a replay."""

    verdict: Verdict
    answer: StoredAnswer | None = None


def claim(namespace: str, owner: str, key: str, fingerprint: str, claim_id: str, now: float) -> Claimed:
    """Claim `key` for a request (`claim_id`) at `now`, or say why not. Of concurrent claims
    one inserts the row; the others wait on its row lock and find it."""
    with database.atomic():
        inserted = database.execute_sql(
            "INSERT INTO idempotency_keys (namespace, owner, key, fingerprint, claim, state, created_at)"
            " VALUES (%s, %s, %s, %s, %s, 'running', to_timestamp(%s)) ON CONFLICT DO NOTHING RETURNING 1",
            (namespace, owner, key, fingerprint, claim_id, now),
        ).fetchone()
        if inserted is not None:
            return Claimed(Verdict.PROCEED)
        row = database.execute_sql(
            "SELECT fingerprint, state, extract(epoch FROM created_at), status, headers, body, claim"
            " FROM idempotency_keys WHERE namespace = %s AND owner = %s AND key = %s FOR UPDATE",
            (namespace, owner, key),
        ).fetchone()
        stored = None if row is None else StoredClaim(row[0], ClaimState(row[1]), float(row[2]))
        if stored is not None and stored.state is ClaimState.RELEASED and row[6] == claim_id:
            # This claim's gateway gave up on it and let it go before the claim was made: nobody
            # waits for this answer, and the key stays free.
            return Claimed(Verdict.IN_PROGRESS)
        decided = verdict(stored, fingerprint, now)
        if decided is Verdict.PROCEED:
            # Expired or stale (or swept between the two statements): this request takes it over.
            database.execute_sql(
                "INSERT INTO idempotency_keys (namespace, owner, key, fingerprint, claim, state, created_at)"
                " VALUES (%s, %s, %s, %s, %s, 'running', to_timestamp(%s))"
                " ON CONFLICT (namespace, owner, key) DO UPDATE SET fingerprint = excluded.fingerprint,"
                " claim = excluded.claim, state = 'running', status = NULL, headers = NULL, body = NULL,"
                " created_at = excluded.created_at",
                (namespace, owner, key, fingerprint, claim_id, now),
            )
            return Claimed(Verdict.PROCEED)
        if decided is Verdict.REPLAY and row is not None:
            headers = [(str(name), str(value)) for name, value in row[4] or []]
            return Claimed(decided, StoredAnswer(int(row[3]), headers, bytes(row[5] or b"")))
        return Claimed(decided)


def finish(namespace: str, owner: str, key: str, claim_id: str, answer: StoredAnswer) -> bool:
    """Store the answer of the request holding the claim; False when the claim was taken over
    (the request outlived STALE_CLAIM_S) and its answer is not the one kept."""
    cursor = database.execute_sql(
        "UPDATE idempotency_keys SET state = 'done', status = %s, headers = %s, body = %s"
        " WHERE namespace = %s AND owner = %s AND key = %s AND claim = %s AND state = 'running'",
        (answer.status, json.dumps(answer.headers), answer.body, namespace, owner, key, claim_id),
    )
    return bool(cursor.rowcount)


def release(namespace: str, owner: str, key: str, claim_id: str) -> None:
    """Let go of a claim whose request did nothing (it failed before acting, or its claim's
    answer was lost): the key is free. A release that finds no row leaves one, `released` under
    the claim's id, so the claim it lets go, made late (its message still queued, or its write
    waiting on a lock), finds it and keeps nothing; a claim being written is waited for."""
    database.execute_sql(
        "INSERT INTO idempotency_keys (namespace, owner, key, fingerprint, claim, state, created_at)"
        " VALUES (%s, %s, %s, '', %s, 'released', now())"
        " ON CONFLICT (namespace, owner, key) DO UPDATE SET state = 'released'"
        " WHERE idempotency_keys.claim = excluded.claim AND idempotency_keys.state = 'running'",
        (namespace, owner, key, claim_id),
    )


def sweep_expired(now: float) -> int:
    """Delete the keys claimed more than KEPT_S before `now`, of every namespace; how many."""
    cursor = database.execute_sql(
        "DELETE FROM idempotency_keys WHERE created_at <= to_timestamp(%s)", (now - KEPT_S,)
    )
    return int(cursor.rowcount)


def stored(namespace: str, owner: str, key: str) -> dict[str, Any] | None:
    """A key's row as it is (for tests and operators)."""
    row = database.execute_sql(
        "SELECT fingerprint, claim, state, status, extract(epoch FROM created_at)"
        " FROM idempotency_keys WHERE namespace = %s AND owner = %s AND key = %s",
        (namespace, owner, key),
    ).fetchone()
    if row is None:
        return None
    return {
        "fingerprint": row[0],
        "claim": row[1],
        "state": row[2],
        "status": row[3],
        "claimed_at": float(row[4]),
    }
