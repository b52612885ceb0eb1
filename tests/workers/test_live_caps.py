"""An app's connect counted against its Live model's cap by the admission actor, on real
PostgreSQL and Redis: the next connect on a full model is refused 503 with the model and the
cap, and the session stays created to connect later; each model has its own cap; a call ending
frees its place; connects racing for the last place admit one; a model without a cap is never
refused."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from models.sessions import locked_session
from pipeline.session.state import Phase
from pipeline.session.wire import EndRequested
from tests.support.calls import GATEWAY, new_session_id
from tests.workers.conftest import ControlInbox, drain


@pytest.fixture
def capped(worker_runtime: Any, control_inbox: ControlInbox) -> Iterator[Any]:
    """The worker's settings with gpt-live-1.1 capped at one session in a call, in a deployment
    of the test's own (so no other test's calls are counted); replies still reach the inbox."""
    original = worker_runtime.settings
    worker_runtime.settings = original.model_copy(
        update={
            "live_max_sessions": {"gpt-live-1.1": 1},
            "broker_namespace": f"{original.broker_namespace}-caps-{uuid.uuid4().hex[:6]}",
        }
    )
    try:
        yield worker_runtime
    finally:
        worker_runtime.settings = original


def _created(model: str | None = "gpt-live-1.1", provider: str = "live") -> str:
    from workers.actors import create_session

    session_id = new_session_id()
    spec: dict[str, Any] = {"instructions": "Hi.", "provider": provider}
    if model is not None:
        spec["model"] = model
    create_session.fn(
        request_id=f"req_{uuid.uuid4().hex}",
        gateway_id=GATEWAY,
        session_id=session_id,
        spec=spec,
        now=time.time(),
    )
    return session_id


def _connect(session_id: str, inbox: ControlInbox) -> tuple[int, dict[str, Any]]:
    from workers.actors import begin_admission

    request_id = f"req_{uuid.uuid4().hex}"
    begin_admission.fn(request_id=request_id, gateway_id=GATEWAY, session_id=session_id, now=time.time())
    replies = [
        item
        for batch in drain(inbox)
        for item in batch["items"]
        if item["kind"] == "reply" and item["request_id"] == request_id
    ]
    [reply] = replies
    return int(reply["status"]), dict(reply["body"])


def _phase(session_id: str, namespace: str) -> Phase:
    with locked_session(session_id, namespace=namespace) as session:
        return session.state.phase


def test_the_next_connect_on_a_full_model_is_refused_503_and_the_other_model_still_connects(
    capped: Any, control_inbox: ControlInbox
) -> None:
    """gpt-live-1.1 capped at one: its second connect is refused 503 `live_model_at_capacity`
    naming the model and the cap, and stays created; a gpt-live-1 session, of a cap of its own
    (none), connects; once the first call ends, the refused session connects."""
    namespace = capped.settings.broker_namespace
    first, second, other = _created(), _created(), _created(model="gpt-live-1")
    drain(control_inbox)

    assert _connect(first, control_inbox)[0] == 200
    status, body = _connect(second, control_inbox)
    assert status == 503
    assert body["error"]["code"] == "live_model_at_capacity"
    assert (body["error"]["model"], body["error"]["cap"]) == ("gpt-live-1.1", 1)
    assert _phase(second, namespace) is Phase.CREATED
    status, body = _connect(other, control_inbox)
    assert (status, body["model"]) == (200, "gpt-live-1")

    with locked_session(first, namespace=namespace) as session:
        session.apply_host(EndRequested(), time.time())
    status, body = _connect(second, control_inbox)
    assert (status, body["model"]) == (200, "gpt-live-1.1")
    assert _phase(second, namespace) is Phase.ADMITTING


def test_a_session_naming_no_model_counts_against_the_default_s_cap(
    capped: Any, control_inbox: ControlInbox
) -> None:
    """A Live session created without a model gets the deployment's default (gpt-live-1.1),
    and is refused when that model is full."""
    assert _connect(_created(), control_inbox)[0] == 200
    status, body = _connect(_created(model=None), control_inbox)
    assert (status, body["error"]["code"]) == (503, "live_model_at_capacity")


def test_connects_racing_for_the_last_place_admit_one(capped: Any, control_inbox: ControlInbox) -> None:
    """Eight connects at once on a model capped at one: one is admitted, seven refused."""
    from models.db import database

    waiting = [_created() for _ in range(8)]
    drain(control_inbox)

    def connect(session_id: str) -> None:
        from workers.actors import begin_admission

        try:
            begin_admission.fn(
                request_id=f"race_{session_id}", gateway_id=GATEWAY, session_id=session_id, now=time.time()
            )
        finally:
            database.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(connect, waiting))
    statuses = sorted(
        item["status"]
        for batch in drain(control_inbox)
        for item in batch["items"]
        if item["kind"] == "reply" and item["request_id"].startswith("race_")
    )
    assert statuses == [200] + [503] * 7
    phases = [_phase(session_id, capped.settings.broker_namespace) for session_id in waiting]
    assert phases.count(Phase.ADMITTING) == 1


def test_a_model_without_a_cap_is_never_refused(capped: Any, control_inbox: ControlInbox) -> None:
    """Three gpt-live-1 sessions and three Realtime ones connect, gpt-live-1.1 full or not."""
    assert _connect(_created(), control_inbox)[0] == 200
    for session_id in [_created(model="gpt-live-1") for _ in range(3)]:
        assert _connect(session_id, control_inbox)[0] == 200
    for session_id in [_created(model=None, provider="realtime") for _ in range(3)]:
        assert _connect(session_id, control_inbox)[0] == 200
