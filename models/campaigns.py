"""Campaigns in PostgreSQL: the campaign row (its spec and status), its contacts (paged in,
never held whole), and the dialer's two steps.

**The dialer is the campaign's row lock and the durable timers that already exist** — no process
of its own, no queue in memory. A tick (`claim_dials`) runs in one short transaction: it locks
the campaign row, takes the deployment's dialer lock (the same one `POST /v1/calls` takes), counts
the calls in progress — the campaign's against `max_concurrent`, the deployment's against
`SWITCHBOARD_MAX_OUTBOUND` and the lines kept for callers, its session's Live model's against
that model's cap (under the model's lock: `models.live_caps`) — and claims the contacts it may dial
now: each claimed contact's attempt gets its call row, with the ids its session and call will
have (made from the contact and the attempt, so a claim re-run names the same ones). A contact
on the do-not-call list ends `suppressed`, one past `expires_at` ends `expired`, one outside its
window waits for it, and one whose number is in a call of the deployment's already (two
campaigns may list the same person) waits for that call to end: a number is rung by one call
at a time. The claim is the call's row (`outcome` null until it ends), written under the dialer
lock that every claim and `POST /v1/calls` take, so two ticks cannot both see the number free.
Then each claimed call is placed in a transaction of its own
(`models.dialer.place`); a claim whose placing was lost with its worker is placed by a later
tick (`unplaced`), under the same ids, so it is placed once.

When a call ends, in the transaction that ends its session, its contact is dialled again later
or done (`contact_called`, by the campaign's retry policy), and the campaign is ticked again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from models import live_caps, outbound
from models.db import database
from models.pages import keyset
from pipeline.api.pages import PageRequest, next_cursor
from pipeline.api.requests import SessionSpec, shown_spec
from pipeline.call.errors import CampaignNotFound, CampaignOver, TooManyContacts
from pipeline.outbound.contacts import MAXIMUM_CONTACTS, Contact
from pipeline.outbound.numbers import timezone_of
from pipeline.outbound.outcomes import Outcome
from pipeline.outbound.retry import Final, Retry, after_attempt
from pipeline.outbound.schedule import activity
from pipeline.outbound.specs import CampaignSettings
from pipeline.outbound.window import is_open, next_open
from pipeline.platform.timestamps import rfc3339, rfc3339_or_none

# Contacts are written in pages of this many rows, so a campaign of 100,000 is never held whole.
CONTACT_PAGE = 1_000
# A tick claims at most this many contacts (a campaign's `max_concurrent` is at most 100 anyway),
# and looks at no more than this many more due contacts (suppressed, expired, outside their
# window) before it stops and leaves the rest for the next tick.
MAXIMUM_CLAIMS = 100
MAXIMUM_LOOKED_AT = 500
# When nothing wakes a running campaign sooner (a call ending, a retry due), the dialer looks at
# it again after this long: the sweeper's backstop for a tick lost with Redis or a worker.
IDLE_TICK_S = 30
# A claimed call whose session was not created after this long lost its placing with its worker.
UNPLACED_AFTER_S = 10
# A contact whose number is in a call of the deployment's already (another campaign's, or one of
# `POST /v1/calls`) is looked at again this much later: that call's end does not wake this
# campaign, and a call that was answered lasts a minute or more.
NUMBER_IN_A_CALL_WAIT_S = 10

STATUSES = ("scheduled", "running", "paused", "completed", "cancelled")


@dataclass(frozen=True)
class Claimed:
    """A contact's attempt claimed for dialling: the ids its call and session will have."""

    campaign_id: str
    contact_id: int
    attempt: int
    to: str
    vars: dict[str, str]
    call_id: str
    session_id: str


@dataclass(frozen=True)
class Tick:
    """What one tick decided: the calls to place now, and when to look again (None: done)."""

    claimed: tuple[Claimed, ...]
    next_tick_at: datetime | None
    completed: bool = False
    # What it counted: the campaign's contacts waiting, the deployment's calls going out.
    waiting: int = 0
    going_out: int = 0


