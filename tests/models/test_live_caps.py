"""A Live model's sessions in a call, counted in PostgreSQL under the model's lock: only the
sessions admitted and not over count, each against its own model's cap; phone calls, calls
placed and campaigns' claims racing for the last place never exceed it; a campaign's claims
count before their sessions exist; and what is refused leaves nothing behind."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from models import campaigns, dialer, live_caps, outbound, phone
from models.sessions import LockedSession, locked_session, new_session
from pipeline.admission import LiveCap, LiveCaps
from pipeline.api.requests import RouteSpec
from pipeline.call.errors import LiveModelAtCapacity
from pipeline.outbound.contacts import Contact
from pipeline.outbound.specs import CampaignSettings
from pipeline.phone.sip import PhoneLine
from pipeline.platform.config import Settings
from pipeline.privacy.sealing import DeploymentKey
from pipeline.session.state import ModelChoice, OutboundCall, Phase
from pipeline.session.wire import AdmissionBegun, EndRequested, HostInput, SessionCreated
from tests.models.test_campaigns import NOON

SETTINGS = Settings(live_max_sessions={"gpt-live-1.1": 2}, live_model="gpt-live-1.1")
CAPS = LiveCaps.of(SETTINGS)
CURRENT = CAPS.cap_for("live", "gpt-live-1.1")
ROOMY = dialer.Capacity(max_outbound=1_000, max_phone_calls=10_000, reserve_inbound=0, live_caps=CAPS)


@pytest.fixture(autouse=True)
def _keys() -> None:
    outbound.use_keys([DeploymentKey.generate()])


def _namespace() -> str:
    return f"caps-{uuid.uuid4().hex[:8]}"


def _created(model: str = "gpt-live-1.1", provider: str = "live") -> SessionCreated:
    return SessionCreated.model_validate(
        {"instructions": "Hi.", "provider": provider, "model": ModelChoice(id=model)}
    )


def _session(namespace: str, created: SessionCreated, *, admitted: bool = True) -> str:
    session_id = f"sess_{uuid.uuid4().hex}"
    with new_session(session_id, "gw1", namespace) as session:
        session.apply_host(created, 0.0)
        if admitted:
            session.apply_host(AdmissionBegun(), 0.0)
    return session_id


def _end(session_id: str) -> None:
    with locked_session(session_id) as session:
        session.apply_host(EndRequested(), 0.0)
        assert session.state.is_terminal


def _counted(namespace: str, cap: LiveCap | None = CURRENT) -> int:
    from models.db import database

    assert cap is not None
    with database.atomic():
        return live_caps.in_a_call(namespace, cap, database.execute_sql)


def test_only_sessions_of_the_model_admitted_and_not_over_count(database: Any) -> None:
    """A session admitting counts; one only created, one over, one of the other Live model, a
    Realtime one and another deployment's do not; one stored with no model counts against the
    deployment's default Live model."""
    namespace = _namespace()
    _session(namespace, _created())
    _session(namespace, _created(model=""))
    _session(namespace, _created(), admitted=False)
    _end(_session(namespace, _created()))
    _session(namespace, _created(model="gpt-live-1"))
    _session(namespace, _created(model="", provider="realtime"))
    _session(_namespace(), _created())

    assert _counted(namespace) == 2
    assert (
        _counted(
            namespace,
            LiveCaps.of(Settings(live_max_sessions={"gpt-live-1": 1})).cap_for("live", "gpt-live-1"),
        )
        == 1
    )


def _admit(namespace: str, session_id: str) -> bool:
    """The app's connect as the worker decides it: counted under the model's lock in the
    session's own transaction, then admitted."""
    from models.db import database

    try:
        with locked_session(session_id, namespace=namespace) as session:
            refused = live_caps.admission_refused(namespace, CURRENT, session.execute)
            if refused is not None:
                raise refused
            session.apply_host(AdmissionBegun(), 0.0)
        return True
    except LiveModelAtCapacity:
        return False
    finally:
        database.close()


