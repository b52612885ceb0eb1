"""Standard Webhooks signatures: HMAC-SHA256 over `{id}.{timestamp}.{body}`, the key the base64
after `whsec_` (or the secret's own bytes), sent as `v1,<base64>` in `webhook-signature`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    if secret.startswith(SECRET_PREFIX):
        return base64.b64decode(secret[len(SECRET_PREFIX) :])
    return secret.encode()


def is_secret(secret: str) -> bool:
    """Whether a secret is a Standard Webhooks one: `whsec_` and at least 24 bytes in base64."""
    if not secret.startswith(SECRET_PREFIX):
        return False
    try:
        return len(base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)) >= 24
    except (binascii.Error, ValueError):
        return False


def signature(secret: str, webhook_id: str, timestamp: int, body: str) -> str:
    digest = hmac.new(
        secret_key(secret), f"{webhook_id}.{timestamp}.{body}".encode(), hashlib.sha256
    ).digest()
    return f"v1,{base64.b64encode(digest).decode()}"