def ids_of(campaign_id: str, contact_id: int, attempt: int) -> tuple[str, str]:
    """The call id and session id of a contact's attempt: the same whoever decides it."""
    digest = hashlib.sha256(f"{campaign_id}:{contact_id}:{attempt}".encode()).hexdigest()
    return f"call_{digest[:32]}", f"sess_{digest[32:64]}"


# ── a campaign's life ───────────────────────────────────────────────────────────────────


def create(namespace: str, campaign_id: str, spec: CampaignSettings, contacts: Iterable[Contact]) -> int:
    """The campaign and its first contacts, scheduled to be dialled now (or held, `paused`);
    answers how many contacts it has."""
    stored = spec.model_dump(mode="json")
    status = "paused" if spec.paused else "scheduled"
    with database.atomic():
        database.execute_sql(
            "INSERT INTO campaigns (id, namespace, name, spec, status, next_tick_at)"
            " VALUES (%s, %s, %s, %s::jsonb, %s, now())",
            (campaign_id, namespace, spec.name, json.dumps(stored), status),
        )
        return _add(campaign_id, contacts)


def add_contacts(namespace: str, campaign_id: str, contacts: Iterable[Contact]) -> int:
    """More contacts for a campaign not over (written a page at a time, after the others);
    answers how many it has now."""
    with database.atomic():
        status = _locked_status(namespace, campaign_id)
        if status in ("completed", "cancelled"):
            raise CampaignOver(f"campaign {campaign_id!r} is {status}: it takes no more contacts")
        return _add(campaign_id, contacts)


def _locked_status(namespace: str, campaign_id: str) -> str:
    """The campaign's status, its row locked for the rest of the transaction."""
    row = database.execute_sql(
        "SELECT status FROM campaigns WHERE namespace = %s AND id = %s FOR UPDATE",
        (namespace, campaign_id),
    ).fetchone()
    if row is None:
        raise CampaignNotFound(f"no campaign {campaign_id!r}")
    return str(row[0])


def _add(campaign_id: str, contacts: Iterable[Contact]) -> int:
    """Write contacts after the campaign's last, a page at a time, in the caller's transaction
    (which holds the campaign row); answers how many the campaign has now."""
    count = int(
        database.execute_sql("SELECT contacts FROM campaigns WHERE id = %s", (campaign_id,)).fetchone()[0]
    )
    if count + _length_hint(contacts) > MAXIMUM_CONTACTS:
        raise TooManyContacts(f"a campaign has at most {MAXIMUM_CONTACTS:,} contacts")
    for page in _pages(contacts, CONTACT_PAGE):
        if count + len(page) > MAXIMUM_CONTACTS:
            raise TooManyContacts(f"a campaign has at most {MAXIMUM_CONTACTS:,} contacts")
        values = []
        parameters: list[Any] = []
        for contact in page:
            values.append("(%s, %s, %s, %s::jsonb, %s, 'waiting')")
            parameters += [campaign_id, count, contact.to, json.dumps(contact.vars), contact.timezone]
            count += 1
        database.execute_sql(
            "INSERT INTO campaign_contacts (campaign_id, position, number, vars, timezone, state)"
            f" VALUES {', '.join(values)}",
            parameters,
        )
    database.execute_sql(
        "UPDATE campaigns SET contacts = %s, updated_at = now() WHERE id = %s", (count, campaign_id)
    )
    return count


def _length_hint(contacts: Iterable[Contact]) -> int:
    return len(contacts) if isinstance(contacts, list | tuple) else 0