def test_connects_racing_for_the_last_places_never_exceed_the_cap(database: Any) -> None:
    """Twelve connects at once on a model capped at two, one place taken already: exactly one
    is admitted, and the model never has more than its cap in a call."""
    namespace = _namespace()
    _session(namespace, _created())
    waiting = [_session(namespace, _created(), admitted=False) for _ in range(12)]

    with ThreadPoolExecutor(12) as pool:
        admitted = list(pool.map(lambda session_id: _admit(namespace, session_id), waiting))

    assert admitted.count(True) == 1
    assert _counted(namespace) == 2
    rows = database.execute_sql(
        "SELECT status, count(*) FROM sessions WHERE namespace = %s GROUP BY status", (namespace,)
    ).fetchall()
    assert dict(rows) == {"admitting": 2, "created": 11}


def _route(namespace: str, number: str, session: dict[str, Any]) -> None:
    phone.add_route(namespace, RouteSpec.model_validate({"number": number, "session": session}))


def _ring(namespace: str, dialled: str, provider: str = "live") -> phone.Decision:
    from models.db import database

    call_id = f"rtc_{uuid.uuid4().hex}"
    request_id = f"req_{uuid.uuid4().hex}"
    ringing = phone.Ringing(
        f"wh_{request_id}",
        call_id,
        PhoneLine(caller="+14155550100", dialled=dialled),
        request_id,
        "gw1",
        namespace,
        maximum_calls=1_000,
        provider=provider,
        live_caps=CAPS,
    )

    def session_for(route: phone.Route, line: PhoneLine) -> list[HostInput]:
        model = str(route.spec.get("model") or "")
        created = _created(model=model, provider=str(route.spec["provider"]))
        return [created.model_copy(update={"phone": line}), AdmissionBegun()]

    try:
        return phone.ring(ringing, session_for, 0.0)
    finally:
        database.close()


def test_phone_calls_racing_for_a_full_model_are_turned_away_503_and_leave_no_session(database: Any) -> None:
    """Ten calls at once to a Live route on a model capped at two: two are accepted, eight
    rejected with SIP 503 and the typed reason, counted among the route's refusals, with no
    session; the other Live model's route still answers."""
    namespace = _namespace()
    _route(namespace, "+18005550001", {"instructions": "Hi.", "provider": "live"})
    _route(namespace, "+18005550002", {"instructions": "Hi.", "provider": "live", "model": "gpt-live-1"})

    with ThreadPoolExecutor(10) as pool:
        decisions = list(pool.map(lambda _: _ring(namespace, "+18005550001"), range(10)))

    assert sorted(decision.action for decision in decisions) == ["accept"] * 2 + ["reject"] * 8
    rejected = {(d.status_code, d.reason) for d in decisions if d.action == "reject"}
    assert rejected == {(503, "live_model_at_capacity")}
    assert phone.refusals(namespace) == {"live_model_at_capacity": 8}
    sessions = database.execute_sql("SELECT count(*) FROM sessions WHERE namespace = %s", (namespace,))
    assert sessions.fetchone()[0] == 2
    assert _ring(namespace, "+18005550002").action == "accept"


def test_a_phone_call_on_a_model_without_a_cap_is_never_turned_away_for_it(database: Any) -> None:
    """The uncapped Live model and Realtime answer however many of the capped one are in a call."""
    namespace = _namespace()
    _route(namespace, "+18005550003", {"instructions": "Hi.", "provider": "live", "model": "gpt-live-1"})
    _route(namespace, "+18005550004", {"instructions": "Hi."})
    _session(namespace, _created())
    _session(namespace, _created())
    assert [_ring(namespace, "+18005550003").action for _ in range(3)] == ["accept"] * 3
    assert _ring(namespace, "+18005550004", provider="realtime").action == "accept"


def _place(namespace: str, capacity: dialer.Capacity = ROOMY, model: str = "gpt-live-1.1") -> dialer.Placed:
    def publish(_session: LockedSession, _applied: Any) -> None:
        return None

    call = OutboundCall(id=f"call_{uuid.uuid4().hex}", to=f"+1555{uuid.uuid4().int % 10**7:07d}", trunk="")
    return dialer.place(
        namespace=namespace,
        session_id=f"sess_{uuid.uuid4().hex}",
        gateway_id="gw1",
        created=_created(model=model).model_copy(update={"outbound": call}),
        request_id=f"req_{uuid.uuid4().hex}",
        capacity=capacity,
        now=0.0,
        publish=publish,
    )


