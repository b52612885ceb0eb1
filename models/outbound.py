"""Calls going out, in PostgreSQL: the SIP trunks (each password encrypted under the deployment
key, `pipeline.privacy.sealing.encrypt_secret`, and never read back out but to dial), the
numbers never to dial, and one row per call placed.

A call is placed in one transaction: its session row is created and locked, the trunk and the
suppression list are checked, the deployment's calls in progress are counted under a lock of
the deployment's own (so two dials racing cannot both take the last place), its row is written,
and the session's creation and admission are applied — which decides the dial (`PlaceCall`). The
outcome is written in the transaction that ends the session (`OutboundEnded`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from models.db import advisory_key, database
from models.pages import keyset
from pipeline.api.pages import PageRequest, next_cursor
from pipeline.call.errors import CallNotFound, SuppressionNotFound, TrunkNotFound, TrunkRequired
from pipeline.platform.envelope import DialTrunk
from pipeline.platform.timestamps import rfc3339, rfc3339_or_none
from pipeline.privacy.sealing import (
    DeploymentKey,
    SealedValueUnreadable,
    decrypt_secret,
    encrypt_secret,
    seal,
    secret_key_id,
)
from pipeline.session.step import OutboundEnded

# The deployment keys the trunks' passwords are encrypted under (current first), set once by the
# process that dials (`workers.runtime`); without them a trunk can be listed but not dialled.
_keys: tuple[DeploymentKey, ...] = ()


def use_keys(keys: Sequence[DeploymentKey]) -> None:
    """The deployment keys to encrypt and open the trunks' passwords with (current first)."""
    global _keys
    _keys = tuple(keys)


def _context(namespace: str, name: str) -> str:
    """What a trunk's encrypted password is bound to: a ciphertext moved to another trunk (or
    another deployment's) does not open there."""
    return f"trunk:{namespace}:{name}"


# ── trunks ──────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class TrunkRow:
    name: str
    url: str
    username: str
    caller_number: str
    created_at: str

    def as_json(self) -> dict[str, Any]:
        """A trunk as the API shows it: never its password."""
        return {
            "name": self.name,
            "url": self.url,
            "username": self.username,
            "caller_number": self.caller_number,
            "created_at": self.created_at,
        }


def add_trunk(namespace: str, name: str, url: str, username: str, password: str, caller_number: str) -> bool:
    """Add a trunk, or replace the one of that name; answers whether it is new."""
    if not _keys:
        raise ValueError("no deployment key to encrypt the trunk's password with (SWITCHBOARD_DATA_KEY)")
    encrypted = encrypt_secret(password, _keys[0], _context(namespace, name))
    row = database.execute_sql(
        "INSERT INTO trunks (namespace, name, url, username, password, caller_number)"
        " VALUES (%s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (namespace, name) DO UPDATE SET url = EXCLUDED.url, username = EXCLUDED.username,"
        " password = EXCLUDED.password, caller_number = EXCLUDED.caller_number"
        " RETURNING (xmax = 0)",
        (namespace, name, url, username, encrypted, caller_number),
    ).fetchone()
    return bool(row[0])


def trunks(namespace: str, page: PageRequest) -> tuple[list[TrunkRow], str | None]:
    """A page of the deployment's trunks in name order, and the next page's cursor."""
    window = keyset(page, ("name",), created="created_at")
    rows = database.execute_sql(
        "SELECT name, url, username, caller_number, created_at FROM trunks"
        f" WHERE namespace = %(namespace)s {window.where} {window.order}",
        {"namespace": namespace, **window.parameters},
    ).fetchall()
    listed = [
        TrunkRow(name, url, username, caller, rfc3339(created))
        for name, url, username, caller, created in rows[: page.limit]
    ]
    return listed, next_cursor(page, rows, lambda row: (row[0],))


def trunk_row(namespace: str, name: str) -> TrunkRow:
    """One trunk as the API shows it (TrunkNotFound if there is none)."""
    row = database.execute_sql(
        "SELECT name, url, username, caller_number, created_at FROM trunks"
        " WHERE namespace = %s AND name = %s",
        (namespace, name),
    ).fetchone()
    if row is None:
        raise TrunkNotFound(f"no trunk {name!r}")
    found, url, username, caller, created = row
    return TrunkRow(found, url, username, caller, rfc3339(created))


