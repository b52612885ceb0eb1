"""The Realtime API's REST adapter: call control (create, accept, reject, refer, hang up) and
where the sideband lives.

The real OpenAI endpoints and the local simulator speak the same protocol (PROTOCOL.md §1);
the adapters differ in their addresses, their key and what they may assume.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import openai

from gateway.providers.rest import (
    PROVIDER_HTTP_TIMEOUT_S,
    PROVIDER_RETRIES,
    CreatedCall,
    ProviderCallError,
    ProviderRest,
    provider_errors,
)
from pipeline.platform.config import Settings
from pipeline.platform.envelope import Trunk


class OpenAIRealtime:
    """The OpenAI Realtime API through the `openai` package: `realtime.calls.create|accept|
    reject|refer|hangup` (retries, timeouts and errors as the SDK defines them), and the
    sideband at `/realtime?call_id=…`."""

    def __init__(self, base_url: str, ws_url: str, api_key: str, model: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.ws_url = ws_url.rstrip("/")
        self._api_key = api_key
        self.model = model
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            websocket_base_url=self.ws_url,
            timeout=PROVIDER_HTTP_TIMEOUT_S,
            max_retries=PROVIDER_RETRIES,
        )

    async def create_call(self, sdp_offer: str, session: dict[str, Any]) -> CreatedCall:
        configuration = {"type": "realtime", "model": self.model, **session}
        async with provider_errors("POST /realtime/calls"):
            raw = await self._client.realtime.calls.with_raw_response.create(
                sdp=sdp_offer,
                session=configuration,  # type: ignore[arg-type]
            )
        location = raw.headers.get("location", "")
        call_id = location.rstrip("/").rsplit("/", 1)[-1]
        if not call_id:
            raise ProviderCallError(raw.status_code, "no Location header with the call id")
        return CreatedCall(call_id=call_id, sdp_answer=raw.content.decode())

    async def place_call(
        self, to: str, trunk: Trunk, session: dict[str, Any], *, idempotency_key: str
    ) -> str:
        # The Realtime API places no calls; a session that would is refused before a dial is
        # decided (Ability.OUTBOUND_CALLS), so this answers only a directive made by hand.
        raise ProviderCallError(400, "the Realtime API places no outbound calls")

    async def accept(self, call_id: str, session: dict[str, Any]) -> None:
        """Answer a phone call with this session configuration (the SIP leg then rings)."""
        configuration = {"type": "realtime", "model": self.model, **session}
        async with provider_errors(f"POST /realtime/calls/{call_id}/accept"):
            await self._client.realtime.calls.accept(call_id, **configuration)

    async def reject(self, call_id: str, status_code: int) -> None:
        """Turn a phone call away with this SIP status."""
        async with provider_errors(f"POST /realtime/calls/{call_id}/reject"):
            await self._client.realtime.calls.reject(call_id, status_code=status_code)

    async def hangup(self, call_id: str) -> None:
        try:
            async with provider_errors(f"POST /realtime/calls/{call_id}/hangup"):
                await self._client.realtime.calls.hangup(call_id)
        except ProviderCallError as error:
            # 404: the call ended already, which is what a hangup wants.
            if error.status != 404:
                raise

    async def refer(self, call_id: str, target_uri: str) -> None:
        """Transfer a phone call (the SIP Refer-To is `target_uri`); raises if it is refused."""
        async with provider_errors(f"POST /realtime/calls/{call_id}/refer"):
            await self._client.realtime.calls.refer(call_id, target_uri=target_uri)

    def sideband_url(self, call_id: str) -> str:
        return f"{self.ws_url}/realtime?call_id={quote(call_id, safe='')}"

    def sideband_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"}

    async def close(self) -> None:
        await self._client.close()


class SimulatedRealtime(OpenAIRealtime):
    """The local simulator (`python -m simulator`): the same protocol on loopback."""


def provider_from(settings: Settings) -> ProviderRest:
    if settings.provider == "openai":
        return OpenAIRealtime(
            settings.provider_base_url,
            settings.provider_ws_url,
            settings.provider_key,
            settings.provider_model,
        )
    return SimulatedRealtime(
        settings.provider_base_url, settings.provider_ws_url, settings.provider_key, settings.provider_model
    )
