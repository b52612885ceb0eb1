"""Takeover of a dead gateway's sessions, on real PostgreSQL and Redis: handed out a message per
session, each checked under the row lock against who is really alive now."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from models.sessions import locked_session, new_session
from pipeline.platform.names import gateway_alive_key
from pipeline.session.wire import AdmissionBegun, CallAttached, SessionCreated
from tests.support.calls import GATEWAY, new_session_id
from tests.workers.conftest import drain


@pytest.fixture
def liveness(worker_runtime: Any) -> Iterator[tuple[redis.Redis, str, Callable[[str], None]]]:
    """Mark gateways alive (their liveness keys) for the test; the keys go afterwards."""
    client = worker_runtime.broker.client
    namespace = worker_runtime.settings.broker_namespace
    keys: list[str] = []

    def alive(gateway_id: str) -> None:
        key = gateway_alive_key(namespace, gateway_id)
        keys.append(key)
        client.set(key, "1", px=60_000)

    yield client, namespace, alive
    if keys:
        client.delete(*keys)


def _live_session_owned_by(gateway_id: str, namespace: str) -> str:
    session_id = new_session_id()
    with new_session(session_id, gateway_id, namespace) as session:
        session.apply_host(SessionCreated(instructions="Hi."), time.time())
    with locked_session(session_id) as session:
        session.apply_host(AdmissionBegun(), time.time())
        session.apply_host(CallAttached(call_id="rtc_x"), time.time())
    return session_id


def _owner(session_id: str) -> str:
    with locked_session(session_id) as session:
        return session.owning_gateway


def test_a_dead_gateways_sessions_move_to_a_live_one_a_message_each(
    worker_runtime: Any, control_inbox: Any, liveness: Any
) -> None:
    """take_over answers at once with the dead gateway's sessions, and each moves (its own
    message, under its own lock) to the live gateway that asked."""
    from workers.actors import take_over, take_over_session

    _, _, alive = liveness
    dead = f"gw-dead-{uuid.uuid4().hex[:6]}"
    alive(GATEWAY)
    sessions = [_live_session_owned_by(dead, worker_runtime.settings.broker_namespace) for _ in range(3)]
    take_over.fn(request_id="req_t", gateway_id=GATEWAY, dead_gateway=dead, now=time.time())
    (reply,) = [item for batch in drain(control_inbox) for item in batch["items"] if item["kind"] == "reply"]
    assert reply["status"] == 200 and sorted(reply["body"]["sessions"]) == sorted(sessions)
    assert [_owner(session_id) for session_id in sessions] == [dead] * 3
    for session_id in sessions:
        take_over_session.fn(session_id=session_id, dead_gateway=dead, gateway_id=GATEWAY, now=time.time())
    assert [_owner(session_id) for session_id in sessions] == [GATEWAY] * 3


def test_a_stale_takeover_of_a_healthy_gateway_moves_nothing(
    worker_runtime: Any, control_inbox: Any, liveness: Any
) -> None:
    """A takeover replayed while the 'dead' gateway is alive again is refused (409 for the
    request; a per-session message changes nothing), and so is one naming a new owner that
    does not exist — a replayed dead letter once moved a healthy gateway's calls to nowhere."""
    from workers.actors import take_over, take_over_session

    _, _, alive = liveness
    healthy = f"gw-healthy-{uuid.uuid4().hex[:6]}"
    gone = f"gw-gone-{uuid.uuid4().hex[:6]}"
    alive(healthy)
    alive(GATEWAY)
    session_id = _live_session_owned_by(healthy, worker_runtime.settings.broker_namespace)
    take_over.fn(request_id="req_stale", gateway_id=GATEWAY, dead_gateway=healthy, now=time.time())
    (reply,) = [item for batch in drain(control_inbox) for item in batch["items"] if item["kind"] == "reply"]
    assert (reply["status"], reply["body"]["error"]["code"]) == (409, "takeover_refused")
    take_over_session.fn(session_id=session_id, dead_gateway=healthy, gateway_id=GATEWAY, now=time.time())
    assert _owner(session_id) == healthy

    orphan = _live_session_owned_by(
        f"gw-dead-{uuid.uuid4().hex[:6]}", worker_runtime.settings.broker_namespace
    )
    with locked_session(orphan) as session:
        dead = session.owning_gateway
    take_over_session.fn(session_id=orphan, dead_gateway=dead, gateway_id=gone, now=time.time())
    assert _owner(orphan) == dead


def test_a_gateway_restarting_under_its_own_id_takes_its_sessions_back(
    worker_runtime: Any, control_inbox: Any, liveness: Any
) -> None:
    """The old owner and the new one are the same live id: the takeover holds."""
    from workers.actors import take_over_session

    _, _, alive = liveness
    restarted = f"gw-restarted-{uuid.uuid4().hex[:6]}"
    alive(restarted)
    session_id = _live_session_owned_by(restarted, worker_runtime.settings.broker_namespace)
    take_over_session.fn(session_id=session_id, dead_gateway=restarted, gateway_id=restarted, now=time.time())
    with locked_session(session_id) as session:
        assert session.state.generation == 2
    drain(control_inbox)


def test_dlq_says_what_replaying_a_stale_takeover_would_do(worker_runtime: Any, liveness: Any) -> None:
    """Before replaying a dead-lettered takeover, the operator is told it will be refused while
    the 'dead' gateway is alive, and what it moves when it really is dead."""
    import dramatiq

    from workers.dead_letters import DeadLetter, DeadLetters

    _, _, alive = liveness
    healthy = f"gw-healthy-{uuid.uuid4().hex[:6]}"
    alive(healthy)
    alive(GATEWAY)
    letters = DeadLetters(worker_runtime.broker)
    now_ms = int(time.time() * 1000)

    def letter(actor: str, dead: str) -> DeadLetter:
        kwargs: dict[str, Any] = {"dead_gateway": dead, "gateway_id": GATEWAY, "now": time.time()}
        if actor == "take_over":
            kwargs["request_id"] = "req_old"
        else:
            kwargs["session_id"] = "sess_x"
        message = dramatiq.Message(
            queue_name="admission", actor_name=actor, args=(), kwargs=kwargs, options={}
        )
        return DeadLetter(message, "admission", now_ms, "redis_id")

    for actor in ("take_over", "take_over_session"):
        stale = letters.outlook(letter(actor, healthy), now_ms)
        assert stale.startswith("nothing: the takeover will be refused") and healthy in stale, stale
        real = letters.outlook(letter(actor, "gw-truly-dead"), now_ms)
        assert real.startswith("moves") and GATEWAY in real, real


def test_the_owners_of_unfinished_sessions_are_named_for_the_registry(
    worker_runtime: Any, control_inbox: Any
) -> None:
    """session_owners names every gateway holding an unfinished session of this deployment, so
    one that died while Redis lost the liveness registry is noticed all the same."""
    from workers.actors import create_session, session_owners

    owner = f"gw-owner-{uuid.uuid4().hex[:6]}"
    session_id = new_session_id()
    create_session.fn(
        request_id="req_c",
        gateway_id=owner,
        session_id=session_id,
        spec={"instructions": "Hi."},
        now=time.time(),
    )
    drain(control_inbox)
    session_owners.fn(request_id="req_o", gateway_id=GATEWAY)
    (reply,) = [item for batch in drain(control_inbox) for item in batch["items"] if item["kind"] == "reply"]
    assert reply["status"] == 200 and owner in reply["body"]["gateways"]