def remove_trunk(namespace: str, name: str) -> None:
    """Remove a trunk (404 if there is none). Calls placed through it keep going; a campaign
    that names it fails its next dials with `trunk_not_found`."""
    cursor = database.execute_sql("DELETE FROM trunks WHERE namespace = %s AND name = %s", (namespace, name))
    if not cursor.rowcount:
        raise TrunkNotFound(f"no trunk {name!r}")


def trunk_named(namespace: str, name: str | None, execute: Any = None) -> str:
    """The trunk a call goes out through: the one named, or the deployment's only one."""
    run = execute or database.execute_sql
    if name is not None:
        if (
            run("SELECT 1 FROM trunks WHERE namespace = %s AND name = %s", (namespace, name)).fetchone()
            is None
        ):
            raise TrunkNotFound(
                f"no trunk {name!r}: add one with POST /v1/trunks or `switchboard trunks add`"
            )
        return name
    names = [
        row[0] for row in run("SELECT name FROM trunks WHERE namespace = %s LIMIT 2", (namespace,)).fetchall()
    ]
    if not names:
        raise TrunkNotFound(
            "no trunk to call out through: add one with POST /v1/trunks or `switchboard trunks add`"
        )
    if len(names) > 1:
        raise TrunkRequired("the deployment has several trunks: name the one to call out through (trunk)")
    return str(names[0])


def trunk_for_dial(session_id: str, name: str, execute: Any) -> DialTrunk | None:
    """A trunk as a dial directive names it, its password left out (None: it is gone)."""
    row = execute(
        "SELECT t.url, t.username, t.caller_number FROM trunks t"
        " JOIN sessions s ON s.namespace = t.namespace WHERE s.id = %s AND t.name = %s",
        (session_id, name),
    ).fetchone()
    if row is None:
        return None
    url, username, caller_number = row
    return DialTrunk(name=name, url=url, username=username, caller_number=caller_number)


def trunk_password_sealed(session_id: str, name: str, dial_key: bytes) -> str | None:
    """The password of the trunk a session dials through, opened with the deployment keys and
    sealed to the dialling gateway's key (`dial_key`, a public key of its own), so it crosses
    Redis unreadable; None when the trunk is gone or its password does not open."""
    row = database.execute_sql(
        "SELECT t.namespace, t.password FROM trunks t"
        " JOIN sessions s ON s.namespace = t.namespace WHERE s.id = %s AND t.name = %s",
        (session_id, name),
    ).fetchone()
    if row is None:
        return None
    namespace, encrypted = row
    try:
        password = decrypt_secret(encrypted, _keys, _context(namespace, name))
    except SealedValueUnreadable:
        return None
    return seal(password, public_key=dial_key, session_id=session_id)


def rotate_trunks(keys: Sequence[DeploymentKey], *, namespace: str | None = None) -> int:
    """Encrypt every trunk's password not under the current deployment key (`keys[0]`) anew under
    it, opening each with whichever of `keys` it is under; answers how many. A password under
    none of them stops the run with `SealedValueUnreadable`, as a session's key does."""
    current = keys[0]
    scope, parameters = "", []
    if namespace is not None:
        scope, parameters = " WHERE namespace = %s", [namespace]
    rotated = 0
    with database.atomic():
        rows = database.execute_sql(
            f"SELECT namespace, name, password FROM trunks{scope} FOR UPDATE", parameters
        ).fetchall()
        for trunk_namespace, name, encrypted in rows:
            if secret_key_id(encrypted) == current.key_id:
                continue
            context = _context(trunk_namespace, name)
            password = decrypt_secret(encrypted, keys, context)
            database.execute_sql(
                "UPDATE trunks SET password = %s WHERE namespace = %s AND name = %s",
                (encrypt_secret(password, current, context), trunk_namespace, name),
            )
            rotated += 1
    return rotated


# ── numbers never to dial ───────────────────────────────────────────────────────────────