def set_status(namespace: str, campaign_id: str, verb: str) -> dict[str, Any]:
    """Pause (no new dials; calls in progress finish), resume, or cancel (no new dials; every
    contact not yet done ends `cancelled`; calls in progress finish). Answers the campaign."""
    with database.atomic():
        status = _locked_status(namespace, campaign_id)
        if verb == "pause" and status in ("scheduled", "running"):
            database.execute_sql(
                "UPDATE campaigns SET status = 'paused', updated_at = now() WHERE id = %s", (campaign_id,)
            )
        elif verb == "resume" and status == "paused":
            database.execute_sql(
                "UPDATE campaigns SET status = 'running', updated_at = now(), next_tick_at = now()"
                " WHERE id = %s",
                (campaign_id,),
            )
        elif verb == "cancel" and status in ("scheduled", "running", "paused"):
            database.execute_sql(
                "UPDATE campaign_contacts SET state = 'done', outcome = 'cancelled'"
                " WHERE campaign_id = %s AND state = 'waiting'",
                (campaign_id,),
            )
            database.execute_sql(
                "UPDATE campaigns SET status = 'cancelled', updated_at = now(), completed_at = now(),"
                " next_tick_at = NULL WHERE id = %s",
                (campaign_id,),
            )
    return campaign(namespace, campaign_id)


# ── the dialer ──────────────────────────────────────────────────────────────────────────


def claim_dials(campaign_id: str, now: datetime, *, capacity: Any) -> Tick:
    """One tick of a campaign's dialer (see the module's docstring): the calls to place now."""
    with database.atomic():
        row = database.execute_sql(
            "SELECT namespace, spec, status FROM campaigns WHERE id = %s FOR UPDATE", (campaign_id,)
        ).fetchone()
        if row is None:
            return Tick(claimed=(), next_tick_at=None)
        namespace, stored, status = str(row[0]), row[1], str(row[2])
        if status not in ("scheduled", "running"):
            return Tick(claimed=(), next_tick_at=None)
        spec = _stored_spec(stored)
        execute = database.execute_sql
        unplaced = _unplaced(campaign_id)
        if spec.expires_at is not None and now >= spec.expires_at:
            execute(
                "UPDATE campaign_contacts SET state = 'done', outcome = 'expired'"
                " WHERE campaign_id = %s AND state = 'waiting'",
                (campaign_id,),
            )
        outbound.hold_the_dialer(namespace, execute)
        calling = _count(campaign_id, "calling")
        room = min(
            spec.max_concurrent - calling,
            outbound.room_to_dial(
                namespace,
                execute,
                max_outbound=capacity.max_outbound,
                max_phone_calls=capacity.max_phone_calls,
                reserve_inbound=capacity.reserve_inbound,
            ),
            MAXIMUM_CLAIMS,
        )
        if room > 0:
            # Its session's Live model may be at its cap: the contacts wait, as for a full line.
            session = SessionSpec.model_validate(spec.session)
            model_room = live_caps.room(
                namespace, capacity.live_caps.cap_for(str(session.provider), session.model), execute
            )
            if model_room is not None:
                room = min(room, model_room)
        claimed: list[Claimed] = []
        if room > 0:
            due = execute(
                "SELECT id, number, vars, timezone, attempts FROM campaign_contacts"
                " WHERE campaign_id = %s AND state = 'waiting' AND next_at <= %s"
                " ORDER BY next_at, position LIMIT %s FOR UPDATE SKIP LOCKED",
                (campaign_id, now, MAXIMUM_LOOKED_AT),
            ).fetchall()
            in_a_call = outbound.numbers_in_a_call(namespace, [row[1] for row in due], execute)
            for contact_id, number, values, zone, attempts in due:
                if len(claimed) >= room:
                    break
                if outbound.is_suppressed(namespace, number, execute):
                    _done(contact_id, "suppressed")
                    continue
                where = zone or timezone_of(number)
                if spec.window is not None and not is_open(spec.window, where, now):
                    execute(
                        "UPDATE campaign_contacts SET next_at = %s WHERE id = %s",
                        (next_open(spec.window, where, now), contact_id),
                    )
                    continue
                if number in in_a_call:
                    execute(
                        "UPDATE campaign_contacts SET next_at = %s WHERE id = %s",
                        (now + timedelta(seconds=NUMBER_IN_A_CALL_WAIT_S), contact_id),
                    )
                    continue
                in_a_call.add(number)
                attempt = int(attempts) + 1
                call_id, session_id = ids_of(campaign_id, int(contact_id), attempt)
                execute(
                    "UPDATE campaign_contacts SET state = 'calling', attempts = %s WHERE id = %s",
                    (attempt, contact_id),
                )
                outbound.record_call(
                    execute,
                    call_id=call_id,
                    namespace=namespace,
                    session_id=session_id,
                    to=number,
                    trunk=spec.trunk or "",
                    campaign_id=campaign_id,
                    contact_id=int(contact_id),
                    attempt=attempt,
                )
                claimed.append(
                    Claimed(
                        campaign_id, int(contact_id), attempt, number, dict(values or {}), call_id, session_id
                    )
                )
        waiting = _count(campaign_id, "waiting")
        calling = _count(campaign_id, "calling")
        going_out = outbound.in_progress(namespace, execute)
        if waiting == 0 and calling == 0:
            execute(
                "UPDATE campaigns SET status = 'completed', updated_at = now(), completed_at = now(),"
                " next_tick_at = NULL WHERE id = %s",
                (campaign_id,),
            )
            return Tick(claimed=(*unplaced, *claimed), next_tick_at=None, completed=True, going_out=going_out)
        soonest = execute(
            "SELECT min(next_at) FROM campaign_contacts WHERE campaign_id = %s AND state = 'waiting'",
            (campaign_id,),
        ).fetchone()[0]
        next_tick = now + timedelta(seconds=IDLE_TICK_S)
        if soonest is not None and soonest < next_tick:
            next_tick = max(soonest, now + timedelta(seconds=1))
        execute(
            "UPDATE campaigns SET status = 'running', updated_at = now(), next_tick_at = %s WHERE id = %s",
            (next_tick, campaign_id),
        )
        return Tick(
            claimed=(*unplaced, *claimed), next_tick_at=next_tick, waiting=waiting, going_out=going_out
        )


