"""Provider REST, whichever provider: the protocol both adapters answer (call control — create,
accept, reject, refer, hang up — and where the sideband lives), the call a create returns, and
the one way a provider's failure becomes Switchboard's typed error."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import openai

from pipeline.call.errors import ProviderUnavailable
from pipeline.platform.envelope import Trunk

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
    protocol for either provider (`realtime.OpenAIRealtime`, `live.OpenAILive`)."""

    async def create_call(self, sdp_offer: str, session: dict[str, Any]) -> CreatedCall: ...

    async def place_call(
        self, to: str, trunk: Trunk, session: dict[str, Any], *, idempotency_key: str
    ) -> str:
        """Dial `to` through `trunk` (a SIP call going out); the call's id. The provider is given
        `idempotency_key`, so the same dial asked twice is placed once where it honours it."""
        ...

    async def accept(self, call_id: str, session: dict[str, Any]) -> None: ...

    async def reject(self, call_id: str, status_code: int) -> None: ...

    async def hangup(self, call_id: str) -> None: ...

    async def refer(self, call_id: str, target_uri: str) -> None: ...

    def sideband_url(self, call_id: str) -> str: ...

    def sideband_headers(self) -> dict[str, str]: ...

    async def close(self) -> None: ...


@contextlib.asynccontextmanager
async def provider_errors(what: str) -> AsyncIterator[None]:
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
