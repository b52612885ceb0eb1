"""Provider adapters: call control (create, accept, reject, refer, hang up) and where the
sideband lives.

The real OpenAI endpoints and the local simulator speak the same protocol (PROTOCOL.md §1);
the adapters differ in their addresses, their key and what they may assume.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import openai

from pipeline.config import Settings
from pipeline.errors import ProviderUnavailable

# Each call-control request is one REST round trip; past this it is retried, then the provider
# is "down". A provider that stops answering holds only the requests waiting on it: they are
# awaited on the event loop, never on threads the rest of the gateway needs.
PROVIDER_HTTP_TIMEOUT_S = 10.0
# The SDK's own retries (with its backoff) for a connection error, a 408/409/429 or a 5xx.
PROVIDER_RETRIES = 1


@dataclass(frozen=True)
class CreatedCall:
    call_id: str
    sdp_answer: str


class ProviderCallError(ProviderUnavailable):
    """The provider answered call control with an error status."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"provider answered {status}: {body[:300]}")
        self.status = status


class ProviderRest(Protocol):
    """What the gateway needs of a provider's call control, and where its sideband is: one
    protocol for either provider (`OpenAIRealtime` here, `gateway.live_api.OpenAILive`)."""

    async def create_call(self, sdp_offer: str, session: dict[str, Any]) -> CreatedCall: ...

    async def accept(self, call_id: str, session: dict[str, Any]) -> None: ...

    async def reject(self, call_id: str, status_code: int) -> None: ...

    async def hangup(self, call_id: str) -> None: ...

    async def refer(self, call_id: str, target_uri: str) -> None: ...

    def sideband_url(self, call_id: str) -> str: ...

    def sideband_headers(self) -> dict[str, str]: ...

    async def close(self) -> None: ...


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
        async with _provider_errors("POST /realtime/calls"):
            raw = await self._client.realtime.calls.with_raw_response.create(
                sdp=sdp_offer,
                session=configuration,  # type: ignore[arg-type]
            )
        location = raw.headers.get("location", "")
        call_id = location.rstrip("/").rsplit("/", 1)[-1]
        if not call_id:
            raise ProviderCallError(raw.status_code, "no Location header with the call id")
        return CreatedCall(call_id=call_id, sdp_answer=raw.content.decode())

    async def accept(self, call_id: str, session: dict[str, Any]) -> None:
        """Answer a phone call with this session configuration (the SIP leg then rings)."""
        configuration = {"type": "realtime", "model": self.model, **session}
        async with _provider_errors(f"POST /realtime/calls/{call_id}/accept"):
            await self._client.realtime.calls.accept(call_id, **configuration)

    async def reject(self, call_id: str, status_code: int) -> None:
        """Turn a phone call away with this SIP status."""
        async with _provider_errors(f"POST /realtime/calls/{call_id}/reject"):
            await self._client.realtime.calls.reject(call_id, status_code=status_code)

    async def hangup(self, call_id: str) -> None:
        try:
            async with _provider_errors(f"POST /realtime/calls/{call_id}/hangup"):
                await self._client.realtime.calls.hangup(call_id)
        except ProviderCallError as error:
            # 404: the call ended already, which is what a hangup wants.
            if error.status != 404:
                raise

    async def refer(self, call_id: str, target_uri: str) -> None:
        """Transfer a phone call (the SIP Refer-To is `target_uri`); raises if it is refused."""
        async with _provider_errors(f"POST /realtime/calls/{call_id}/refer"):
            await self._client.realtime.calls.refer(call_id, target_uri=target_uri)

    def sideband_url(self, call_id: str) -> str:
        return f"{self.ws_url}/realtime?call_id={quote(call_id, safe='')}"

    def sideband_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"}

    async def close(self) -> None:
        await self._client.close()


@contextlib.asynccontextmanager
async def _provider_errors(what: str) -> AsyncIterator[None]:
    """The SDK's errors as Switchboard's: a refusal with its status, or the provider unreachable
    (named by the path only: the message reaches the session record, and the provider's address
    is nobody's business there)."""
    try:
        yield
    except openai.APIStatusError as error:
        raise ProviderCallError(error.status_code, error.message) from error
    except openai.APITimeoutError as error:
        raise ProviderUnavailable(f"{what}: timed out") from error
    except openai.APIConnectionError as error:
        raise ProviderUnavailable(f"{what}: {_reason(error)}") from error


def _reason(error: openai.APIConnectionError) -> str:
    """What went wrong in a few words, without addresses or errno numbers."""
    cause = error.__cause__
    while cause is not None and cause.__cause__ is not None and not isinstance(cause, OSError):
        cause = cause.__cause__
    if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
        return "connection refused"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return "unreachable"


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