def contact_called(execute: Any, campaign_id: str, contact_id: int, outcome: str, now: datetime) -> None:
    """A contact's call ended (in the transaction that ended its session): dialled again later,
    as the campaign's retry policy says for this outcome, or done with it."""
    row = execute(
        "SELECT c.attempts, p.spec FROM campaign_contacts c JOIN campaigns p ON p.id = c.campaign_id"
        " WHERE c.id = %s AND c.state = 'calling' FOR UPDATE OF c",
        (contact_id,),
    ).fetchone()
    if row is None:
        return  # a cancelled campaign's contact, or its end recorded already
    attempts, stored = int(row[0]), row[1]
    spec = _stored_spec(stored)
    decided = after_attempt(spec.retry, Outcome(outcome), attempts, now)
    if isinstance(decided, Retry):
        execute(
            "UPDATE campaign_contacts SET state = 'waiting', outcome = NULL, next_at = %s WHERE id = %s",
            (decided.at, contact_id),
        )
    else:
        assert isinstance(decided, Final)
        execute(
            "UPDATE campaign_contacts SET state = 'done', outcome = %s WHERE id = %s",
            (decided.outcome, contact_id),
        )


def spec_of(campaign_id: str) -> tuple[CampaignSettings, str] | None:
    """A campaign's spec (its contacts aside) and its deployment's namespace."""
    row = database.execute_sql(
        "SELECT spec, namespace FROM campaigns WHERE id = %s", (campaign_id,)
    ).fetchone()
    if row is None:
        return None
    return _stored_spec(row[0]), str(row[1])


def namespace_of(campaign_id: str) -> str:
    row = database.execute_sql("SELECT namespace FROM campaigns WHERE id = %s", (campaign_id,)).fetchone()
    if row is None:
        raise CampaignNotFound(f"no campaign {campaign_id!r}")
    return str(row[0])


