"""Campaigns in PostgreSQL: contacts written a page at a time; a tick claims only what
`max_concurrent` and the deployment's room allow, even with ticks racing; a suppressed number
ends `suppressed`, an expired campaign's contacts `expired`, a contact outside its window waits
for it; a call's end dials its contact again as the retry policy says, or is done with it; and
a campaign with nothing left is completed, once."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from models import campaigns, dialer, outbound
from models.sessions import locked_session
from pipeline.api.pages import PageRequest, cursor_position
from pipeline.call.errors import CampaignOver, TooManyContacts
from pipeline.outbound.contacts import Contact
from pipeline.outbound.specs import CampaignSettings
from pipeline.privacy.sealing import DeploymentKey
from pipeline.session.step import OutboundEnded

ROOMY = dialer.Capacity(max_outbound=1_000, max_phone_calls=10_000, reserve_inbound=0)


def _next_monday_noon_in_new_york() -> datetime:
    """A Monday at noon in New York, after the database's clock: contacts are due from when
    they are added (`now()`), so the ticks here must come after that, whatever day it is."""
    today = datetime.now(NEW_YORK).date()
    monday = today + timedelta(days=7 - today.weekday())
    return datetime.combine(monday, time(12), NEW_YORK).astimezone(UTC)


NEW_YORK = ZoneInfo("America/New_York")
NOON = _next_monday_noon_in_new_york()


@pytest.fixture(autouse=True)
def _keys() -> None:
    outbound.use_keys([DeploymentKey.generate()])


def _campaign(contacts: int, **settings: Any) -> tuple[str, str]:
    namespace = f"camp-{uuid.uuid4().hex[:8]}"
    outbound.add_trunk(namespace, "main", "sips:trunk.example.com", "agent", "pw", "+12125550100")
    campaign_id = f"camp_{uuid.uuid4().hex}"
    spec = CampaignSettings.model_validate(
        {"name": "reminders", "session": {"instructions": "Remind.", "provider": "live"}, **settings}
    )
    listed = [Contact(to=f"+1212555{index:04d}") for index in range(contacts)]
    campaigns.create(namespace, campaign_id, spec, listed)
    return namespace, campaign_id


def _states(campaign_id: str) -> dict[str, int]:
    return campaigns.campaign(campaigns.namespace_of(campaign_id), campaign_id)["counts"]["by_state"]


def _outcomes(campaign_id: str) -> dict[str, int]:
    return campaigns.campaign(campaigns.namespace_of(campaign_id), campaign_id)["counts"]["by_outcome"]


def _end(call: campaigns.Claimed, outcome: str, namespace: str) -> None:
    """A claimed call placed, then ended with `outcome` in its session's transaction."""
    placed = dialer.place(
        namespace=namespace,
        session_id=call.session_id,
        gateway_id="gw1",
        created=_created(call),
        request_id=call.call_id,
        capacity=ROOMY,
        now=0.0,
        publish=lambda _session, _applied: None,
        claimed=True,
    )
    with locked_session(placed.session_id) as session:
        dialled = outbound.call_ended(session.execute, OutboundEnded(id=call.call_id, outcome=outcome))
        assert dialled is not None
        campaigns.contact_called(session.execute, dialled[0], dialled[1], outcome, NOON)


def _created(call: campaigns.Claimed) -> Any:
    from pipeline.session.state import OutboundCall
    from pipeline.session.wire import SessionCreated

    outgoing = OutboundCall(
        id=call.call_id, to=call.to, trunk="", campaign_id=call.campaign_id, contact_id=call.contact_id
    )
    return SessionCreated(instructions="Remind.", provider="live", outbound=outgoing)


def test_a_tick_claims_at_most_max_concurrent_and_the_rest_wait(database: Any) -> None:
    _namespace, campaign_id = _campaign(12, max_concurrent=5)
    tick = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY)
    assert len(tick.claimed) == 5 and tick.next_tick_at is not None
    assert _states(campaign_id) == {"waiting": 7, "calling": 5, "done": 0}
    assert campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed == ()
    # The ids a claim gives are made from the contact and the attempt, so a re-run names them again.
    call = tick.claimed[0]
    assert (call.call_id, call.session_id) == campaigns.ids_of(campaign_id, call.contact_id, call.attempt)


def test_ticks_racing_never_dial_more_than_max_concurrent(database: Any) -> None:
    _namespace, campaign_id = _campaign(40, max_concurrent=7)

    def tick(_: int) -> int:
        from models.db import database as handle

        try:
            return len(campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed)
        finally:
            handle.close()

    with ThreadPoolExecutor(8) as pool:
        claimed = list(pool.map(tick, range(16)))
    assert sum(claimed) == 7


