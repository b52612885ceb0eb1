"""Provider adapters: call control (create, hang up) and where the sideband lives.

The real OpenAI endpoints and the local simulator speak the same protocol (PROTOCOL.md §1);
the adapters differ in their addresses, their key and what they may assume.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from pipeline.config import Settings
from pipeline.errors import ProviderUnavailable

# Call creation and hangup are one REST round trip each; past this the provider is "down".
PROVIDER_HTTP_TIMEOUT_S = 10.0
# Provider REST runs on threads of its own: a provider that stops answering holds these, and
# never the threads the rest of the gateway needs.
PROVIDER_REST_THREADS = 16


@dataclass(frozen=True)
class CreatedCall:
    call_id: str
    sdp_answer: str


class ProviderCallError(ProviderUnavailable):
    """The provider answered call control with an error status."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"provider answered {status}: {body[:300]}")
        self.status = status


class RealtimeProvider(Protocol):
    """What the gateway needs of a provider."""

    async def create_call(self, sdp_offer: str, session: dict[str, Any]) -> CreatedCall: ...

    async def hangup(self, call_id: str) -> None: ...

    async def refer(self, call_id: str, target_uri: str) -> None: ...

    def sideband_url(self, call_id: str) -> str: ...

    def sideband_headers(self) -> dict[str, str]: ...

    def close(self) -> None: ...


class OpenAIRealtime:
    """The OpenAI Realtime API: `POST /realtime/calls` (multipart SDP + session), hangup,
    and the sideband at `/realtime?call_id=…`."""

    def __init__(self, base_url: str, ws_url: str, api_key: str, model: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.ws_url = ws_url.rstrip("/")
        self._api_key = api_key
        self.model = model
        self._rest = ThreadPoolExecutor(PROVIDER_REST_THREADS, thread_name_prefix="provider-rest")

    async def create_call(self, sdp_offer: str, session: dict[str, Any]) -> CreatedCall:
        configuration = {"type": "realtime", "model": self.model, **session}
        boundary = f"switchboard-{uuid.uuid4().hex}"
        body = _multipart(
            boundary,
            [
                ("sdp", "application/sdp", sdp_offer),
                ("session", "application/json", json.dumps(configuration)),
            ],
        )
        status, headers, answer = await self._in_rest_thread(
            "POST",
            "/realtime/calls",
            body,
            {"Content-Type": f"multipart/form-data; boundary={boundary}", "Accept": "application/sdp"},
        )
        if status != 201:
            raise ProviderCallError(status, answer.decode(errors="replace"))
        location = headers.get("location", "")
        call_id = location.rstrip("/").rsplit("/", 1)[-1]
        if not call_id:
            raise ProviderCallError(status, "no Location header with the call id")
        return CreatedCall(call_id=call_id, sdp_answer=answer.decode())

    async def hangup(self, call_id: str) -> None:
        status, _, body = await self._in_rest_thread(
            "POST",
            f"/realtime/calls/{quote(call_id, safe='')}/hangup",
            b"",
            {"Content-Type": "application/json"},
        )
        # 404: the call ended already, which is what a hangup wants.
        if status not in (200, 204, 404):
            raise ProviderCallError(status, body.decode(errors="replace"))

    async def refer(self, call_id: str, target_uri: str) -> None:
        """Transfer a phone call (the SIP Refer-To is `target_uri`); raises if it is refused."""
        status, _, body = await self._in_rest_thread(
            "POST",
            f"/realtime/calls/{quote(call_id, safe='')}/refer",
            json.dumps({"target_uri": target_uri}).encode(),
            {"Content-Type": "application/json"},
        )
        if status not in (200, 204):
            raise ProviderCallError(status, body.decode(errors="replace"))

    def sideband_url(self, call_id: str) -> str:
        return f"{self.ws_url}/realtime?call_id={quote(call_id, safe='')}"

    def sideband_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"}

    def close(self) -> None:
        self._rest.shutdown(wait=False, cancel_futures=True)

    async def _in_rest_thread(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._rest, self._request, method, path, body, headers)

    def _request(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(
            f"{self.base_url}{path}", data=body, method=method, headers={**headers, **self.sideband_headers()}
        )
        try:
            with urllib.request.urlopen(request, timeout=PROVIDER_HTTP_TIMEOUT_S) as response:
                return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
        except urllib.error.HTTPError as error:
            return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()
        except (urllib.error.URLError, OSError) as error:
            # Named by the path only: the message reaches the session record, and the
            # provider's address and the host's errno are nobody's business there.
            raise ProviderUnavailable(f"{method} {path}: {_reason(error)}") from error


class SimulatedRealtime(OpenAIRealtime):
    """The local simulator (`python -m simulator`): the same protocol on loopback."""


def provider_from(settings: Settings) -> RealtimeProvider:
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


def _reason(error: urllib.error.URLError | OSError) -> str:
    """What went wrong in a few words, without addresses or errno numbers."""
    cause = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(cause, TimeoutError):
        return "timed out"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return type(cause).__name__ if not isinstance(cause, str) else "unreachable"


def _multipart(boundary: str, parts: list[tuple[str, str, str]]) -> bytes:
    chunks = []
    for name, content_type, content in parts:
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n{content}\r\n"
        )
    chunks.append(f"--{boundary}--\r\n")
    return "".join(chunks).encode()
