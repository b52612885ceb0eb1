"""Calls kept alive across gateways: a dead gateway's sessions taken over, a stopping one's
handed over, and the owners a gateway puts back in the liveness registry."""

from __future__ import annotations

import logging
from typing import Any

import dramatiq

from models.ownership import owners_of_unfinished, sessions_owned_by
from models.sessions import locked_session
from pipeline.admission import busy_for_handover, handover_peer
from pipeline.platform.names import ADMISSION_QUEUE, READS_QUEUE
from workers import runtime
from workers.actors.shared import (
    EVENT_POLICY,
    NEVER_RETRIED,
    REQUEST_POLICY,
    after_commit,
    answer_read,
    answer_request,
    deployment,
    publish,
)
from workers.liveness import gateways_alive, takeover_refusal_now
from workers.outages import waits_out_outages

logger = logging.getLogger(__name__)

_runtime = runtime.current()


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="take_over", **REQUEST_POLICY)
def take_over(request_id: str, gateway_id: str, dead_gateway: str, now: float) -> None:
    """A gateway died: its unfinished sessions are handed to the asking gateway, a message each
    (so a takeover of N sessions is N short transactions on any workers, never one message that
    runs N times as long). Answered with the sessions handed out."""

    def hand_out() -> tuple[int, dict[str, Any]]:
        refusal = _takeover_refusal(dead_gateway, gateway_id)
        if refusal is not None:
            return 409, {"error": {"code": "takeover_refused", "message": refusal}}
        owned = sessions_owned_by(deployment(), dead_gateway)
        for session_id in owned:
            take_over_session.send(
                session_id=session_id, dead_gateway=dead_gateway, gateway_id=gateway_id, now=now
            )
        return 200, {"dead_gateway": dead_gateway, "gateway": gateway_id, "sessions": owned}

    answer_request(request_id, gateway_id, hand_out)


@dramatiq.actor(
    queue_name=ADMISSION_QUEUE, actor_name="take_over_session", throws=NEVER_RETRIED, **EVENT_POLICY
)
@waits_out_outages()
def take_over_session(session_id: str, dead_gateway: str, gateway_id: str, now: float) -> None:
    """Move one session from a dead gateway to a live one, which re-opens its sideband. Checked
    under the row lock: the session still belongs to the dead gateway, which is still dead, and
    the new owner is alive (a replayed dead letter moved three live calls of a healthy gateway
    to one that did not exist)."""
    with locked_session(session_id, namespace=deployment()) as session:
        if session.owning_gateway != dead_gateway:
            return  # finished, or moved meanwhile
        refusal = _takeover_refusal(dead_gateway, gateway_id)
        if refusal is not None:
            logger.warning("takeover of %s refused: %s", session_id, refusal)
            return
        applied = session.take_over(gateway_id, now)
        publish(session, applied)
    after_commit(session_id, applied)


@dramatiq.actor(queue_name=ADMISSION_QUEUE, actor_name="hand_over_session", **REQUEST_POLICY)
def hand_over_session(request_id: str, gateway_id: str, session_id: str, now: float) -> None:
    """A stopping gateway hands one of its calls to a live peer, if the call is idle (an answer
    under way would be asked for again on the new sideband and heard twice): answered whether it
    moved, and if not, why (the gateway asks again)."""

    def hand_over() -> tuple[int, dict[str, Any]]:
        with locked_session(session_id, namespace=deployment()) as session:
            if session.owning_gateway != gateway_id or session.state.is_terminal:
                return 200, {"session_id": session_id, "moved": True}
            busy = busy_for_handover(session.state)
            if busy is not None:
                return 200, {"session_id": session_id, "moved": False, "reason": busy}
            client, namespace = _runtime.broker.client, _runtime.settings.broker_namespace
            peers = [peer for peer in gateways_alive(client, namespace) if peer != gateway_id]
            if not peers:
                return 200, {"session_id": session_id, "moved": False, "reason": "no_peer"}
            peer = handover_peer(session_id, peers)
            applied = session.take_over(peer, now, handed_over=True)
            publish(session, applied)
        after_commit(session_id, applied)
        return 200, {"session_id": session_id, "moved": True, "to": peer}

    answer_request(request_id, gateway_id, hand_over)


def _takeover_refusal(dead_gateway: str, new_gateway: str) -> str | None:
    client, namespace = _runtime.broker.client, _runtime.settings.broker_namespace
    return takeover_refusal_now(client, namespace, dead_gateway, new_gateway)


@dramatiq.actor(queue_name=READS_QUEUE, actor_name="session_owners", **REQUEST_POLICY)
def session_owners(request_id: str, gateway_id: str) -> None:
    """The gateways owning unfinished sessions of this deployment: a gateway puts them back in
    the liveness registry, which a Redis that restarted empty has lost."""
    namespace = _runtime.settings.broker_namespace
    answer_read(request_id, gateway_id, lambda: (200, {"gateways": owners_of_unfinished(namespace)}))