def test_the_deployment_s_room_bounds_every_campaign_together(database: Any) -> None:
    namespace = f"camp-{uuid.uuid4().hex[:8]}"
    tight = dialer.Capacity(max_outbound=4, max_phone_calls=10_000, reserve_inbound=0)
    ids = []
    for _ in range(3):
        campaign_id = f"camp_{uuid.uuid4().hex}"
        spec = CampaignSettings.model_validate(
            {"name": "n", "session": {"instructions": "x", "provider": "live"}, "max_concurrent": 10}
        )
        campaigns.create(namespace, campaign_id, spec, [Contact(to=f"+1212556{i:04d}") for i in range(5)])
        ids.append(campaign_id)
    total = sum(len(campaigns.claim_dials(campaign_id, NOON, capacity=tight).claimed) for campaign_id in ids)
    assert total == 4


def test_a_suppressed_number_is_never_dialled_and_ends_suppressed(database: Any) -> None:
    namespace, campaign_id = _campaign(3, max_concurrent=5)
    outbound.suppress(namespace, "+12125550001")
    tick = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY)
    assert sorted(call.to for call in tick.claimed) == ["+12125550000", "+12125550002"]
    assert _outcomes(campaign_id) == {"suppressed": 1}


def test_a_contact_outside_its_window_waits_for_it(database: Any) -> None:
    window = {"timezone": None, "days": ["mon"], "start": "09:00", "end": "10:00"}
    _namespace, campaign_id = _campaign(2, max_concurrent=5, window=window)
    tick = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY)
    assert tick.claimed == ()
    # New York's next Monday 09:00, a week on, is when they are looked at again.
    namespace = campaigns.namespace_of(campaign_id)
    contacts = campaigns.contacts(namespace, campaign_id, PageRequest("contacts"))["contacts"]
    assert [c["state"] for c in contacts] == ["waiting", "waiting"]
    later = campaigns.claim_dials(campaign_id, NOON + timedelta(days=7) - timedelta(hours=3), capacity=ROOMY)
    assert len(later.claimed) == 2


def test_an_expired_campaign_dials_nobody_and_completes(database: Any) -> None:
    _namespace, campaign_id = _campaign(3, expires_at=(NOON - timedelta(minutes=1)).isoformat())
    tick = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY)
    assert tick.claimed == () and tick.completed
    assert _outcomes(campaign_id) == {"expired": 3}


def test_a_call_s_end_retries_as_the_policy_says_then_is_done(database: Any) -> None:
    retry = {"no_answer": {"attempts": 2, "after_s": 600}}
    namespace, campaign_id = _campaign(1, retry=retry)
    [first] = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed
    _end(first, "no_answer", namespace)
    assert _states(campaign_id) == {"waiting": 1, "calling": 0, "done": 0}
    assert campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed == ()  # not yet
    [second] = campaigns.claim_dials(campaign_id, NOON + timedelta(minutes=11), capacity=ROOMY).claimed
    assert second.attempt == 2 and second.call_id != first.call_id
    _end(second, "no_answer", namespace)
    assert _outcomes(campaign_id) == {"no_answer": 1}
    last = campaigns.claim_dials(campaign_id, NOON + timedelta(minutes=30), capacity=ROOMY)
    assert last.completed and campaigns.campaign(namespace, campaign_id)["status"] == "completed"
    [contact] = campaigns.contacts(namespace, campaign_id, PageRequest("contacts"))["contacts"]
    assert [a["outcome"] for a in contact["attempts"]] == ["no_answer", "no_answer"]


def test_a_claim_whose_placing_was_lost_is_placed_by_a_later_tick(database: Any) -> None:
    _namespace, campaign_id = _campaign(1)
    [claimed] = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed
    # Its worker died before the session was made: a tick after a while places it again, once.
    assert campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed == ()
    database.execute_sql(
        "UPDATE outbound_calls SET started_at = started_at - interval '1 minute' WHERE id = %s",
        (claimed.call_id,),
    )
    later = campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY)
    assert [call.call_id for call in later.claimed] == [claimed.call_id]
    # Once its session exists, it is not placed again.
    _end(claimed, "busy", campaigns.namespace_of(campaign_id))
    assert campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed == ()


def test_pause_resume_cancel(database: Any) -> None:
    namespace, campaign_id = _campaign(4, max_concurrent=1)
    assert campaigns.set_status(namespace, campaign_id, "pause")["status"] == "paused"
    assert campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed == ()
    campaigns.set_status(namespace, campaign_id, "resume")
    assert len(campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY).claimed) == 1
    shown = campaigns.set_status(namespace, campaign_id, "cancel")
    assert shown["status"] == "cancelled" and shown["counts"]["by_outcome"] == {"cancelled": 3}
    with pytest.raises(CampaignOver):
        campaigns.add_contacts(namespace, campaign_id, [Contact(to="+12125559999")])