def suppress(
    namespace: str,
    number: str,
    *,
    reason: str = "",
    source: str = "api",
    by: str = "",
    session_id: str | None = None,
) -> bool:
    """Never dial `number` again; answers whether it is newly suppressed (a repeat keeps the first
    reason)."""
    row = database.execute_sql(
        "INSERT INTO suppressions (namespace, number, reason, source, added_by, session_id)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, number) DO NOTHING RETURNING 1",
        (namespace, number, reason, source, by, session_id),
    ).fetchone()
    return row is not None


def suppress_for_session(execute: Any, session_id: str, number: str, source: str) -> None:
    """In the session's own transaction: the other party of its call asked never to be called
    again (by key, or the model heard it); the number goes on its deployment's list, once."""
    reason = "pressed the opt-out key" if source == "opt_out" else "asked not to be called again"
    execute(
        "INSERT INTO suppressions (namespace, number, reason, source, session_id)"
        " SELECT namespace, %s, %s, %s, id FROM sessions WHERE id = %s"
        " ON CONFLICT (namespace, number) DO NOTHING",
        (number, reason, source, session_id),
    )


_SUPPRESSION_COLUMNS = "number, reason, source, added_by, session_id, created_at"


def suppressions(namespace: str, page: PageRequest) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the suppressed numbers in number order, and the next page's cursor."""
    window = keyset(page, ("number",), created="created_at")
    rows = database.execute_sql(
        f"SELECT {_SUPPRESSION_COLUMNS} FROM suppressions"
        f" WHERE namespace = %(namespace)s {window.where} {window.order}",
        {"namespace": namespace, **window.parameters},
    ).fetchall()
    listed = [_suppression(row) for row in rows[: page.limit]]
    return listed, next_cursor(page, rows, lambda row: (row[0],))


def suppression(namespace: str, number: str) -> dict[str, Any]:
    """One suppressed number as the list shows it (SuppressionNotFound if it is not)."""
    row = database.execute_sql(
        f"SELECT {_SUPPRESSION_COLUMNS} FROM suppressions WHERE namespace = %s AND number = %s",
        (namespace, number),
    ).fetchone()
    if row is None:
        raise SuppressionNotFound(f"{number} is not suppressed")
    return _suppression(row)


def _suppression(row: Any) -> dict[str, Any]:
    number, reason, source, by, session_id, created = row
    return {
        "number": number,
        "reason": reason,
        "source": source,
        "by": by,
        "session_id": session_id,
        "created_at": rfc3339(created),
    }


def unsuppress(namespace: str, number: str) -> None:
    cursor = database.execute_sql(
        "DELETE FROM suppressions WHERE namespace = %s AND number = %s", (namespace, number)
    )
    if not cursor.rowcount:
        raise SuppressionNotFound(f"{number} is not suppressed")


def is_suppressed(namespace: str, number: str, execute: Any = None) -> bool:
    run = execute or database.execute_sql
    return (
        run("SELECT 1 FROM suppressions WHERE namespace = %s AND number = %s", (namespace, number)).fetchone()
        is not None
    )


# ── calls placed ────────────────────────────────────────────────────────────────────────


def _dialer_lock(namespace: str) -> int:
    """The advisory lock a deployment's dial decisions take, so its count of calls in progress
    is never read by two of them at once."""
    return advisory_key(f"switchboard dialer {namespace}")


def hold_the_dialer(namespace: str, execute: Any) -> None:
    """Serialize this transaction's dial decisions with every other of the deployment's."""
    execute("SELECT pg_advisory_xact_lock(%s)", (_dialer_lock(namespace),))


def in_progress(namespace: str, execute: Any, campaign_id: str | None = None) -> int:
    """The deployment's calls going out not yet over (a campaign's, when named)."""
    if campaign_id is None:
        row = execute(
            "SELECT count(*) FROM outbound_calls WHERE namespace = %s AND outcome IS NULL", (namespace,)
        ).fetchone()
    else:
        row = execute(
            "SELECT count(*) FROM outbound_calls"
            " WHERE namespace = %s AND campaign_id = %s AND outcome IS NULL",
            (namespace, campaign_id),
        ).fetchone()
    return int(row[0])