def due_campaigns(namespace: str, lease_s: float, limit: int = 50) -> list[str]:
    """The deployment's campaigns whose next look is due (their tick message was lost, or a retry
    or a window opened), claimed for `lease_s` so one sweeper ticks each."""
    with database.atomic():
        rows = database.execute_sql(
            "UPDATE campaigns SET next_tick_at = now() + %s * interval '1 second'"
            " WHERE id IN (SELECT id FROM campaigns WHERE namespace = %s"
            " AND status IN ('scheduled', 'running') AND next_tick_at <= now()"
            " ORDER BY next_tick_at LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id",
            (lease_s, namespace, limit),
        ).fetchall()
    return [str(row[0]) for row in rows]


# ── what the API shows ──────────────────────────────────────────────────────────────────


def campaign(namespace: str, campaign_id: str) -> dict[str, Any]:
    """A campaign: its spec (the session's, without secrets), status, and counts of its contacts
    by state and by outcome."""
    row = database.execute_sql(
        "SELECT id, name, spec, status, contacts, created_at, updated_at, completed_at FROM campaigns"
        " WHERE namespace = %s AND id = %s",
        (namespace, campaign_id),
    ).fetchone()
    if row is None:
        raise CampaignNotFound(f"no campaign {campaign_id!r}")
    return _campaign_json(row, _counts(campaign_id))


def campaigns(namespace: str, page: PageRequest) -> tuple[list[dict[str, Any]], str | None]:
    """A page of the deployment's campaigns, newest first, and the next page's cursor."""
    window = keyset(page, ("created_at", "id"), created="created_at", descending=True)
    rows = database.execute_sql(
        "SELECT id, name, spec, status, contacts, created_at, updated_at, completed_at FROM campaigns"
        f" WHERE namespace = %(namespace)s {window.where} {window.order}",
        {"namespace": namespace, **window.parameters},
    ).fetchall()
    listed = [_campaign_json(row, _counts(str(row[0]))) for row in rows[: page.limit]]
    return listed, next_cursor(page, rows, lambda row: (row[5], row[0]))


def contacts(namespace: str, campaign_id: str, page: PageRequest) -> dict[str, Any]:
    """A page of a campaign's contacts in their order, each with its outcome and its attempts;
    `next` is the next page's cursor. Contacts have no creation time: the page is by position."""
    if (
        database.execute_sql(
            "SELECT 1 FROM campaigns WHERE namespace = %s AND id = %s", (namespace, campaign_id)
        ).fetchone()
        is None
    ):
        raise CampaignNotFound(f"no campaign {campaign_id!r}")
    window = keyset(page, ("position",))
    rows = database.execute_sql(
        "SELECT id, position, number, state, outcome, attempts FROM campaign_contacts"
        f" WHERE campaign_id = %(campaign_id)s {window.where} {window.order}",
        {"campaign_id": campaign_id, **window.parameters},
    ).fetchall()
    shown = rows[: page.limit]
    ids = [row[0] for row in shown]
    attempts: dict[int, list[dict[str, Any]]] = {contact_id: [] for contact_id in ids}
    if ids:
        for contact_id, session_id, outcome, started, ended in database.execute_sql(
            "SELECT contact_id, session_id, outcome, started_at, ended_at FROM outbound_calls"
            " WHERE contact_id = ANY(%s) ORDER BY contact_id, attempt",
            (ids,),
        ).fetchall():
            attempts[contact_id].append(
                {
                    "started_at": rfc3339(started),
                    "ended_at": rfc3339_or_none(ended),
                    "outcome": outcome,
                    "session_id": session_id,
                }
            )
    listed = [
        {
            "to": number,
            "position": position,
            "state": state,
            "outcome": outcome,
            "attempts": attempts[contact_id],
        }
        for contact_id, position, number, state, outcome, _ in shown
    ]
    return {"contacts": listed, "next": next_cursor(page, rows, lambda row: (row[1],))}


# ── helpers ─────────────────────────────────────────────────────────────────────────────


def _stored_spec(stored: dict[str, Any]) -> CampaignSettings:
    """A campaign's spec as it was stored (its contacts are rows of their own)."""
    return CampaignSettings.model_validate(stored)


