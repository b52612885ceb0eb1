"""The SIP door's first check: a delivery is the provider's (its Standard Webhooks signature),
and a call announcement reads strictly as the provider's type."""

from __future__ import annotations

import json
import time

import pytest
from openai.types.webhooks import LiveTransportIncomingWebhookEvent
from starlette.datastructures import Headers

from gateway.phone import PhoneDoor, WebhookRefused
from simulator.live import incoming_event as live_incoming_event
from simulator.sip import PlaceCall, incoming_event, sign

SECRET = "whsec_" + "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seQ=="


def _delivery(body: str, *, secret: str = SECRET, age_s: int = 0, webhook_id: str = "wh_1") -> Headers:
    timestamp = int(time.time()) - age_s
    return Headers(
        {
            "webhook-id": webhook_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(secret, webhook_id, timestamp, body),
        }
    )


def _call() -> str:
    place = PlaceCall(webhook_url="http://x", secret=SECRET, to="+18005551212")
    return json.dumps(incoming_event("rtc_sip_1", place))


def test_a_signed_call_announcement_is_read_as_the_providers_type() -> None:
    body = _call()
    event = PhoneDoor(SECRET).unwrap(body.encode(), _delivery(body))
    assert event.type == "realtime.call.incoming"
    assert event.data.call_id == "rtc_sip_1"  # type: ignore[union-attr]
    assert {h.name for h in event.data.sip_headers} >= {"From", "To"}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "headers",
    [
        _delivery(_call(), secret="whsec_" + "d3Jvbmctc2VjcmV0LWZvci10ZXN0cw=="),  # forged
        _delivery(_call(), age_s=301),  # stale (a replay past the tolerance)
        _delivery(_call(), age_s=-400),  # from the future
        Headers({"webhook-id": "wh_1"}),  # unsigned
    ],
)
def test_forged_stale_or_unsigned_deliveries_are_refused(headers: Headers) -> None:
    with pytest.raises(WebhookRefused) as refused:
        PhoneDoor(SECRET).unwrap(_call().encode(), headers)
    assert refused.value.code == "invalid_signature"


def test_a_signed_body_that_is_not_a_call_announcement_is_refused_or_passed_by_type() -> None:
    broken = json.dumps({"object": "event", "id": "evt_1", "type": "realtime.call.incoming", "data": {}})
    with pytest.raises(WebhookRefused) as refused:
        PhoneDoor(SECRET).unwrap(broken.encode(), _delivery(broken))
    assert refused.value.code == "malformed_webhook"
    other = json.dumps(
        {"object": "event", "id": "evt_2", "type": "batch.completed", "created_at": 1, "data": {}}
    )
    assert PhoneDoor(SECRET).unwrap(other.encode(), _delivery(other)).type == "batch.completed"
    with pytest.raises(WebhookRefused) as closed:
        PhoneDoor(None).unwrap(other.encode(), _delivery(other))
    assert closed.value.code == "webhooks_not_configured"


def _live_call(session_id: str = "live_u7_1", **data: object) -> str:
    place = PlaceCall(webhook_url="http://x", secret=SECRET, to="+18005551212")
    event = live_incoming_event(session_id, place)
    event["data"].update(data)
    return json.dumps(event)


def test_a_signed_live_announcement_is_read_as_the_providers_live_type() -> None:
    body = _live_call()
    event = PhoneDoor(SECRET).unwrap(body.encode(), _delivery(body))
    assert isinstance(event, LiveTransportIncomingWebhookEvent)
    assert event.data.session_id == "live_u7_1"


@pytest.mark.parametrize(
    "body",
    [
        _live_call(type="webrtc"),  # not a phone call: nothing to answer at the door
        _live_call(session_id=""),  # no session to accept
        _live_call(session_id="live_" + "x" * 300),  # longer than any session id
        json.dumps({"object": "event", "id": "evt_3", "type": "live.transport.incoming", "data": {}}),
    ],
)
def test_a_live_announcement_that_is_not_a_phone_call_with_a_session_is_refused(body: str) -> None:
    with pytest.raises(WebhookRefused) as refused:
        PhoneDoor(SECRET).unwrap(body.encode(), _delivery(body))
    assert refused.value.code == "malformed_webhook"


def test_a_forged_live_announcement_is_refused() -> None:
    body = _live_call()
    with pytest.raises(WebhookRefused) as refused:
        PhoneDoor(SECRET).unwrap(
            body.encode(), _delivery(body, secret="whsec_" + "d3Jvbmctc2VjcmV0LWZvci10ZXN0cw==")
        )
    assert refused.value.code == "invalid_signature"
