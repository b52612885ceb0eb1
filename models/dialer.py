"""Placing a call, in one transaction: the session is created and held, the call checked
(its trunk, the do-not-call list, the deployment's room to dial, counted under the dialer's own
lock, and its Live model's room, under the model's: `models.live_caps`), its row written, and
its creation and admission applied — which decides the dial. Used by `POST /v1/calls` and by a
campaign's dialer alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from models import live_caps, outbound
from models.applied import Applied
from models.sessions import LockedSession, new_session
from pipeline.admission import NO_LIVE_CAPS, LiveCaps
from pipeline.call.errors import NumberSuppressed, OutboundCapacity, TrunkNotFound, TrunkRequired
from pipeline.platform.config import Settings
from pipeline.privacy.sealing import DeploymentKey
from pipeline.session.state import OutboundCall, SessionState
from pipeline.session.wire import AdmissionBegun, SessionCreated


@dataclass(frozen=True)
class Capacity:
    """How many calls the deployment may have going out, and how many of its phone lines are
    kept for callers (`SWITCHBOARD_MAX_OUTBOUND`, `SWITCHBOARD_MAX_PHONE_CALLS`,
    `SWITCHBOARD_RESERVE_INBOUND`), and how many sessions each Live model may have in a call
    (`SWITCHBOARD_LIVE_MAX_SESSIONS`)."""

    max_outbound: int
    max_phone_calls: int
    reserve_inbound: int
    live_caps: LiveCaps = NO_LIVE_CAPS

    @classmethod
    def of(cls, settings: Settings) -> Capacity:
        """The deployment's capacity, as its settings say."""
        return cls(
            max_outbound=settings.max_outbound,
            max_phone_calls=settings.max_phone_calls,
            reserve_inbound=settings.reserve_inbound,
            live_caps=LiveCaps.of(settings),
        )


@dataclass(frozen=True)
class Placed:
    session_id: str
    state: SessionState
    applied: tuple[Applied, ...]


def place(
    *,
    namespace: str,
    session_id: str,
    gateway_id: str,
    created: SessionCreated,
    request_id: str,
    capacity: Capacity,
    now: float,
    publish: Callable[[LockedSession, Applied], None],
    keys: Sequence[DeploymentKey] = (),
    claimed: bool = False,
) -> Placed:
    """Create the session of a call going out and decide its dial (`publish` sends what it
    decided, under the lock, before the commit); `NumberSuppressed`, `OutboundCapacity`,
    `LiveModelAtCapacity` (its model's lock taken after the dialer's) or the trunk's refusal
    (`TrunkNotFound`, `TrunkRequired`) leave nothing. A campaign's call was `claimed` by its
    dialer already (the list, the room and its row were checked and written
    under the dialer's lock then): only its trunk is looked up again."""
    call = created.outbound
    if call is None:
        raise ValueError("a call placed needs its outbound part")
    with new_session(session_id, gateway_id, namespace, keys=keys) as session:
        execute = session.execute
        try:
            trunk = outbound.trunk_named(namespace, call.trunk or None, execute)
        except (TrunkNotFound, TrunkRequired):
            if not claimed:
                raise
            trunk = call.trunk  # the dial fails at the gateway, saying the trunk is gone
        if not claimed:
            _check(namespace, call.to, capacity, execute)
            model_full = live_caps.admission_refused(
                namespace, capacity.live_caps.cap_for(str(created.provider), created.model.id), execute
            )
            if model_full is not None:
                raise model_full
        placed: OutboundCall = call.model_copy(update={"trunk": trunk})
        if not claimed:
            outbound.record_call(
                execute,
                call_id=placed.id,
                namespace=namespace,
                session_id=session_id,
                to=placed.to,
                trunk=trunk,
            )
        applied = (
            session.apply_host(created.model_copy(update={"outbound": placed}), now),
            session.apply_host(AdmissionBegun(request_id=request_id), now),
        )
        for each in applied:
            publish(session, each)
        state = session.state
    return Placed(session_id=session_id, state=state, applied=applied)


def _check(namespace: str, to: str, capacity: Capacity, execute: Callable[..., Any]) -> None:
    """A call of `POST /v1/calls` is refused to a suppressed number, and when the deployment has
    no room to dial (counted under the dialer's lock, so two racing for the last place cannot
    both take it)."""
    if outbound.is_suppressed(namespace, to, execute):
        raise NumberSuppressed(f"{to} is on the do-not-call list")
    outbound.hold_the_dialer(namespace, execute)
    room = outbound.room_to_dial(
        namespace,
        execute,
        max_outbound=capacity.max_outbound,
        max_phone_calls=capacity.max_phone_calls,
        reserve_inbound=capacity.reserve_inbound,
    )
    if room <= 0:
        raise OutboundCapacity(
            f"the deployment has no room to dial now: at most {capacity.max_outbound} calls going out,"
            f" and {capacity.reserve_inbound} of {capacity.max_phone_calls} phone lines kept for callers"
        )
