"""Each session's data key pair in PostgreSQL (`session_data_keys`): made when the session is,
its public half handed out in the clear, its private half kept wrapped by the deployment key,
destroyed on erasure (crypto-shredding), and re-wrapped under a new deployment key by `rotate`
while the deployment runs.

The statements run on the thread's connection (`models.db.database`), so a caller inside a
`database.atomic()` block, such as a session's creation, makes the key in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from models.db import database
from pipeline.privacy.sealing import (
    DeploymentKey,
    SessionKeyDestroyed,
    new_session_key_pair,
    unwrap,
    wrap,
)

__all__ = [
    "ROTATION_BATCH",
    "SessionKeyDestroyed",
    "create_session_key",
    "destroy_session_key",
    "rotate",
    "session_private_key",
    "session_public_key",
]

# Rows re-wrapped per transaction: short enough that a destroy waiting on one of them waits
# for milliseconds, long enough that a rotation of a big table is not all round trips.
ROTATION_BATCH = 200

# How SQL runs: on the thread's connection, or inside a locked session's transaction.
Execute = Callable[[str, Any], Any]


def create_session_key(
    session_id: str, keys: Sequence[DeploymentKey], execute: Execute | None = None
) -> bytes:
    """Make the session's key pair (the private half wrapped under the current deployment key,
    `keys[0]`) and answer its public half; a second call answers the key already made. A key
    that was destroyed is not made again: `SessionKeyDestroyed` (an erased session stays so)."""
    execute = execute or database.execute_sql
    current = _current(keys)
    private, public = new_session_key_pair()
    execute(
        "INSERT INTO session_data_keys (session_id, public_key, wrapped_private, key_id)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (session_id) DO NOTHING",
        (session_id, public, wrap(private, current, session_id), current.key_id),
    )
    row = execute(
        "SELECT public_key, destroyed_at FROM session_data_keys WHERE session_id = %s", (session_id,)
    ).fetchone()
    if row is None:  # the session row itself went between the INSERT and here (cascade)
        raise SessionKeyDestroyed(f"session {session_id!r} has no data key")
    if row[1] is not None:
        raise SessionKeyDestroyed(_destroyed(session_id, row[1]))
    return bytes(row[0])


def session_public_key(session_id: str, execute: Execute | None = None) -> bytes | None:
    """The session's public key, or None when it has none or it was destroyed (nothing should
    be sealed for an erased session)."""
    execute = execute or database.execute_sql
    row = execute(
        "SELECT public_key FROM session_data_keys WHERE session_id = %s AND wrapped_private IS NOT NULL",
        (session_id,),
    ).fetchone()
    return None if row is None else bytes(row[0])


def session_private_key(session_id: str, keys: Sequence[DeploymentKey]) -> bytes:
    """The session's private key, unwrapped with whichever of `keys` it is under.

    `SessionKeyDestroyed` when it was destroyed or never made; `SealedValueUnreadable` (of which
    that is a kind) when none of `keys` opens it."""
    row = database.execute_sql(
        "SELECT wrapped_private, destroyed_at FROM session_data_keys WHERE session_id = %s", (session_id,)
    ).fetchone()
    if row is None:
        raise SessionKeyDestroyed(f"session {session_id!r} has no data key")
    wrapped, destroyed_at = row
    if wrapped is None:
        raise SessionKeyDestroyed(
            f"session {session_id!r}'s data key was destroyed at {destroyed_at.isoformat()}"
        )
    return unwrap(wrapped, keys, session_id)


def destroy_session_key(session_id: str, execute: Execute | None = None) -> bool:
    """Destroy the session's private key: every value sealed for it is unreadable from now on.
    True if this call destroyed it; False if it was destroyed already or never made (safe to
    repeat)."""
    execute = execute or database.execute_sql
    cursor = execute(
        "UPDATE session_data_keys SET wrapped_private = NULL, destroyed_at = now()"
        " WHERE session_id = %s AND wrapped_private IS NOT NULL",
        (session_id,),
    )
    return bool(cursor.rowcount)


def rotate(
    keys: Sequence[DeploymentKey], *, namespace: str | None = None, batch: int = ROTATION_BATCH
) -> int:
    """Re-wrap every live private key that is not under the current deployment key (`keys[0]`)
    with it, opening each with whichever of `keys` it is under; answer how many were re-wrapped.
    With `namespace`, only the keys of that deployment's sessions (deployments may share a
    database, each with its own deployment key).

    Runs beside live traffic: each batch is one short transaction that locks its rows with
    `FOR UPDATE SKIP LOCKED` (a row a destroy holds is left for it, and for the next run), and a
    key destroyed meanwhile is never brought back. A key under none of `keys` stops the run with
    `SealedValueUnreadable` naming its key id; what was re-wrapped before stays so. Running it
    again answers 0 once everything is under the current key."""
    current = _current(keys)
    scope, parameters = "", [current.key_id]
    if namespace is not None:
        scope = " AND session_id IN (SELECT id FROM sessions WHERE namespace = %s)"
        parameters.append(namespace)
    rewrapped = 0
    while True:
        with database.atomic():
            rows = database.execute_sql(
                "SELECT session_id, wrapped_private FROM session_data_keys"
                f" WHERE wrapped_private IS NOT NULL AND key_id <> %s{scope}"
                " ORDER BY session_id LIMIT %s FOR UPDATE SKIP LOCKED",
                (*parameters, batch),
            ).fetchall()
            for session_id, wrapped in rows:
                private = unwrap(wrapped, keys, session_id)
                cursor = database.execute_sql(
                    "UPDATE session_data_keys SET wrapped_private = %s, key_id = %s"
                    " WHERE session_id = %s AND wrapped_private IS NOT NULL",
                    (wrap(private, current, session_id), current.key_id, session_id),
                )
                rewrapped += cursor.rowcount
        if len(rows) < batch:
            return rewrapped


def _current(keys: Sequence[DeploymentKey]) -> DeploymentKey:
    if not keys:
        raise ValueError("no deployment key given (SWITCHBOARD_DATA_KEY)")
    return keys[0]


def _destroyed(session_id: str, at: datetime) -> str:
    return f"session {session_id!r}'s data key was destroyed at {at.isoformat()}"
