"""The SIP front door: the provider's `realtime.call.incoming` webhook (or, for a Live call,
`live.transport.incoming`, by the Live session's id), checked and answered.

The signature (Standard Webhooks: HMAC-SHA256 over `id.timestamp.body`, 300 s tolerance) is
checked with the `openai` package against SWITCHBOARD_WEBHOOK_SECRET, and the payload is read
strictly as the package's `RealtimeCallIncomingWebhookEvent`. The gateway then asks a worker
what to do with the call (decided once per call id, under PostgreSQL's constraints), does it at
the provider (accept or reject), and tells the worker how that went: only then is the delivery
answered 2xx. Whatever could not be done is answered 5xx, so the provider delivers it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import openai
from openai.types.webhooks import LiveTransportIncomingWebhookEvent, RealtimeCallIncomingWebhookEvent
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response

from gateway.providers.rest import ProviderCallError
from gateway.web import error_response
from pipeline.call.errors import ProviderUnavailable
from pipeline.phone.sip import MAXIMUM_SIP_HEADERS, kept_headers

if TYPE_CHECKING:
    from gateway.ports import PhonePort

logger = logging.getLogger(__name__)

# The provider's own replay window for a delivery.
SIGNATURE_TOLERANCE_S = 300
# A call's answer that could not be recorded is tried again this often, this many times (the
# call was answered at the provider: its delivery is not answered 5xx, or it would be again).
RECORD_RETRY_S = 1.0
RECORD_ATTEMPTS = 30
# A provider call id is short and opaque; the door stores at most this much of one.
MAXIMUM_CALL_ID_CHARS = 200


class WebhookRefused(Exception):
    """A delivery that is not the provider's, or not one Switchboard can read."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    type: str


class PhoneDoor:
    """Checks that a delivery is the provider's, and reads it."""

    def __init__(self, secret: str | None) -> None:
        self._client = openai.OpenAI(api_key="unused", webhook_secret=secret) if secret else None

    @property
    def is_open(self) -> bool:
        return self._client is not None

    def unwrap(
        self, body: bytes, headers: Headers
    ) -> RealtimeCallIncomingWebhookEvent | LiveTransportIncomingWebhookEvent | _Event:
        """The delivery's event, its signature checked: a call announced (read strictly as the
        provider's type), or any other event by its type alone."""
        if self._client is None:
            raise WebhookRefused("webhooks_not_configured", "SWITCHBOARD_WEBHOOK_SECRET is not set")
        try:
            self._client.webhooks.verify_signature(body, dict(headers), tolerance=SIGNATURE_TOLERANCE_S)
        except openai.InvalidWebhookSignatureError as error:
            raise WebhookRefused("invalid_signature", str(error)) from None
        except ValueError as error:  # a required header missing, a body that is not UTF-8
            raise WebhookRefused("invalid_signature", str(error)) from None
        try:
            event = _Event.model_validate_json(body)
            if event.type == "realtime.call.incoming":
                call = RealtimeCallIncomingWebhookEvent.model_validate(json.loads(body), strict=False)
                if not 0 < len(call.data.call_id) <= MAXIMUM_CALL_ID_CHARS:
                    raise ValueError(f"a call id is 1 to {MAXIMUM_CALL_ID_CHARS} characters")
                return call
            if event.type == "live.transport.incoming":
                live = LiveTransportIncomingWebhookEvent.model_validate(json.loads(body), strict=False)
                if live.data.type != "sip":
                    raise ValueError("live.transport.incoming announces a phone call (type sip)")
                if not 0 < len(live.data.session_id) <= MAXIMUM_CALL_ID_CHARS:
                    raise ValueError(f"a session id is 1 to {MAXIMUM_CALL_ID_CHARS} characters")
                return live
        except (ValidationError, ValueError) as error:
            raise WebhookRefused("malformed_webhook", f"not a webhook event: {error}"[:500]) from None
        return event


async def answer_phone_call(
    gateway: PhonePort, webhook_id: str, call_id: str, sip_headers: list[Any], provider: str = "realtime"
) -> Response:
    """Answer a delivery's call (`answer_call`), its SIP headers and webhook id bounded first:
    untrusted and unbounded as sent, they are bounded before they travel or are stored."""
    raw = [{"name": header.name, "value": header.value} for header in sip_headers[:MAXIMUM_SIP_HEADERS]]
    headers = [{"name": name, "value": value} for name, value in kept_headers(raw)]
    return await answer_call(gateway, webhook_id[:200], call_id, headers, provider)


async def answer_call(
    gateway: PhonePort,
    webhook_id: str,
    call_id: str,
    sip_headers: list[dict[str, Any]],
    provider: str = "realtime",
) -> Response:
    """Decide (a worker, once per call), act at the provider, record the outcome, answer."""
    status, decision = await gateway.rpc.call(
        "ring",
        webhook_id=webhook_id,
        call_id=call_id,
        sip_headers=sip_headers,
        now=time.time(),
        provider=provider,
    )
    if status != 200:
        # Not recorded (or not known to be): the provider delivers it again.
        gateway.counters.count_webhook("not_recorded")
        return JSONResponse(decision, status_code=503 if status >= 500 else status)
    action = decision["action"]
    answered = {"call_id": call_id, "action": action, "session_id": decision.get("session_id")}
    gateway.counters.count_webhook(action)
    if action in ("answered", "ignored"):
        # Ignored: the route answers its calls on the other provider, whose own announcement of
        # the same call does that.
        return JSONResponse(answered)
    if action == "busy":
        message = "another delivery of this call is being answered; deliver it again later"
        return error_response(409, "call_being_answered", message, {"Retry-After": "2"})
    answering = gateway.wings.rest_of(provider)
    try:
        if action == "accept":
            await answering.accept(call_id, decision["session"])
            outcome, detail = "accepted", ""
        else:
            await answering.reject(call_id, int(decision["status_code"]))
            outcome, detail = "rejected", ""
    except ProviderUnavailable as error:
        if not isinstance(error, ProviderCallError):
            # The provider could not be reached: the claim is let go, and the next delivery
            # (the provider retries a 5xx) answers the call.
            await gateway.rpc.call(
                "phone_call_answered",
                call_id=call_id,
                claim=decision["claim"],
                outcome="released",
                detail=str(error),
                now=time.time(),
            )
            gateway.counters.count_webhook("provider_unavailable")
            return error_response(503, "provider_unavailable", "the provider could not be reached")
        if action == "accept" and decision.get("again") and error.status in (400, 409):
            # An earlier claimer's accept went through before it could say so.
            outcome, detail = "accepted", ""
        else:
            logger.warning("the provider refused to %s call %s: %s", action, call_id, error)
            outcome, detail = "failed", str(error)[:500]
    gateway.spawn_task(_record(gateway, call_id, decision["claim"], outcome, detail), f"answered-{call_id}")
    return JSONResponse({**answered, "outcome": outcome})


async def _record(gateway: PhonePort, call_id: str, claim: str, outcome: str, detail: str) -> None:
    """Tell a worker how the call was answered (an accepted call's sideband opens then), until
    one has heard it."""
    for _ in range(RECORD_ATTEMPTS):
        status, _body = await gateway.rpc.call(
            "phone_call_answered",
            call_id=call_id,
            claim=claim,
            outcome=outcome,
            detail=detail,
            now=time.time(),
        )
        if status == 200:
            return
        await asyncio.sleep(RECORD_RETRY_S)
    logger.error("call %s was %s at the provider, but no worker recorded it", call_id, outcome)
