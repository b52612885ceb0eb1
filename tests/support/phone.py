"""Ringing phone calls at the simulated provider, as the SIP door's tests and faults do."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from switchboard.stack import Stack


def ring(stack: Stack, to: str, **options: Any) -> str:
    """A phone call to `to` rings (its signed webhook goes to the stack's gateway); answers the
    provider's call id."""
    body = {"to": to, "webhook_url": stack.webhook_url, "secret": stack.webhook_secret, **options}
    base = stack.simulator_url.removesuffix("/v1")
    request = urllib.request.Request(
        f"{base}/_sim/sip/calls",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["call_id"])
