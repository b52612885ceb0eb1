"""What the workers send this gateway, carried out: each `ToGateway` batch taken from its control
queue, in order, without ever waiting on one call.

Controls go to each sideband's own writer; a sideband is opened (its provider's sans-I/O
`Sideband` behind the privacy boundary) when a worker says so; closes, hangups, transfers and
dials run as tasks of their own; key presses are kept for a collection in the call's boundary;
replies resolve the API requests waiting for them. What a sideband answers goes on to the
`ActionCarrier` (`gateway.sideband`); its opening and closing are numbered into the session's log
here, and the people watching the call are told through the `CallWatch` port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from gateway import tracing
from gateway.ports import CallWatch, Lifecycle
from gateway.providers.rest import ProviderCallError, ProviderRest
from gateway.rpc import WorkerRpc
from gateway.sideband import ActionHandler, SidebandSocket
from gateway.sink import EventSink
from gateway.tracing import CallTrace
from pipeline.call.errors import ProviderUnavailable
from pipeline.call.limits import ADMISSION_TIMEOUT_MS
from pipeline.call.sideband import Sideband
from pipeline.platform.envelope import (
    CloseCall,
    CollectDigits,
    OpenSideband,
    PlaceCall,
    Reply,
    SendControl,
    ToGateway,
    TransferCall,
    Trunk,
)
from pipeline.platform.releases import across_releases, first_report
from pipeline.privacy.boundary import Keypad, PrivateSideband, Redactor, Sealing
from pipeline.privacy.sealing import SealedValueUnreadable, new_session_key_pair, open_sealed
from pipeline.session.wire import SidebandClosed, SidebandConnected, TransferFinished, host_event

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Wing:
    """What the gateway holds of one provider: its REST, and the sans-I/O protocol each new
    sideband of its calls drives."""

    rest: ProviderRest
    new_sideband: Callable[[], Sideband]
    # The type of the wing's keypad presses, whose digits the privacy boundary masks.
    key_press_type: str
    # How its sidebands' spans read turns and responses off its events.
    call_trace: type[CallTrace]
    # The model its sessions talk to (what its sidebands' spans name).
    model: str


class DirectiveCarrier:
    """Carries out the batches the workers publish to this gateway. The sidebands it opens are
    kept in `held` (by session), which the composition root shares with whoever asks which
    calls this gateway holds; `wing_of` is the gateway's one choice of a session's provider."""

    def __init__(
        self,
        sink: EventSink,
        rpc: WorkerRpc,
        held: dict[str, SidebandSocket],
        wing_of: Callable[[str], Wing],
        watch: CallWatch,
        on_actions: ActionHandler,
        lifecycle: Lifecycle,
    ) -> None:
        self._sink = sink
        self._rpc = rpc
        self._held = held
        self._wing_of = wing_of
        self._watch = watch
        self._on_actions = on_actions
        self._lifecycle = lifecycle
        # A key pair of this process's own, made afresh at each start: a trunk's password comes
        # to it sealed to the public half (never in a directive, never readable in Redis), and
        # only this process's memory holds the private half.
        self._dial_private, self._dial_public = new_session_key_pair()

    def carry_out_taken(self, taken: list[bytes]) -> None:
        """Carry out each batch of a take, in order. Nothing here waits on a call: a stuck provider
        socket or an unanswered hangup must never hold up the other calls' controls."""
        for payload in taken:
            try:
                batch, dropped = across_releases(ToGateway, payload)
                if dropped and (line := first_report("control batch", dropped)):
                    logger.warning(line)
                self.carry_out(batch)
            except Exception:
                logger.exception("batch to the gateway failed")

    def carry_out(self, batch: ToGateway) -> None:
        if batch.applied_seq is not None:
            self._sink.applied(batch.session_id, batch.applied_seq)
        self._watch.log_written(batch.session_id)
        for item in batch.items:
            if isinstance(item, Reply):
                self._rpc.resolve(item)
            elif isinstance(item, SendControl):
                socket = self._held.get(batch.session_id)
                # A control for another generation belongs to a superseded sideband.
                sent = (
                    socket is not None
                    and socket.generation == batch.generation
                    and socket.send(item.id, item.control)
                )
                if sent and batch.traceparent is not None:
                    tracing.control_sent(batch.session_id, batch.traceparent, item.control)
            elif isinstance(item, OpenSideband):
                self._open_sideband(batch.session_id, batch.generation, item)
            elif isinstance(item, CloseCall):
                socket = self._held.pop(batch.session_id, None)
                self._lifecycle.spawn_task(
                    self._close_call(batch.session_id, socket, item), f"close-{batch.session_id}"
                )
            elif isinstance(item, CollectDigits):
                self._collect(batch.session_id, batch.generation, item)
            elif isinstance(item, TransferCall):
                self._lifecycle.spawn_task(
                    self._transfer(batch.session_id, batch.generation, item), f"refer-{batch.session_id}"
                )
            elif isinstance(item, PlaceCall):
                self._lifecycle.spawn_task(
                    self._dial(batch.session_id, batch.generation, item), f"dial-{batch.session_id}"
                )

    # ── sidebands ──────────────────────────────────────────────────────────────────────

    def _open_sideband(self, session_id: str, generation: int, directive: OpenSideband) -> None:
        if self._lifecycle.stopping:
            # A stopping gateway opens nothing (its sink is closing): the peer that takes the
            # call over opens it. (Opened anyway, its failure could not be logged: "the sink
            # thread is shut down" on every Ctrl-C of a Procfile during a call.)
            return
        existing = self._held.get(session_id)
        if existing is not None and existing.generation == generation:
            return
        wing = self._wing_of(directive.provider)
        # The privacy boundary: what the wing answers is redacted before it is numbered, queued
        # or shown (pipeline.privacy.boundary).
        sideband = PrivateSideband(
            wing.new_sideband(),
            Redactor(directive.redact, sealing=_sealing(session_id, directive)),
            is_watched=lambda: self._watch.is_watched(session_id),
            keypad=Keypad(wing.key_press_type, frozenset(directive.keys)),
        )
        socket = SidebandSocket(
            session_id,
            directive.call_id,
            generation,
            wing.rest.sideband_url(directive.call_id),
            wing.rest.sideband_headers(),
            sideband,
            self._on_actions,
            self._on_host_event,
            self._on_sent,
        )
        socket.model = directive.model or wing.model
        socket.route_id = directive.route_id
        socket.trace_kind = wing.call_trace
        self._held[session_id] = socket
        socket.start()

    def _on_host_event(self, socket: SidebandSocket, event: SidebandConnected | SidebandClosed) -> None:
        if isinstance(event, SidebandClosed) and self._held.get(socket.session_id) is socket:
            del self._held[socket.session_id]
        traceparent = None
        if isinstance(event, SidebandConnected):
            socket.trace = tracing.call_opened(
                socket.session_id, socket.generation, socket.model, socket.trace_kind
            )
        if socket.trace is not None:
            traceparent = socket.trace.host_event()
            if isinstance(event, SidebandClosed):
                socket.trace.close()
                socket.trace = None
        self._sink.submit_event(
            socket.session_id, socket.generation, host_event(event), time.time(), traceparent=traceparent
        )

    def _on_sent(self, socket: SidebandSocket, control: dict[str, Any]) -> None:
        self._watch.control_sent(socket.session_id, control)

    async def _close_call(self, session_id: str, socket: SidebandSocket | None, directive: CloseCall) -> None:
        wait_s = socket.sideband.closed_by_provider_within_s if socket is not None else None
        if socket is not None and wait_s is not None and socket.task is not None:
            # A provider that closes the sideband itself once the call is ended (Live answers
            # the `session.close` sent before this directive with `session.closed`, the final
            # usage, and its own close) is waited for, then closed from here.
            socket.closing = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(socket.task), wait_s)
        if socket is not None:
            await socket.close()
        if directive.hangup and directive.call_id:
            try:
                await self._wing_of(directive.provider).rest.hangup(directive.call_id)
            except ProviderUnavailable as error:
                logger.warning("hangup of %s failed: %s", directive.call_id, error)
        await self._watch.announce_end(session_id, directive.reason)
        self._sink.forget(session_id)

    # ── the caller's keypad, transfers and calls placed out ─────────────────────────────

    def _collect(self, session_id: str, generation: int, directive: CollectDigits) -> None:
        """Start or stop keeping the caller's key presses in the call's privacy boundary. A
        sideband of another generation holds nothing of this collection: the workers end it
        when the new one connects."""
        socket = self._held.get(session_id)
        if socket is None or socket.generation != generation:
            return
        boundary = socket.sideband
        if not isinstance(boundary, PrivateSideband):
            return
        if directive.stop:
            boundary.stop_collecting(directive.number)
        else:
            boundary.collect(directive.number, directive.max, directive.end)

    async def _transfer(self, session_id: str, generation: int, directive: TransferCall) -> None:
        """Ask the provider to transfer the call, once; its answer goes into the session's log."""
        try:
            if not await asyncio.wrap_future(self._sink.counts.first_time(session_id, directive.id)):
                return
        except redis.RedisError as error:
            # Not asked twice, and not lost: the outcome says so and the call goes on.
            finished = TransferFinished(to=directive.to, ok=False, error=f"not asked: {error}"[:300])
            self._sink.submit_event(session_id, generation, host_event(finished), time.time())
            return
        try:
            await self._wing_of(directive.provider).rest.refer(directive.call_id, directive.to)
            finished = TransferFinished(to=directive.to, ok=True)
        except ProviderUnavailable as error:
            logger.warning("transfer of %s to %s failed: %s", directive.call_id, directive.to, error)
            finished = TransferFinished(to=directive.to, ok=False, error=str(error)[:300])
        self._sink.submit_event(session_id, generation, host_event(finished), time.time())

    async def _dial(self, session_id: str, generation: int, directive: PlaceCall) -> None:
        """Place the call, once: claimed by its id before the provider is asked (a batch published
        again dials nothing), and with that id as the provider's idempotency key. The call's
        sideband is opened from here as soon as the provider answers (it replays nothing to a
        late one); the workers are told the call's id, or why it was not placed."""
        committed, password = await self._dial_committed(session_id, directive.call)
        if not committed:
            return
        try:
            # Claimed per generation: a gateway that takes a session over while its call was
            # being dialled dials again as a new generation, under the same provider
            # idempotency key (the call's id), so a call the dead gateway placed is not placed twice.
            claim = f"dial:{directive.call}:{generation}"
            if not await asyncio.wrap_future(self._sink.counts.first_time(session_id, claim)):
                return
        except redis.RedisError as error:
            # Not placed (so never twice): the call fails, saying why.
            await self._dial_failed(session_id, "dial_not_claimed", f"the dial could not be claimed: {error}")
            return
        if directive.trunk is None or password is None:
            detail = "the call's trunk is gone, or its password does not open"
            await self._dial_failed(session_id, "trunk_not_found", detail)
            return
        trunk = Trunk(**directive.trunk.model_dump(), password=password)
        try:
            call_id = await self._wing_of(directive.provider).rest.place_call(
                directive.to, trunk, directive.session, idempotency_key=directive.call
            )
        except ProviderUnavailable as error:
            code = "dial_refused" if isinstance(error, ProviderCallError) else "provider_unavailable"
            logger.warning("dial of %s for %s failed: %s", directive.call, session_id, error)
            await self._dial_failed(session_id, code, str(error))
            return
        if directive.sideband is not None:
            # The attach's own directive, when a worker applies it, finds this sideband open.
            self._open_sideband(
                session_id, generation, directive.sideband.model_copy(update={"call_id": call_id})
            )
        # A request not answered in time is still queued, and applied when a worker takes it.
        status, _ = await self._rpc.call(
            "attach_call", session_id=session_id, call_id=call_id, now=time.time(), medium="sip"
        )
        if status != 200:
            logger.warning("attach of dialled call %s for %s answered %s", call_id, session_id, status)

    async def _dial_committed(self, session_id: str, call: str) -> tuple[bool, str | None]:
        """Whether the decision to dial `call` was committed and still stands, and its trunk's
        password (None: the trunk is gone or its password does not open), sealed by the worker
        to this gateway's dial key and opened here. A worker publishes the dial before its
        transaction commits; one killed in between leaves a directive no session stands behind,
        and the decision is made again under the same ids: that one dials. Asked again while no
        worker answers (a worker killed holding the question), for as long as the session could
        still connect: waiting costs a delay, never a call."""
        give_up_at = time.monotonic() + ADMISSION_TIMEOUT_MS / 1000
        dial_key = base64.b64encode(self._dial_public).decode()
        while True:
            status, body = await self._rpc.call(
                "dial_committed", session_id=session_id, call_id=call, dial_key=dial_key
            )
            if status == 200:
                sealed = body.get("password")
                if sealed is None:
                    return True, None
                try:
                    return True, open_sealed(sealed, private_key=self._dial_private, session_id=session_id)
                except SealedValueUnreadable:
                    return True, None
            if status != 503 or time.monotonic() >= give_up_at:
                logger.info("dial of %s for %s not carried out: %s %s", call, session_id, status, body)
                return False, None

    async def _dial_failed(self, session_id: str, code: str, detail: str) -> None:
        status, _ = await self._rpc.call(
            "admission_failed", session_id=session_id, code=code, detail=detail[:500], now=time.time()
        )
        if status != 200:
            logger.warning("dial failure of %s (%s) answered %s", session_id, code, status)


def _sealing(session_id: str, directive: OpenSideband) -> Sealing | None:
    """What the boundary seals on this sideband: the tools' sensitive parameters, with the
    session's public key (the gateway holds no key that opens anything)."""
    if not directive.sealed:
        return None
    public = base64.urlsafe_b64decode(directive.sealing_key) if directive.sealing_key else None
    parameters = {tool: frozenset(names) for tool, names in directive.sealed.items()}
    return Sealing(session_id, public, parameters)
