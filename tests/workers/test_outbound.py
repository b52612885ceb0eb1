"""Calls going out, on real PostgreSQL and Redis: a dial is confirmed only as its committed
decision stands."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from models.applied import Applied
from models.db import database
from models.sessions import LockedSession
from pipeline.platform.envelope import PlaceCall
from pipeline.session.wire import SessionCreated
from tests.support.calls import GATEWAY, new_session_id
from tests.support.waiting import wait_for
from tests.workers.conftest import drain


def test_a_dial_is_confirmed_only_once_its_decision_is_committed(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """The gateway asks before it dials. Asked while the placing transaction is still open, the
    answer waits for it: a placing that never commits (its worker killed after publishing the
    dial) is answered 404, and dials nobody; the placing made again under the same ids is
    answered 200; once the session is over, 409."""
    from models import dialer, outbound
    from pipeline.privacy.sealing import DeploymentKey
    from pipeline.session.state import OutboundCall
    from workers.actors import dial_committed, session_timer

    outbound.use_keys([DeploymentKey.generate()])
    # The worker's own deployment: its actors find only their deployment's sessions.
    namespace = worker_runtime.settings.broker_namespace
    outbound.add_trunk(namespace, "main", "sips:trunk.example.com", "agent", "pw", "+12125550100")
    session_id, call_id = new_session_id(), f"call_{uuid.uuid4().hex}"
    answered: list[None] = []

    def ask(request_id: str) -> None:
        try:
            dial_committed.fn(
                request_id=request_id, gateway_id=GATEWAY, session_id=session_id, call_id=call_id
            )
            answered.append(None)
        finally:
            database.close()

    def place(publish: Any) -> None:
        dialer.place(
            namespace=namespace,
            session_id=session_id,
            gateway_id=GATEWAY,
            created=SessionCreated(
                instructions="Remind them.",
                provider="live",
                outbound=OutboundCall(id=call_id, to="+15550100001", trunk=""),
            ),
            request_id=f"req_{uuid.uuid4().hex}",
            capacity=dialer.Capacity(max_outbound=10, max_phone_calls=10, reserve_inbound=0),
            now=time.time(),
            publish=publish,
        )

    class Killed(Exception):
        """The placing worker, gone between publishing the dial and committing."""

    asking = threading.Thread(target=ask, args=("req_lost",))

    def killed_after_publishing(session: LockedSession, applied: Applied) -> None:
        if not any(isinstance(item, PlaceCall) for item in applied.to_gateway):
            return
        asking.start()

        def blocked() -> bool:
            if answered:
                return True
            session.execute("SELECT pg_stat_clear_snapshot()")
            waiting = session.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE %s",
                (f"%{session_id}%",),
            )
            return waiting.fetchone() is not None

        wait_for(blocked, "the question to wait for the placing transaction")
        assert not answered, "answered before the placing transaction ended"
        raise Killed

    with pytest.raises(Killed):
        place(killed_after_publishing)
    asking.join()
    place(lambda _session, _applied: None)
    ask("req_standing")
    session_timer.fn(session_id=session_id, name="admission_timeout")
    ask("req_over")

    replies = {
        item["request_id"]: (item["status"], item["body"].get("error", {}).get("code"))
        for batch in drain(control_inbox)
        for item in batch["items"]
        if item["kind"] == "reply"
    }
    assert replies == {
        "req_lost": (404, "session_not_found"),
        "req_standing": (200, None),
        "req_over": (409, "dial_not_wanted"),
    }