def _pages(items: Iterable[Contact], size: int) -> Iterator[list[Contact]]:
    page: list[Contact] = []
    for item in items:
        page.append(item)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def _count(campaign_id: str, state: str) -> int:
    row = database.execute_sql(
        "SELECT count(*) FROM campaign_contacts WHERE campaign_id = %s AND state = %s", (campaign_id, state)
    ).fetchone()
    return int(row[0])


def _done(contact_id: int, outcome: str) -> None:
    database.execute_sql(
        "UPDATE campaign_contacts SET state = 'done', outcome = %s WHERE id = %s", (outcome, contact_id)
    )


def _unplaced(campaign_id: str) -> list[Claimed]:
    """The campaign's claimed calls whose session was never created (their placing was lost);
    how long ago is the database's clock, which wrote when they were claimed."""
    rows = database.execute_sql(
        "SELECT o.id, o.session_id, o.contact_id, o.attempt, o.to_number, c.vars FROM outbound_calls o"
        " JOIN campaign_contacts c ON c.id = o.contact_id"
        " LEFT JOIN sessions s ON s.id = o.session_id"
        " WHERE o.campaign_id = %s AND o.outcome IS NULL AND s.id IS NULL"
        " AND o.started_at < now() - %s * interval '1 second'",
        (campaign_id, UNPLACED_AFTER_S),
    ).fetchall()
    return [
        Claimed(campaign_id, int(contact_id), int(attempt), to, dict(values or {}), call_id, session_id)
        for call_id, session_id, contact_id, attempt, to, values in rows
    ]


def _counts(campaign_id: str) -> dict[str, dict[str, int]]:
    by_state: dict[str, int] = {"waiting": 0, "calling": 0, "done": 0}
    by_outcome: dict[str, int] = {}
    for state, outcome, count in database.execute_sql(
        "SELECT state, outcome, count(*) FROM campaign_contacts WHERE campaign_id = %s"
        " GROUP BY state, outcome",
        (campaign_id,),
    ).fetchall():
        by_state[state] = by_state.get(state, 0) + int(count)
        if outcome is not None:
            by_outcome[outcome] = by_outcome.get(outcome, 0) + int(count)
    return {"by_state": by_state, "by_outcome": by_outcome}


def _activity(
    campaign_id: str, spec: dict[str, Any], status: str, counts: dict[str, dict[str, int]]
) -> str | None:
    """What the campaign is doing now (`pipeline.outbound.schedule.activity`), from its next
    waiting contact."""
    if status not in ("scheduled", "running"):
        return None
    soonest = database.execute_sql(
        "SELECT next_at, number, timezone FROM campaign_contacts"
        " WHERE campaign_id = %s AND state = 'waiting' ORDER BY next_at LIMIT 1",
        (campaign_id,),
    ).fetchone()
    window = _stored_spec(spec).window
    due, zone = (soonest[0], soonest[2] or timezone_of(soonest[1])) if soonest is not None else (None, None)
    calling = counts["by_state"].get("calling", 0)
    return activity(status, calling, due, window, zone, datetime.now(UTC))


def _campaign_json(row: Any, counts: dict[str, dict[str, int]]) -> dict[str, Any]:
    campaign_id, name, spec, status, total, created, updated, completed = row
    session = shown_spec(dict(spec.get("session") or {}))
    return {
        "id": campaign_id,
        "name": name,
        "status": status,
        "activity": _activity(campaign_id, spec, status, counts),
        "contacts": total,
        "counts": counts,
        "max_concurrent": spec.get("max_concurrent"),
        "trunk": spec.get("trunk"),
        "window": spec.get("window"),
        "retry": spec.get("retry"),
        "voicemail": spec.get("voicemail"),
        "expires_at": rfc3339_or_none(_instant(spec.get("expires_at"))),
        "session": session,
        "created_at": rfc3339(created),
        "updated_at": rfc3339(updated),
        "completed_at": rfc3339_or_none(completed),
    }


def _instant(stored: str | None) -> datetime | None:
    """A time the spec holds as the app wrote it (ISO 8601 with its own offset)."""
    return datetime.fromisoformat(stored) if stored else None


def utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)
