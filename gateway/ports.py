"""What the gateway's parts need of each other: each route module (`gateway/routes/`) and the SIP
front door (`gateway.phone`) of the gateway's parts, the directives (`gateway.directives`) of its
lifecycle and of the people watching its calls.

A Protocol per need (the worker RPC, the event sink, the calls held here, the watchers, the
providers' call control, the counters), and a port per route module made of the needs it uses,
so that a route module names only what it calls. `gateway.app.Gateway` is the composition root:
it builds the parts and hands each only the narrow port it uses, so none imports `gateway.app`
(which imports them). `Gateway` satisfies `ApiPort` (every route module's port at once, which
the route table is served through), `PhonePort` and `Lifecycle` structurally;
`gateway.held_calls.SidebandsHeld` satisfies `HeldCalls`, `gateway.counters.GatewayCounters`
`Counting`, `gateway.app.Wings` `ProviderRests` and `gateway.watch.WatchedSessions` `CallWatch`
and `Listening`: mypy checks them where `build_api(self)`, `answer_phone_call(…)` and
`DirectiveCarrier(…)` are called, and where a route module's handler enters the route table
(typed by `ApiPort`). The attributes are read-only here: no part sets them.
"""

from __future__ import annotations

from typing import Any, Protocol

from openai.types.webhooks import LiveTransportIncomingWebhookEvent, RealtimeCallIncomingWebhookEvent
from starlette.datastructures import Headers
from starlette.websockets import WebSocket

from gateway.keys import KeyRing
from gateway.metrics import GatewayMetrics
from gateway.providers.rest import ProviderRest
from gateway.rpc import WorkerRpc
from gateway.sink import EventSink
from pipeline.model_catalog.entries import Catalog
from pipeline.privacy.boundary import Redactor

# ── the needs ──────────────────────────────────────────────────────────────────────────


class HeldCalls(Protocol):
    """The calls whose sideband this gateway holds (`gateway.held_calls.SidebandsHeld`); each
    answers None for a call held elsewhere, or by nobody."""

    def generation(self, session_id: str) -> int | None:
        """The generation of the call's sideband."""
        ...

    def playback(self, session_id: str) -> dict[str, Any] | None:
        """What the caller is hearing now (None also when nothing plays)."""
        ...

    def redactor(self, session_id: str) -> Redactor | None:
        """The redaction of the call's privacy boundary."""
        ...


class Listening(Protocol):
    """The watchers' streams (`gateway.watch.WatchedSessions`)."""

    async def listen(self, session_id: str, websocket: WebSocket) -> None:
        """Stream a session's live messages to an accepted listener."""
        ...


class ProviderRests(Protocol):
    """The providers' call control (`gateway.app.Wings`)."""

    def rest_of(self, provider: str) -> ProviderRest:
        """The call control of the provider a session or a route names."""
        ...


class Counting(Protocol):
    """What the API and the front door count (`gateway.counters.GatewayCounters`)."""

    def count_command(self, command: str, status: int) -> None: ...

    def count_webhook(self, outcome: str) -> None: ...

    def count_refused_webhook(self, code: str) -> None: ...

    async def refused_webhooks(self) -> dict[str, int]: ...

    def refused_handshake(self, reason: str, path: str, client: str) -> None: ...


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


class Workers(Protocol):
    """The worker RPC: a request to an admission actor, answered (every route module but the
    service's)."""

    @property
    def rpc(self) -> WorkerRpc: ...


class WatchSecret(Protocol):
    """The secret live tokens are minted and checked with."""

    @property
    def watch_secret(self) -> bytes: ...


class PhonePort(Workers, Protocol):
    """What answering a phone call (`gateway.phone.answer_phone_call`) needs of the gateway."""

    @property
    def wings(self) -> ProviderRests: ...

    @property
    def counters(self) -> Counting: ...

    def spawn_task(self, work: Any, name: str) -> None: ...


# ── a port per route module ────────────────────────────────────────────────────────────


class ServicePort(Protocol):
    """What `gateway/routes/service.py` calls (and the route table, which refuses a new call
    while the gateway drains)."""

    @property
    def gateway_id(self) -> str: ...

    @property
    def metrics(self) -> GatewayMetrics | None: ...

    @property
    def draining(self) -> bool: ...

    def readiness(self) -> str | None: ...


class CallsPort(Workers, WatchSecret, Protocol):
    """What `gateway/routes/calls.py` calls: a call placed out answers its live credentials."""


class SessionsPort(Workers, WatchSecret, Protocol):
    """What `gateway/routes/sessions.py` calls."""

    @property
    def keyring(self) -> KeyRing: ...

    @property
    def wings(self) -> ProviderRests: ...

    @property
    def counters(self) -> Counting: ...

    @property
    def watched(self) -> Listening: ...


class LinePort(Workers, Protocol):
    """What `gateway/routes/line.py` calls."""

    @property
    def gateway_id(self) -> str: ...

    @property
    def sink(self) -> EventSink: ...

    @property
    def held(self) -> HeldCalls: ...

    @property
    def counters(self) -> Counting: ...


class PhoneRoutesPort(PhonePort, Protocol):
    """What `gateway/routes/phone.py` calls."""

    @property
    def phone_door(self) -> WebhookDoor: ...


class ModelsPort(Protocol):
    """What `gateway/routes/models.py` calls."""

    @property
    def catalog(self) -> Catalog: ...


class ApiPort(ServicePort, CallsPort, SessionsPort, LinePort, PhoneRoutesPort, ModelsPort, Protocol):
    """What the route table (`gateway.api.build_api`) is served through: every route module's
    port at once."""


# ── the directives ─────────────────────────────────────────────────────────────────────


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