def numbers_in_a_call(namespace: str, numbers: Sequence[str], execute: Any) -> set[str]:
    """Which of `numbers` a call of the deployment's is dialling or talking to now, or is about
    to (its row written, its outcome not yet): read under the dialer lock, so no other claim is
    between. A claim of a campaign cancelled or completed before the claim was placed is never
    placed (only a running campaign's tick places a lost one) and holds no number."""
    if not numbers:
        return set()
    rows = execute(
        "SELECT DISTINCT o.to_number FROM outbound_calls o LEFT JOIN campaigns c ON c.id = o.campaign_id"
        " WHERE o.namespace = %s AND o.outcome IS NULL AND o.to_number = ANY(%s)"
        " AND (o.campaign_id IS NULL OR c.status IN ('scheduled', 'running', 'paused')"
        " OR EXISTS (SELECT 1 FROM sessions s WHERE s.id = o.session_id))",
        (namespace, list(numbers)),
    ).fetchall()
    return {str(row[0]) for row in rows}


def inbound_in_progress(namespace: str, execute: Any) -> int:
    """The deployment's phone calls that came in and are not over."""
    row = execute(
        "SELECT count(*) FROM phone_calls p JOIN sessions s ON s.id = p.session_id"
        " WHERE p.namespace = %s AND p.action = 'accept' AND s.status NOT IN ('ended', 'failed')",
        (namespace,),
    ).fetchone()
    return int(row[0])


def room_to_dial(
    namespace: str, execute: Any, *, max_outbound: int, max_phone_calls: int, reserve_inbound: int
) -> int:
    """How many more calls the deployment may place now: at most `max_outbound` going out, and
    `reserve_inbound` of the `max_phone_calls` lines always kept for callers."""
    going_out = in_progress(namespace, execute)
    coming_in = inbound_in_progress(namespace, execute)
    return max(0, min(max_outbound - going_out, max_phone_calls - reserve_inbound - going_out - coming_in))


def record_call(
    execute: Any,
    *,
    call_id: str,
    namespace: str,
    session_id: str,
    to: str,
    trunk: str,
    campaign_id: str | None = None,
    contact_id: int | None = None,
    attempt: int = 1,
) -> bool:
    """The call placed, in its session's creating transaction; answers False when this contact's
    attempt was placed already (its decision was re-run)."""
    row = execute(
        "INSERT INTO outbound_calls"
        " (id, namespace, session_id, to_number, trunk, campaign_id, contact_id, attempt)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1",
        (call_id, namespace, session_id, to, trunk, campaign_id, contact_id, attempt),
    ).fetchone()
    return row is not None


def call_ended(execute: Any, ended: OutboundEnded) -> tuple[str, int] | None:
    """The call's outcome, written once, in the transaction that ended its session; answers the
    campaign and contact it dialled (None for a call of `POST /v1/calls`, or one written already)."""
    row = execute(
        "UPDATE outbound_calls SET outcome = %s, answered_by = %s, code = %s, ended_at = now()"
        " WHERE id = %s AND outcome IS NULL RETURNING campaign_id, contact_id",
        (ended.outcome, ended.answered_by, (ended.code or "")[:200] or None, ended.id),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return str(row[0]), int(row[1])


def outbound_call(namespace: str, call_id: str) -> dict[str, Any]:
    row = database.execute_sql(
        "SELECT id, session_id, to_number, trunk, campaign_id, attempt, outcome, answered_by, code,"
        " started_at, ended_at FROM outbound_calls WHERE namespace = %s AND id = %s",
        (namespace, call_id),
    ).fetchone()
    if row is None:
        raise CallNotFound(f"no call {call_id!r}")
    return _call_json(row)


def _call_json(row: Sequence[Any]) -> dict[str, Any]:
    call_id, session_id, to, trunk, campaign_id, attempt, outcome, answered_by, code, started, ended = row
    return {
        "id": call_id,
        "session_id": session_id,
        "to": to,
        "trunk": trunk,
        "campaign_id": campaign_id,
        "attempt": attempt,
        "status": "ended" if outcome is not None else "in_progress",
        "outcome": outcome,
        "answered_by": answered_by,
        "code": code,
        "started_at": rfc3339(started),
        "ended_at": rfc3339_or_none(ended),
    }
