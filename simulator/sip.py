"""Phone calls on the simulated provider: a SIP call announced to the host with a signed
`realtime.call.incoming` webhook, retried as the provider retries, then accepted or rejected.

The payload is checked strictly against `openai.types.webhooks.RealtimeCallIncomingWebhookEvent`
before it is sent; the signature is Standard Webhooks' (HMAC-SHA256 over `id.timestamp.body`,
the key the base64 after `whsec_`, or the secret's bytes), as the provider signs.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from openai.types.webhooks import RealtimeCallIncomingWebhookEvent
from pydantic import BaseModel, ConfigDict, Field

# The provider retries a delivery that was not answered 2xx, backing off; the simulator does
# the same, faster.
FIRST_RETRY_S = 0.2
DELIVERY_TIMEOUT_S = 10.0


class PlaceCall(BaseModel):
    """`POST /_sim/sip/calls`: a phone call to `to` from `from`, announced to `webhook_url`."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    to: str = "+18005551212"
    from_: str = Field(default="+14155550100", alias="from")
    webhook_url: str
    secret: str
    # Extra deliveries of the same webhook sent at once (a provider that delivers twice).
    duplicates: int = Field(default=0, ge=0, le=100)
    # Deliveries after the first that was not answered 2xx.
    retries: int = Field(default=5, ge=0, le=20)
    # Sign with this timestamp offset (seconds; negative = in the past), or a wrong secret.
    timestamp_offset_s: int = 0
    sign_with: str | None = None
    extra_headers: list[dict[str, str]] = Field(default_factory=list)


@dataclass
class Ringing:
    """What happened to a phone call before anyone talked on it."""

    webhook_id: str
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    accepts: int = 0
    rejected_with: int | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


def sign(secret: str, webhook_id: str, timestamp: int, body: str) -> str:
    """A Standard Webhooks signature header value (written out here: the simulator stands for
    the provider, and shares no code with Switchboard)."""
    key = base64.b64decode(secret[6:]) if secret.startswith("whsec_") else secret.encode()
    digest = hmac.new(key, f"{webhook_id}.{timestamp}.{body}".encode(), hashlib.sha256).digest()
    return f"v1,{base64.b64encode(digest).decode()}"


def incoming_event(call_id: str, place: PlaceCall) -> dict[str, Any]:
    """The `realtime.call.incoming` event, checked against the provider's type."""
    event = {
        "object": "event",
        "id": f"evt_{secrets.token_hex(12)}",
        "type": "realtime.call.incoming",
        "created_at": int(time.time()),
        "data": {
            "call_id": call_id,
            "sip_headers": [
                {"name": "From", "value": f"sip:{place.from_}@sip.example.com"},
                {"name": "To", "value": f"sip:{place.to}@sip.example.com"},
                {"name": "Call-ID", "value": secrets.token_hex(16)},
                *place.extra_headers,
            ],
        },
    }
    RealtimeCallIncomingWebhookEvent.model_validate(event, strict=True)
    return event


async def announce(
    call_id: str, place: PlaceCall, ringing: Ringing, *, event: dict[str, Any] | None = None
) -> None:
    """Deliver the webhook until it is answered 2xx (or the retries are spent), with any
    duplicates sent at once beside the first delivery. `event` replaces the Realtime
    `realtime.call.incoming` (the Live mode announces `live.transport.incoming`)."""
    body = json.dumps(event if event is not None else incoming_event(call_id, place))

    async def deliver(attempt: int) -> int:
        timestamp = int(time.time()) + place.timestamp_offset_s
        headers = {
            "content-type": "application/json",
            "user-agent": "OpenAI/1.0 (+https://platform.openai.com/docs/webhooks)",
            "webhook-id": ringing.webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(place.sign_with or place.secret, ringing.webhook_id, timestamp, body),
        }
        started = time.time()
        status = await asyncio.to_thread(_post, place.webhook_url, body.encode(), headers)
        ringing.deliveries.append(
            {"attempt": attempt, "status": status, "sent_at": started, "t": time.time()}
        )
        return status

    first, *_ = await asyncio.gather(*(deliver(0) for _ in range(1 + place.duplicates)))
    delay = FIRST_RETRY_S
    attempt = 0
    while not 200 <= first < 300 and attempt < place.retries:
        await asyncio.sleep(delay)
        attempt += 1
        delay *= 2
        first = await deliver(attempt)
    ringing.done.set()


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """One delivery: its HTTP status, or 0 when nothing answered."""
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=DELIVERY_TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return 0
