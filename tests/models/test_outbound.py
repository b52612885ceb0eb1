"""Calls going out in PostgreSQL: a trunk's password is stored encrypted and opened only to dial;
the do-not-call list; a call placed is one session, one call row and one dial decision, checked
against the trunk, the list and the deployment's room to dial under one lock."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from models import dialer, outbound
from models.applied import Applied
from models.sessions import LockedSession, locked_session
from pipeline.api.pages import PageRequest
from pipeline.call.errors import NotFound, NumberSuppressed, OutboundCapacity, TrunkNotFound, TrunkRequired
from pipeline.platform.envelope import PlaceCall
from pipeline.privacy.sealing import DeploymentKey, SealedValueUnreadable, new_session_key_pair, open_sealed
from pipeline.session.state import OutboundCall, Phase, SessionState
from pipeline.session.wire import CallAttached, SessionCreated
from tests.support.waiting import wait_for

KEY = DeploymentKey.generate()
PASSWORD = f"pw-{uuid.uuid4().hex}"
ROOMY = dialer.Capacity(max_outbound=100, max_phone_calls=1_000, reserve_inbound=0)


@pytest.fixture(autouse=True)
def _keys() -> None:
    outbound.use_keys([KEY])


def _namespace(trunks: int = 1) -> str:
    namespace = f"out-{uuid.uuid4().hex[:8]}"
    for index in range(trunks):
        outbound.add_trunk(
            namespace, f"main{index or ''}", "sips:trunk.example.com", "agent", PASSWORD, "+12125550100"
        )
    return namespace


def _place(
    namespace: str,
    to: str = "+15550100001",
    trunk: str = "",
    capacity: dialer.Capacity = ROOMY,
    *,
    session_id: str | None = None,
    on_publish: Callable[[Applied], None] = lambda _applied: None,
) -> Any:
    published: list[Applied] = []

    def publish(_session: LockedSession, applied: Applied) -> None:
        published.append(applied)
        on_publish(applied)

    session_id = session_id or f"sess_{uuid.uuid4().hex}"
    call = OutboundCall(id=f"call_{uuid.uuid4().hex}", to=to, trunk=trunk)
    placed = dialer.place(
        namespace=namespace,
        session_id=session_id,
        gateway_id="gw1",
        created=SessionCreated(instructions="Remind them.", provider="live", outbound=call),
        request_id=f"req_{uuid.uuid4().hex}",
        capacity=capacity,
        now=0.0,
        publish=publish,
    )
    return placed, published


def test_a_trunk_s_password_is_stored_encrypted_and_opened_only_to_dial(database: Any) -> None:
    namespace = _namespace()
    stored = database.execute_sql(
        "SELECT password FROM trunks WHERE namespace = %s", (namespace,)
    ).fetchone()[0]
    assert PASSWORD not in stored and stored.startswith("secret:v1:")
    listed = [row.as_json() for row in outbound.trunks(namespace, PageRequest("trunks"))[0]]
    assert "password" not in json.dumps(listed) and PASSWORD not in json.dumps(listed)

    placed, published = _place(namespace)
    [directive] = [
        item for applied in published for item in applied.to_gateway if isinstance(item, PlaceCall)
    ]
    # The directive crosses Redis: it names the trunk, never its password.
    assert directive.trunk is not None and directive.trunk.url == "sips:trunk.example.com"
    assert PASSWORD not in directive.model_dump_json()
    # The gateway that dials is given it sealed to a key of its own, which alone opens it.
    gateway_private, gateway_public = new_session_key_pair()
    sealed = outbound.trunk_password_sealed(placed.session_id, "main", gateway_public)
    assert sealed is not None and PASSWORD not in sealed
    assert open_sealed(sealed, private_key=gateway_private, session_id=placed.session_id) == PASSWORD
    with pytest.raises(SealedValueUnreadable):
        open_sealed(sealed, private_key=new_session_key_pair()[0], session_id=placed.session_id)
    # The log keeps what the event emitted, never the password.
    logged = database.execute_sql(
        "SELECT controls::text FROM session_events WHERE session_id = %s", (placed.session_id,)
    ).fetchall()
    assert any("place_call" in row[0] for row in logged)
    assert all(PASSWORD not in row[0] for row in logged)


def test_a_password_moved_to_another_trunk_does_not_open(database: Any) -> None:
    namespace = _namespace()
    outbound.add_trunk(namespace, "other", "sips:other.example.com", "x", "other-password", "+15550100009")
    database.execute_sql(
        "UPDATE trunks SET password = (SELECT password FROM trunks WHERE namespace = %s AND name = 'main')"
        " WHERE namespace = %s AND name = 'other'",
        (namespace, namespace),
    )
    placed, _published = _place(namespace, trunk="other")
    # The gateway that dials is given no password, and fails the dial saying so.
    assert outbound.trunk_password_sealed(placed.session_id, "other", new_session_key_pair()[1]) is None
    assert placed.state.outbound is not None


def test_a_call_is_placed_as_one_session_one_row_and_one_dial(database: Any) -> None:
    namespace = _namespace()
    placed, published = _place(namespace)

    assert placed.state.phase is Phase.ADMITTING and placed.state.outbound is not None
    assert placed.state.outbound.trunk == "main"  # the deployment's only trunk
    directives = [item for applied in published for item in applied.to_gateway if isinstance(item, PlaceCall)]
    assert len(directives) == 1 and directives[0].to == "+15550100001"
    call = outbound.outbound_call(namespace, placed.state.outbound.id)
    assert (call["session_id"], call["status"], call["outcome"]) == (placed.session_id, "in_progress", None)


def test_the_provider_s_answer_to_a_dial_waits_for_the_decision_to_commit(database: Any) -> None:
    """The dial is published before its session's first transaction commits, and the provider
    can answer within milliseconds: the call's attach then waits for the commit and attaches,
    rather than finding no session (and leaving the call unsteered until the admission timeout)."""
    namespace = _namespace()
    session_id = f"sess_{uuid.uuid4().hex}"
    attached: list[Any] = []

    def attach() -> None:
        try:
            with locked_session(session_id) as session:
                session.apply_host(CallAttached(call_id="live_early", medium="sip"), 0.0)
                attached.append(session.state)
        except NotFound as error:  # the attach actor's 404
            attached.append(error)
        finally:
            database.close()

    def waiting_for_the_commit() -> bool:
        # Asked from the placing transaction itself: the attach is blocked on a lock of the
        # session's, or it has finished (it must not have). A transaction keeps its first look
        # at pg_stat_activity unless told to look again.
        if attached:
            return True
        database.execute_sql("SELECT pg_stat_clear_snapshot()")
        waiting = database.execute_sql(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            (f"%{session_id}%",),
        )
        return waiting.fetchone() is not None

    attaching = threading.Thread(target=attach)

    def dial_decided(applied: Applied) -> None:
        if any(isinstance(item, PlaceCall) for item in applied.to_gateway):
            attaching.start()
            wait_for(waiting_for_the_commit, "the attach to block or finish")
            assert not attached, attached

    try:
        placed, _ = _place(namespace, session_id=session_id, on_publish=dial_decided)
    finally:
        if attaching.is_alive() or attaching.ident is not None:
            attaching.join()
    [state] = attached
    assert placed.state.phase is Phase.ADMITTING
    assert isinstance(state, SessionState) and state.call_id == "live_early", state


def test_a_trunk_must_exist_and_be_named_when_there_are_several(database: Any) -> None:
    with pytest.raises(TrunkNotFound):
        _place(_namespace(trunks=0))
    namespace = _namespace(trunks=2)
    with pytest.raises(TrunkRequired):
        _place(namespace)
    with pytest.raises(TrunkNotFound):
        _place(namespace, trunk="nope")
    placed, _ = _place(namespace, trunk="main1")
    assert placed.state.outbound.trunk == "main1"
    # A refused call leaves no session behind.
    count = database.execute_sql(
        "SELECT count(*) FROM sessions WHERE namespace = %s", (namespace,)
    ).fetchone()[0]
    assert count == 1


def test_a_suppressed_number_is_never_placed(database: Any) -> None:
    namespace = _namespace()
    assert outbound.suppress(namespace, "+15550100002", reason="asked")
    assert not outbound.suppress(namespace, "+15550100002", reason="again")  # once
    with pytest.raises(NumberSuppressed):
        _place(namespace, to="+15550100002")
    [listed], _ = outbound.suppressions(namespace, PageRequest("suppressions"))
    assert (listed["number"], listed["reason"], listed["source"]) == ("+15550100002", "asked", "api")
    outbound.unsuppress(namespace, "+15550100002")
    placed, _ = _place(namespace, to="+15550100002")
    assert placed.state.outbound is not None


def test_twenty_calls_racing_for_five_places_place_exactly_five(database: Any) -> None:
    namespace = _namespace()
    five = dialer.Capacity(max_outbound=5, max_phone_calls=1_000, reserve_inbound=0)

    def place(index: int) -> str:
        from models.db import database as handle

        try:
            _place(namespace, to=f"+155501{index:05d}", capacity=five)
            return "placed"
        except OutboundCapacity:
            return "refused"
        finally:
            handle.close()

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(place, range(20)))
    assert results.count("placed") == 5 and results.count("refused") == 15


def test_lines_kept_for_callers_hold_dials_back(database: Any) -> None:
    namespace = _namespace()
    tight = dialer.Capacity(max_outbound=10, max_phone_calls=3, reserve_inbound=2)
    _place(namespace, capacity=tight)
    with pytest.raises(OutboundCapacity):
        _place(namespace, to="+15550100003", capacity=tight)


def test_a_call_s_end_is_written_once(database: Any) -> None:
    from pipeline.session.step import OutboundEnded

    namespace = _namespace()
    placed, _ = _place(namespace)
    call_id = placed.state.outbound.id
    with locked_session(placed.session_id) as session:
        assert (
            outbound.call_ended(session.execute, OutboundEnded(id=call_id, outcome="busy", code="busy"))
            is None
        )
        outbound.call_ended(session.execute, OutboundEnded(id=call_id, outcome="completed"))
    call = outbound.outbound_call(namespace, call_id)
    assert (call["status"], call["outcome"], call["code"]) == ("ended", "busy", "busy")


def test_a_rotation_re_encrypts_the_trunks_passwords_under_the_new_key(database: Any) -> None:
    namespace = _namespace()
    newer = DeploymentKey.generate()
    assert outbound.rotate_trunks([newer, KEY], namespace=namespace) == 1
    assert outbound.rotate_trunks([newer, KEY], namespace=namespace) == 0  # done already
    stored = database.execute_sql(
        "SELECT password FROM trunks WHERE namespace = %s", (namespace,)
    ).fetchone()[0]
    assert stored.startswith(f"secret:v1:{newer.key_id}:")
    outbound.use_keys([newer])
    placed, _published = _place(namespace)
    private, public = new_session_key_pair()
    sealed = outbound.trunk_password_sealed(placed.session_id, "main", public)
    assert sealed is not None
    assert open_sealed(sealed, private_key=private, session_id=placed.session_id) == PASSWORD


def test_erasing_a_number_erases_the_calls_placed_to_it_and_forgets_it_as_a_contact(database: Any) -> None:
    from models import campaigns, erasure
    from pipeline.outbound.contacts import Contact
    from pipeline.outbound.specs import CampaignSettings
    from pipeline.session.wire import EndRequested

    namespace = _namespace()
    to = f"+1415{2_000_000 + uuid.uuid4().int % 8_000_000:07d}"
    placed, _ = _place(namespace, to=to)
    with locked_session(placed.session_id) as session:
        session.apply_host(EndRequested(), 0.0)
    settings = CampaignSettings.model_validate(
        {"name": "n", "session": {"instructions": "x", "provider": "live"}}
    )
    campaign_id = f"camp_{uuid.uuid4().hex}"
    campaigns.create(namespace, campaign_id, settings, [Contact(to=to, vars={"name": "Dana"})])
    outbound.suppress(namespace, to, reason="asked")

    erased = erasure.erase_caller(namespace, to, by="test")
    assert [done.session_id for done in erased.erased] == [placed.session_id]
    call = outbound.outbound_call(namespace, placed.state.outbound.id)
    assert call["to"] == "" and call["outcome"] == "cancelled"
    [contact] = campaigns.contacts(namespace, campaign_id, PageRequest("contacts"))["contacts"]
    assert (contact["to"], contact["state"], contact["outcome"]) == ("", "done", "cancelled")
    # The do-not-call list keeps the number: that is what keeps it from being dialled.
    assert outbound.is_suppressed(namespace, to)
    state = database.execute_sql(
        "SELECT state::text FROM sessions WHERE id = %s", (placed.session_id,)
    ).fetchone()[0]
    assert to not in state
