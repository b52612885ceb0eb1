"""A provider that cannot create the call fails the session cleanly, with a typed 502."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from gateway.app import Gateway
from gateway.providers.realtime import SimulatedRealtime
from pipeline.platform.config import Settings
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from workers.broker import make_broker

# Port 1 (tcpmux) answers nothing here: the call creation fails at once.
UNREACHABLE = "http://127.0.0.1:1/v1"


def test_an_unreachable_provider_fails_the_session_with_502(stack: Stack, services: Services) -> None:
    """Connect answers 502 provider_unavailable; the session is failed with that reason and an
    incident (neither naming the provider's address), and a second connect is refused."""
    settings = Settings(
        gateway_id=f"gw-down-{uuid.uuid4().hex[:6]}",
        gateway_port=0,
        broker_namespace=stack.namespace,
        api_token=stack.api_token,
    )

    async def scenario() -> tuple[int, Any, Any, int]:
        broker = make_broker(services.redis_url, namespace=stack.namespace)
        provider = SimulatedRealtime(UNREACHABLE, "ws://127.0.0.1:1/v1", "sk", "gpt-realtime")
        gateway = Gateway(settings, services.redis_url, broker, provider)
        await gateway.start()
        try:
            client = Client(f"http://127.0.0.1:{gateway.http_port}", stack.api_token)
            session = await asyncio.to_thread(client.create_session, "Be brief.")
            status, answer = await asyncio.to_thread(
                client.request, "POST", f"/v1/sessions/{session['id']}/connect", {"sdp": "v=0"}
            )
            record = await asyncio.to_thread(client.session, str(session["id"]))
            again, _ = await asyncio.to_thread(
                client.request, "POST", f"/v1/sessions/{session['id']}/connect", {"sdp": "v=0"}
            )
            return status, answer, record, again
        finally:
            await gateway.stop()

    status, answer, record, again = asyncio.run(scenario())
    assert status == 502
    assert answer["error"]["code"] == "provider_unavailable"
    # Neither the answer nor the record says where the provider lives or the host's errno.
    for told in (answer["error"]["message"], record["incidents"][0]["summary"]):
        assert "127.0.0.1" not in told and "Errno" not in told, told
    assert (record["status"], record["end_reason"]) == ("failed", "provider_unavailable")
    assert [incident["code"] for incident in record["incidents"]] == ["provider_unavailable"]
    assert again == 409
