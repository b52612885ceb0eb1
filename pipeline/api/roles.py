"""Who may do what: API keys with roles, and which routes each role may use.

`app` creates and steers sessions, places calls and runs campaigns, and adds numbers to the
do-not-call list; `supervisor` uses the supervisor's verbs (and the line's: hold, unhold,
attention); `viewer` only reads; `admin` may do everything, the routes, trunks, dead letters,
erasure and taking a number off the do-not-call list included. A key is `sbk_<id>_<secret>`:
the id finds it, the secret is compared, as its SHA-256, in constant time over bytes. The
deployment's own API token (SWITCHBOARD_API_TOKEN) is an admin's: the key that makes the others.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum

# The token a fresh checkout runs with: never on an address others can reach.
DEVELOPMENT_TOKEN = "switchboard-dev-token"
KEY_PATTERN = re.compile(rb"sbk_([a-z0-9]{12})_([A-Za-z0-9_-]{20,64})")


class Role(StrEnum):
    APP = "app"
    SUPERVISOR = "supervisor"
    VIEWER = "viewer"
    ADMIN = "admin"


class Permission(StrEnum):
    READ = "read"
    STEER = "steer"  # create, connect, direct and end sessions
    LINE = "line"  # hold, unhold, ask for a person
    SUPERVISE = "supervise"  # the supervisor's verbs
    ADMINISTER = "administer"  # routes, dead letters, keys, erasure


GRANTS: dict[Role, frozenset[Permission]] = {
    Role.VIEWER: frozenset({Permission.READ}),
    Role.APP: frozenset({Permission.READ, Permission.STEER, Permission.LINE}),
    Role.SUPERVISOR: frozenset({Permission.READ, Permission.LINE, Permission.SUPERVISE}),
    Role.ADMIN: frozenset(Permission),
}

_LINE_SUFFIXES = ("/hold", "/unhold", "/attention")


@dataclass(frozen=True)
class Identity:
    """Who a request comes from: a key (its id, name and role), or the deployment's token."""

    key_id: str
    name: str
    role: Role

    def may(self, permission: Permission) -> bool:
        return permission in GRANTS[self.role]


def permission_for(method: str, path: str) -> Permission:
    """What a request needs, by its route."""
    if path.startswith(
        ("/v1/routes", "/v1/dead-letters", "/v1/keys", "/v1/phone-calls", "/v1/callers", "/v1/trunks")
    ):
        return Permission.ADMINISTER
    if path.startswith("/v1/agents") and method not in ("GET", "HEAD"):
        return Permission.ADMINISTER  # agents are read by any key, changed by an administrator
    if method == "DELETE" and path.startswith("/v1/suppressions/"):
        # Taking a number off the do-not-call list is an administrator's.
        return Permission.ADMINISTER
    if method == "DELETE" and path.startswith("/v1/sessions/"):
        return Permission.ADMINISTER  # erasure
    if method in ("GET", "HEAD"):
        return Permission.READ
    if path.startswith("/v1/sessions/") and path.endswith("/supervisor"):
        return Permission.SUPERVISE
    if path.startswith("/v1/sessions/") and path.endswith(_LINE_SUFFIXES):
        return Permission.LINE
    if path.startswith("/v1/sessions/") and path.endswith("/live-token"):
        return Permission.READ
    return Permission.STEER


def new_key() -> tuple[str, str, str]:
    """A fresh key: its id, the whole key (shown once), and what is stored of its secret."""
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return key_id, f"sbk_{key_id}_{secret}", secret_digest(secret.encode())


def secret_digest(secret: bytes) -> str:
    return hashlib.sha256(secret).hexdigest()


def parse_key(token: bytes) -> tuple[str, bytes] | None:
    """A key's id and secret, or None for a token that is not a key."""
    matched = KEY_PATTERN.fullmatch(token)
    if matched is None:
        return None
    return matched.group(1).decode(), matched.group(2)


def secret_matches(secret: bytes, stored_digest: str) -> bool:
    """Compared as bytes, in constant time."""
    return hmac.compare_digest(secret_digest(secret).encode(), stored_digest.encode())


def is_loopback(host: str) -> bool:
    """Whether an address to listen on is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