def test_a_call_placed_on_a_full_model_is_refused_and_leaves_nothing(database: Any) -> None:
    """`POST /v1/calls` on a model at its cap is refused with the model and the cap, and writes
    neither a session nor a call; the other model's call is placed."""
    namespace = _namespace()
    outbound.add_trunk(namespace, "main", "sips:trunk.example.com", "agent", "pw", "+12125550100")
    _place(namespace)
    _place(namespace)

    with pytest.raises(LiveModelAtCapacity) as refused:
        _place(namespace)

    assert refused.value.details == {"model": "gpt-live-1.1", "cap": 2}
    counts = database.execute_sql(
        "SELECT (SELECT count(*) FROM sessions WHERE namespace = %(n)s),"
        " (SELECT count(*) FROM outbound_calls WHERE namespace = %(n)s)",
        {"n": namespace},
    ).fetchone()
    assert tuple(counts) == (2, 2)
    assert _place(namespace, model="gpt-live-1").state.phase is Phase.ADMITTING


def _campaign(namespace: str, contacts: int) -> str:
    campaign_id = f"camp_{uuid.uuid4().hex}"
    spec = CampaignSettings.model_validate(
        {"name": "n", "session": {"instructions": "x", "provider": "live"}, "max_concurrent": 10}
    )
    campaigns.create(namespace, campaign_id, spec, [Contact(to=f"+1212557{i:04d}") for i in range(contacts)])
    return campaign_id


def _placed(claimed: campaigns.Claimed, namespace: str) -> None:
    call = OutboundCall(
        id=claimed.call_id,
        to=claimed.to,
        trunk="",
        campaign_id=claimed.campaign_id,
        contact_id=claimed.contact_id,
    )
    dialer.place(
        namespace=namespace,
        session_id=claimed.session_id,
        gateway_id="gw1",
        created=_created(model="").model_copy(update={"outbound": call}),
        request_id=claimed.call_id,
        capacity=ROOMY,
        now=0.0,
        publish=lambda _session, _applied: None,
        claimed=True,
    )


def test_a_campaign_claims_no_more_than_its_model_s_room_and_its_claims_count_at_once(database: Any) -> None:
    """A campaign on a model capped at two, one place taken by an app's call: a tick claims one
    contact and the rest wait (not failed); the claim counts before its session exists, and as
    its session once placed; a call ending makes room for the next tick."""
    namespace = _namespace()
    outbound.add_trunk(namespace, "main", "sips:trunk.example.com", "agent", "pw", "+12125550100")
    app_call = _session(namespace, _created())
    campaign_id = _campaign(namespace, 4)

    first = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY)
    assert len(first.claimed) == 1 and first.next_tick_at is not None
    assert _counted(namespace) == 2
    assert campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed == ()
    _placed(first.claimed[0], namespace)
    assert _counted(namespace) == 2
    assert campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed == ()

    _end(app_call)
    assert len(campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed) == 1
    by_state = campaigns.campaign(namespace, campaign_id)["counts"]["by_state"]
    assert by_state == {"waiting": 2, "calling": 2, "done": 0}


def test_campaign_ticks_racing_never_claim_past_the_cap(database: Any) -> None:
    """Three campaigns ticking at once, sixteen times, on one model capped at two: two claims."""
    namespace = _namespace()
    ids = [_campaign(namespace, 5) for _ in range(3)]

    def tick(index: int) -> int:
        from models.db import database as handle

        try:
            return len(campaigns.claim_dials(ids[index % 3], NOON, capacity=ROOMY).claimed)
        finally:
            handle.close()

    with ThreadPoolExecutor(8) as pool:
        claimed = list(pool.map(tick, range(16)))
    assert sum(claimed) == 2
