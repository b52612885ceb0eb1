"""Deployments share a database but not their sessions: a lock, a record, a call log or a
takeover made for one deployment never finds another's session, whatever its id or gateway."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from models.ownership import sessions_owned_by
from models.records import call_log, session_record
from models.sessions import locked_session, new_session
from pipeline.call.errors import SessionNotFound
from pipeline.session.wire import SessionCreated
from tests.support.calls import new_session_id


def _session(namespace: str, gateway: str) -> str:
    session_id = new_session_id()
    with new_session(session_id, gateway, namespace) as session:
        session.apply_host(SessionCreated(instructions=f"of {namespace}"), time.time())
    return session_id


def test_a_session_is_found_only_by_its_own_deployment(database: Any) -> None:
    """Its lock, record and call log, asked for by another deployment, are a session not found."""
    mine, theirs = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    session_id = _session(mine, "gw1")

    with locked_session(session_id, namespace=mine) as session:
        assert session.state.instructions == f"of {mine}"
    assert session_record(session_id, namespace=mine)["id"] == session_id
    assert call_log(session_id, namespace=mine) == []  # nothing logged yet, and found

    with pytest.raises(SessionNotFound), locked_session(session_id, namespace=theirs):
        pass
    with pytest.raises(SessionNotFound):
        session_record(session_id, namespace=theirs)
    with pytest.raises(SessionNotFound):
        call_log(session_id, namespace=theirs)


def test_a_takeover_moves_only_the_sessions_of_its_own_deployments_gateway(database: Any) -> None:
    """Two deployments may each name a gateway gw1: the one's takeover of its gw1 leaves the
    other's gw1 calls where they are."""
    mine, theirs = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    own = _session(mine, "gw1")
    other = _session(theirs, "gw1")

    owned = sessions_owned_by(mine, "gw1")

    assert own in owned
    assert other not in owned
    assert other in sessions_owned_by(theirs, "gw1")
