"""Watch tokens: short-lived, per-session credentials for the stream a call's watchers read.

The API keeps its published names for them (the `/v1/sessions/{id}/live` stream, its
`live-token` route and the `live` field of a created session); inside, "live" names only the
Live provider.

A browser watching a call must never hold the API token (it would read and steer every call),
and a WebSocket from a browser cannot carry an Authorization header, so what it puts in the
URL is a token good for one session and a few minutes: `lt1.<session>.<expires>.<mac>`, where
the MAC is HMAC-SHA256 over the rest with a secret every gateway shares. No gateway stores
tokens; any gateway checks any gateway's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

# Long enough to open the stream after the token was handed out; an open stream outlives it.
LIVE_TOKEN_TTL_S = 600

_VERSION = "lt1"


def derive_secret(api_token: str) -> bytes:
    """The signing secret when none is configured: derived from the API token every gateway of
    a deployment shares, and useless for anything else."""
    return hmac.new(api_token.encode(), b"switchboard live tokens", hashlib.sha256).digest()


def mint(secret: bytes, session_id: str, now: float, ttl_s: int = LIVE_TOKEN_TTL_S) -> tuple[str, int]:
    """A token for `session_id` and the epoch second it expires at."""
    expires_at = int(now) + ttl_s
    body = f"{_VERSION}.{session_id}.{expires_at}"
    return f"{body}.{_mac(secret, body)}", expires_at


def session_of(secret: bytes, token: str, now: float) -> str | None:
    """The session a genuine, unexpired token is for; None for anything else."""
    try:
        version, session_id, expires_text, mac = token.split(".")
    except ValueError:
        return None
    if version != _VERSION or not expires_text.isdigit():
        return None
    expected = _mac(secret, f"{version}.{session_id}.{expires_text}")
    if not hmac.compare_digest(expected.encode(), mac.encode("utf-8", "surrogatepass")):
        return None
    if int(expires_text) <= now:
        return None
    return session_id


def _mac(secret: bytes, body: str) -> str:
    digest = hmac.new(secret, body.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