def test_contacts_are_paged_in_and_out_and_bounded(database: Any) -> None:
    namespace, campaign_id = _campaign(1)
    more = [Contact(to=f"+1212557{index:04d}") for index in range(2_500)]
    assert campaigns.add_contacts(namespace, campaign_id, iter(more)) == 2_501
    page = campaigns.contacts(namespace, campaign_id, PageRequest("contacts", limit=1_000))
    assert len(page["contacts"]) == 1_000 and page["next"] is not None
    after = PageRequest("contacts", 2_000, cursor_position("contacts", page["next"]))
    rest = campaigns.contacts(namespace, campaign_id, after)
    assert len(rest["contacts"]) == 1_501 and rest["next"] is None
    assert rest["contacts"][0]["position"] == page["contacts"][-1]["position"] + 1
    monkey = iter(Contact(to=f"+1213{2_000_000 + index:07d}") for index in range(100_000))
    with pytest.raises(TooManyContacts):
        campaigns.add_contacts(namespace, campaign_id, monkey)
    assert campaigns.campaign(namespace, campaign_id)["contacts"] == 2_501  # nothing of it kept


def test_two_campaigns_sharing_a_number_ring_it_once_at_a_time_and_dial_it_later(database: Any) -> None:
    """Two campaigns of a deployment list one number and tick at once: one call rings it, the
    other campaign's contact waits (not dropped) and is dialled once that call has ended."""
    namespace = f"camp-{uuid.uuid4().hex[:8]}"
    shared = "+12125558888"
    spec = CampaignSettings.model_validate(
        {"name": "n", "session": {"instructions": "x", "provider": "live"}, "max_concurrent": 10}
    )
    ids = []
    for series in ("558", "559"):
        campaign_id = f"camp_{uuid.uuid4().hex}"
        listed = [Contact(to=shared), *(Contact(to=f"+1212{series}{i:04d}") for i in range(3))]
        campaigns.create(namespace, campaign_id, spec, listed)
        ids.append(campaign_id)

    def tick(campaign_id: str) -> campaigns.Tick:
        from models.db import database as handle

        try:
            return campaigns.claim_dials(campaign_id, NOON, capacity=ROOMY)
        finally:
            handle.close()

    with ThreadPoolExecutor(8) as pool:
        ticks = list(pool.map(tick, ids * 8))
    claimed = [call for each in ticks for call in each.claimed]
    [ringing] = [call for call in claimed if call.to == shared]
    assert len(claimed) == 7  # every other number, each once
    in_calls = database.execute_sql(
        "SELECT count(*) FROM outbound_calls WHERE namespace = %s AND to_number = %s AND outcome IS NULL",
        (namespace, shared),
    ).fetchone()[0]
    assert in_calls == 1
    [other] = [campaign_id for campaign_id in ids if campaign_id != ringing.campaign_id]
    waiting = campaigns.contacts(namespace, other, PageRequest("contacts"))["contacts"][0]
    assert (waiting["to"], waiting["state"], waiting["attempts"]) == (shared, "waiting", [])
    # While the call goes on, the number is left waiting however often the other campaign ticks.
    later = NOON + timedelta(seconds=campaigns.NUMBER_IN_A_CALL_WAIT_S)
    assert campaigns.claim_dials(other, later, capacity=ROOMY).claimed == ()
    _end(ringing, "completed", namespace)
    [dialled] = campaigns.claim_dials(other, later + timedelta(seconds=60), capacity=ROOMY).claimed
    assert (dialled.campaign_id, dialled.to, dialled.attempt) == (other, shared, 1)


def test_a_claim_its_cancelled_campaign_never_placed_holds_no_number(database: Any) -> None:
    """A campaign cancelled while a claim of its was still unplaced (its worker died) never
    places it: the number it named is dialled by another campaign that lists it."""
    namespace, first = _campaign(1)
    [lost] = campaigns.claim_dials(first, NOON, capacity=ROOMY).claimed
    campaigns.set_status(namespace, first, "cancel")
    second = f"camp_{uuid.uuid4().hex}"
    spec = CampaignSettings.model_validate(
        {"name": "n", "session": {"instructions": "x", "provider": "live"}}
    )
    campaigns.create(namespace, second, spec, [Contact(to=lost.to)])
    [dialled] = campaigns.claim_dials(second, NOON, capacity=ROOMY).claimed
    assert dialled.to == lost.to
