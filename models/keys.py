"""API keys in PostgreSQL: made (the secret is returned once), listed, revoked, looked up."""

from __future__ import annotations

from typing import Any

from models.db import database
from pipeline.api.roles import Role, new_key
from pipeline.call.errors import KeyNotFound
from pipeline.platform.timestamps import rfc3339, rfc3339_or_none


def add_key(namespace: str, name: str, role: Role) -> dict[str, Any]:
    """A new key; `key` holds the whole secret, shown this once."""
    key_id, token, digest = new_key()
    database.execute_sql(
        "INSERT INTO api_keys (id, namespace, name, role, secret_sha256) VALUES (%s, %s, %s, %s, %s)",
        (key_id, namespace, name, str(role), digest),
    )
    return {"id": key_id, "name": name, "role": str(role), "key": token}


def keys(namespace: str) -> list[dict[str, Any]]:
    rows = database.execute_sql(
        "SELECT id, name, role, created_at, revoked_at FROM api_keys"
        " WHERE namespace = %s ORDER BY created_at",
        (namespace,),
    ).fetchall()
    return [
        {
            "id": key_id,
            "name": name,
            "role": role,
            "created_at": rfc3339(created),
            "revoked_at": rfc3339_or_none(revoked),
        }
        for key_id, name, role, created, revoked in rows
    ]


def revoke_key(namespace: str, key_id: str) -> None:
    cursor = database.execute_sql(
        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE namespace = %s AND id = %s",
        (namespace, key_id),
    )
    if not cursor.rowcount:
        raise KeyNotFound(f"no key {key_id!r}")


def key_for(namespace: str, key_id: str) -> dict[str, Any] | None:
    """A live key's name, role and secret digest (None if there is none, or it was revoked)."""
    row = database.execute_sql(
        "SELECT name, role, secret_sha256 FROM api_keys"
        " WHERE namespace = %s AND id = %s AND revoked_at IS NULL",
        (namespace, key_id),
    ).fetchone()
    if row is None:
        return None
    name, role, digest = row
    return {"name": name, "role": role, "digest": digest}
