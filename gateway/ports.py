"""What the gateway's parts need of each other: the API (`gateway.api`) and the SIP front door
(`gateway.phone`) of the gateway, the directives (`gateway.directives`) of its lifecycle and of
the people watching its calls.

`gateway.app.Gateway` is the composition root: it builds the parts and hands each only the
narrow port it uses, so none imports `gateway.app` (which imports them). `Gateway` satisfies
`ApiPort`, `PhonePort` and `Lifecycle` structurally, and `gateway.watch.WatchedSessions`
satisfies `CallWatch`: mypy checks them where `build_api(self)`, `answer_call(self, …)` and
`DirectiveCarrier(…)` are called. The attributes are read-only here: no part sets them.
"""

from __future__ import annotations

from typing import Any, Protocol

from openai.types.webhooks import LiveTransportIncomingWebhookEvent, RealtimeCallIncomingWebhookEvent
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.websockets import WebSocket

from gateway.keys import KeyRing
from gateway.metrics import GatewayMetrics
from gateway.providers.rest import ProviderRest
from gateway.rpc import WorkerRpc
from gateway.sink import EventSink
from pipeline.privacy.boundary import Redactor


class WebhookEvent(Protocol):
    """A delivery's event that announces no call: known by its id and type alone."""

    @property
    def id(self) -> str: ...

    @property
    def type(self) -> str: ...


class WebhookDoor(Protocol):
    """What the API needs of the front door (`gateway.phone.PhoneDoor`): a delivery read, its
    signature checked (`gateway.phone.WebhookRefused` otherwise)."""

    def unwrap(
        self, body: bytes, headers: Headers
    ) -> RealtimeCallIncomingWebhookEvent | LiveTransportIncomingWebhookEvent | WebhookEvent: ...


class PhonePort(Protocol):
    """What answering a phone call (`gateway.phone.answer_call`) needs of the gateway."""

    @property
    def rpc(self) -> WorkerRpc: ...

    def rest_of(self, provider: str) -> ProviderRest:
        """The call control of the provider a session or a route names."""
        ...

    def count_webhook(self, outcome: str) -> None: ...

    def spawn_task(self, work: Any, name: str) -> None: ...


class ApiPort(Protocol):
    """What the HTTP API and the watchers' stream (`gateway.api.build_api`) need of the gateway."""

    @property
    def gateway_id(self) -> str: ...

    @property
    def rpc(self) -> WorkerRpc: ...

    @property
    def sink(self) -> EventSink: ...

    @property
    def watch_secret(self) -> bytes: ...

    @property
    def metrics(self) -> GatewayMetrics | None: ...

    @property
    def keyring(self) -> KeyRing: ...

    def rest_of(self, provider: str) -> ProviderRest:
        """The call control of the provider a session or a route names."""
        ...

    @property
    def phone_door(self) -> WebhookDoor: ...

    async def answer_phone_call(
        self, webhook_id: str, call_id: str, sip_headers: list[Any], provider: str = "realtime"
    ) -> Response: ...

    def count_refused_webhook(self, code: str) -> None: ...

    async def refused_webhooks(self) -> dict[str, int]: ...

    def count_command(self, command: str, status: int) -> None: ...

    def refused_handshake(self, reason: str, path: str, client: str) -> None: ...

    @property
    def draining(self) -> bool: ...

    def readiness(self) -> str | None: ...

    def held_generation(self, session_id: str) -> int | None: ...

    def playback(self, session_id: str) -> dict[str, Any] | None: ...

    def redactor_of(self, session_id: str) -> Redactor | None: ...

    async def listen(self, session_id: str, websocket: WebSocket) -> None: ...


class Lifecycle(Protocol):
    """What carrying out the workers' batches (`gateway.directives`) needs of the gateway's
    lifecycle."""

    @property
    def stopping(self) -> bool:
        """Whether the gateway is stopping (it opens no new sideband)."""
        ...

    def spawn_task(self, work: Any, name: str) -> None:
        """Run `work` as a task of the gateway's (cancelled when it stops)."""
        ...


class CallWatch(Protocol):
    """What carrying out the workers' batches (`gateway.directives`) tells the people watching
    a call (`gateway.watch.WatchedSessions`)."""

    def is_watched(self, session_id: str) -> bool: ...

    def control_sent(self, session_id: str, control: dict[str, Any]) -> None: ...

    def log_written(self, session_id: str) -> None: ...

    async def announce_end(self, session_id: str, reason: str) -> None: ...
