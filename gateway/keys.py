"""Who a request comes from: the bearer token checked against the deployment's API token, or
an API key looked up (through a worker) and remembered for a few seconds.

A revoked key stops working within KEY_MEMORY_S; an unknown key is remembered as unknown for as
long, so guessing keys costs the database nothing more than one lookup per guess and window.
"""

from __future__ import annotations

import hmac
import time
from typing import TYPE_CHECKING

from pipeline.api.roles import Identity, Role, parse_key, secret_matches

if TYPE_CHECKING:
    from gateway.rpc import WorkerRpc

# How long a key's lookup is trusted: revocation takes at most this long to reach a gateway.
KEY_MEMORY_S = 5.0
# Lookups remembered at most (the oldest go first): a flood of made-up keys cannot grow it.
MAXIMUM_REMEMBERED_KEYS = 10_000
DEPLOYMENT_TOKEN = Identity(key_id="token", name="the deployment's API token", role=Role.ADMIN)


class KeyRing:
    def __init__(self, api_token: str, rpc: WorkerRpc) -> None:
        self._token = api_token.encode()
        self._rpc = rpc
        # key id → (when the lookup expires, its name, role and secret digest; None: no such key)
        self._remembered: dict[str, tuple[float, dict[str, str] | None]] = {}

    async def identify(self, authorization: bytes) -> Identity | None:
        """The identity a request's Authorization header proves, or None."""
        scheme, _, token = authorization.partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return None
        if hmac.compare_digest(token, self._token):
            return DEPLOYMENT_TOKEN
        parsed = parse_key(token)
        if parsed is None:
            return None
        key_id, secret = parsed
        record = await self._record(key_id)
        if record is None or not secret_matches(secret, record["digest"]):
            return None
        return Identity(key_id=key_id, name=record["name"], role=Role(record["role"]))

    async def _record(self, key_id: str) -> dict[str, str] | None:
        now = time.monotonic()
        remembered = self._remembered.get(key_id)
        if remembered is not None and remembered[0] > now:
            return remembered[1]
        status, body = await self._rpc.call("key_identity", key_id=key_id)
        if status == 200:
            record: dict[str, str] | None = {
                "name": body["name"],
                "role": body["role"],
                "digest": body["digest"],
            }
        elif status == 404:
            record = None
        else:
            return None  # no worker answered: refused now, asked again next time
        if len(self._remembered) >= MAXIMUM_REMEMBERED_KEYS:
            self._remembered.pop(next(iter(self._remembered)))
        self._remembered[key_id] = (now + KEY_MEMORY_S, record)
        return record
