"""Phone calls in PostgreSQL: the routes, every webhook delivery, and one row per call.

A call's row is keyed by the provider's call id, so one call gets one session and one answer
(accept or reject) however often, and however concurrently, it is announced. The answer is
claimed by one request at a time: the request that claimed it gets the same decision again
when it is re-run (a worker died after committing), another request waits out the claim's
lease (the claimer may still be answering), and a claim whose gateway gave up is released.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psycopg2.errors

from models import live_caps
from models.applied import Applied
from models.db import database
from models.pages import keyset
from models.sessions import LockedSession, locked_session, new_session
from pipeline.admission import NO_LIVE_CAPS, LiveCaps
from pipeline.api.pages import PageRequest, next_cursor
from pipeline.api.requests import RouteSpec, RouteTerms, shown_spec
from pipeline.call.errors import LiveModelAtCapacity, PhoneCallNotFound, RouteNotFound, SessionNotFound
from pipeline.phone.sip import (
    ALL_FULL,
    GONE_BEFORE_ANSWER,
    MODEL_FULL,
    ROUTE_FULL,
    UNKNOWN_NUMBER,
    PhoneLine,
    route_matches,
)
from pipeline.privacy.sealing import DeploymentKey
from pipeline.session.state import TERMINAL_PHASES, SessionState

# A claim younger than this is left to its claimer (a gateway answers within the API's reply
# timeout); an older one, never answered, is taken over by the next delivery.
CLAIM_LEASE_S = 15

Action = Literal["accept", "reject", "answered", "busy", "ignored"]


@dataclass(frozen=True)
class Route:
    id: str
    number: str
    spec: dict[str, Any]
    terms: RouteTerms

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "number": self.number,
            "session": shown_spec(self.spec),
            **self.terms.model_dump(mode="json"),
        }


@dataclass(frozen=True)
class Decision:
    """What the gateway that received a delivery does with the call."""

    action: Action
    session_id: str | None = None
    status_code: int | None = None
    reason: str | None = None
    # The session of a call to accept, as it is now (what the accept configures).
    state: SessionState | None = None
    # What creating the session applied (its timers are sent once the transaction commits).
    applied: tuple[Applied, ...] = ()
    # The call was claimed before by a request that never said how it went: the provider may
    # have accepted it already.
    again: bool = False


# ── routes ──────────────────────────────────────────────────────────────────────────────

_ROUTE_COLUMNS = "id, number, spec, terms"


def add_route(namespace: str, route: RouteSpec) -> Route:
    """Add a route, or replace the one for the same number (the calls it answers keep theirs)."""
    row = database.execute_sql(
        f"INSERT INTO routes (id, namespace, number, spec, terms) VALUES (%s, %s, %s, %s::jsonb, %s::jsonb)"
        f" ON CONFLICT (namespace, number) DO UPDATE SET spec = EXCLUDED.spec, terms = EXCLUDED.terms"
        f" RETURNING {_ROUTE_COLUMNS}",
        (
            f"route_{uuid.uuid4().hex[:16]}",
            namespace,
            route.number,
            route.session.model_dump_json(exclude_none=True),
            route.terms.model_dump_json(),
        ),
    ).fetchone()
    return _route(row)


def routes(namespace: str, page: PageRequest) -> tuple[list[dict[str, Any]], str | None]:
    """A page of a deployment's routes in number order, each with how many calls it answered,
    has live, and refused; and the next page's cursor."""
    window = keyset(page, ("number",), created="created_at")
    rows = database.execute_sql(
        f"SELECT {_ROUTE_COLUMNS} FROM routes WHERE namespace = %(namespace)s {window.where} {window.order}",
        {"namespace": namespace, **window.parameters},
    ).fetchall()
    listed = _with_calls(namespace, [_route(row) for row in rows[: page.limit]])
    return listed, next_cursor(page, rows, lambda row: (row[1],))


def route(namespace: str, route_id: str) -> dict[str, Any]:
    """One route as the list shows it, with its calls counted (RouteNotFound if there is none)."""
    row = database.execute_sql(
        f"SELECT {_ROUTE_COLUMNS} FROM routes WHERE namespace = %s AND id = %s", (namespace, route_id)
    ).fetchone()
    if row is None:
        raise RouteNotFound(f"no route {route_id!r}")
    return _with_calls(namespace, [_route(row)])[0]


def _with_calls(namespace: str, shown: list[Route]) -> list[dict[str, Any]]:
    """Each route's JSON with how many calls it answered, has live, and refused."""
    counts = {
        row[0]: row[1:]
        for row in database.execute_sql(
            "SELECT p.route_id, count(*) FILTER (WHERE p.action = 'accept'),"
            " count(*) FILTER (WHERE p.action = 'accept' AND s.status NOT IN ('ended', 'failed')),"
            " count(*) FILTER (WHERE p.action = 'reject')"
            " FROM phone_calls p LEFT JOIN sessions s ON s.id = p.session_id"
            " WHERE p.namespace = %s AND p.route_id = ANY(%s) GROUP BY p.route_id",
            (namespace, [shown_route.id for shown_route in shown]),
        ).fetchall()
    }
    listed = []
    for shown_route in shown:
        answered, live, refused = counts.get(shown_route.id, (0, 0, 0))
        calls = {"answered": answered, "live": live, "refused": refused}
        listed.append({**shown_route.as_json(), "calls": calls})
    return listed


def refusals(namespace: str) -> dict[str, int]:
    """Calls turned away, by why."""
    rows = database.execute_sql(
        "SELECT reason, count(*) FROM phone_calls WHERE namespace = %s AND action = 'reject' GROUP BY reason",
        (namespace,),
    ).fetchall()
    return {str(reason): int(count) for reason, count in rows}


def remove_route(namespace: str, route_id: str) -> None:
    cursor = database.execute_sql(
        "DELETE FROM routes WHERE namespace = %s AND id = %s", (namespace, route_id)
    )
    if not cursor.rowcount:
        raise RouteNotFound(f"no route {route_id!r}")


def _route(row: Any) -> Route:
    route_id, number, spec, terms = row
    return Route(route_id, number, spec, RouteTerms.model_validate(terms))


def _route_for(namespace: str, dialled: str) -> Route | None:
    """The route that answers a number: an exact number first, then the longest prefix."""
    rows = database.execute_sql(f"SELECT {_ROUTE_COLUMNS} FROM routes WHERE namespace = %s", (namespace,))
    candidates = [_route(row) for row in rows.fetchall() if route_matches(row[1], dialled)]
    candidates.sort(key=lambda route: (not route.number.endswith("*"), len(route.number)), reverse=True)
    return candidates[0] if candidates else None


# ── calls ───────────────────────────────────────────────────────────────────────────────

_CALL = (
    "SELECT session_id, action, sip_status, reason, claimed_by,"
    " claimed_at < now() - %s * interval '1 second', answered_at IS NOT NULL"
    " FROM phone_calls WHERE call_id = %s FOR UPDATE"
)

_INSERT_CALL = (
    "INSERT INTO phone_calls (call_id, namespace, session_id, route_id, number, caller, action,"
    " sip_status, reason, claimed_by, claimed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())"
    " ON CONFLICT (call_id) DO NOTHING RETURNING 1"
)


@dataclass(frozen=True)
class Ringing:
    """One delivery of `realtime.call.incoming`, as the gateway received it."""

    webhook_id: str
    call_id: str
    line: PhoneLine
    request_id: str
    gateway_id: str
    namespace: str
    # The most phone calls the deployment answers at once.
    maximum_calls: int
    # Which provider announced it: the same call may be announced on both (Realtime's
    # `realtime.call.incoming` and Live's `live.transport.incoming`, each with its own id).
    provider: str = "realtime"
    # How many sessions each Live model may have in a call at once.
    live_caps: LiveCaps = NO_LIVE_CAPS


def record_delivery(webhook_id: str, call_id: str | None, event_type: str) -> None:
    """Every delivery is recorded (a retried one counted) before anything is answered."""
    database.execute_sql(
        "INSERT INTO webhook_deliveries (webhook_id, call_id, event_type) VALUES (%s, %s, %s)"
        " ON CONFLICT (webhook_id) DO UPDATE SET deliveries = webhook_deliveries.deliveries + 1,"
        " last_at = now()",
        (webhook_id, call_id, event_type),
    )


def ring(ringing: Ringing, session_for: Any, now: float, keys: Sequence[DeploymentKey] = ()) -> Decision:
    """What to do with a call announced by this delivery: accept it (its session is created,
    admitting), reject it (and why), or nothing — it was answered, or is being answered by
    another request. `session_for(route, line)` builds the session's first inputs."""
    for _ in range(3):
        decided = _known_call(ringing)
        if decided is not None:
            return decided
        route = _route_for(ringing.namespace, ringing.line.dialled)
        if route is not None and str(route.spec.get("provider", "realtime")) != ringing.provider:
            # The call's route answers it on the other provider, whose own announcement does
            # (the first accept picks the runtime surface): this one is left unanswered, since
            # rejecting it could turn the caller away.
            return Decision(
                "ignored", reason=f"the route answers its calls on {route.spec.get('provider', 'realtime')}"
            )
        refusal = _refusal(ringing, route)
        if refusal is not None:
            status, reason = refusal
            if _insert_rejection(ringing, route, status, reason):
                return Decision("reject", status_code=status, reason=reason)
            continue  # another delivery recorded the call meanwhile: decide as it did
        assert route is not None
        session_id = f"sess_{uuid.uuid4().hex}"
        terms = route.terms
        line = ringing.line.model_copy(
            update={
                "route_id": route.id,
                "transfer_targets": terms.transfer_targets,
                "keys": terms.keys,
                "silences": terms.silences,
                "silence_ms": terms.silence_ms,
            }
        )
        cap = ringing.live_caps.cap_for(ringing.provider, route.spec.get("model"))
        try:
            with new_session(session_id, ringing.gateway_id, ringing.namespace, keys=keys) as session:
                # Counted before the call's row is written: a delivery of the same call waits
                # here, not on that row while holding the model.
                model_full = live_caps.admission_refused(ringing.namespace, cap, session.execute)
                if model_full is not None:
                    raise model_full
                inserted = session.execute(
                    _INSERT_CALL,
                    (
                        ringing.call_id,
                        ringing.namespace,
                        session_id,
                        route.id,
                        line.dialled[:200],
                        line.caller[:400],
                        "accept",
                        None,
                        None,
                        ringing.request_id,
                    ),
                ).fetchone()
                if inserted is None:
                    raise _AlreadyRinging
                applied = tuple(session.apply_host(event, now) for event in session_for(route, line))
                state = session.state
        except _AlreadyRinging:
            continue
        except LiveModelAtCapacity as full:
            # The caller is turned away as when every line is busy (the session rolled back).
            if _insert_rejection(ringing, route, MODEL_FULL, full.code):
                return Decision("reject", status_code=MODEL_FULL, reason=full.code)
            continue
        return Decision("accept", session_id=session_id, state=state, applied=applied)
    return Decision("busy", reason="the call is being answered")


def claimed_session(call_id: str, request_id: str) -> str | None:
    """The session of a call this request still holds the unanswered claim of (None otherwise)."""
    row = database.execute_sql(
        "SELECT session_id FROM phone_calls WHERE call_id = %s AND claimed_by = %s AND answered_at IS NULL",
        (call_id, request_id),
    ).fetchone()
    return str(row[0]) if row is not None and row[0] is not None else None


_ANSWER = (
    "UPDATE phone_calls SET answered_at = now(), outcome = %s"
    " WHERE call_id = %s AND claimed_by = %s AND answered_at IS NULL RETURNING 1"
)


def mark_answered(session: LockedSession, call_id: str, request_id: str, outcome: str) -> bool:
    """In the session's own transaction: the call was answered under this claim. The session's
    next input (the sideband attached, or the admission failed) commits with it, so a worker
    killed between them cannot leave a call answered at the provider with no sideband."""
    return session.execute(_ANSWER, (outcome, call_id, request_id)).fetchone() is not None


def answered_without_session(call_id: str, request_id: str, outcome: str) -> None:
    """A rejected call (it has no session) was answered, or the claim was let go (`released`:
    the provider could not be reached; the next delivery claims the call again)."""
    if outcome == "released":
        database.execute_sql(
            "UPDATE phone_calls SET claimed_by = NULL"
            " WHERE call_id = %s AND claimed_by = %s AND answered_at IS NULL",
            (call_id, request_id),
        )
        return
    database.execute_sql(_ANSWER, (outcome, call_id, request_id))


def phone_call(namespace: str, call_id: str) -> dict[str, Any]:
    """What became of a phone call: its session (if it was accepted), or why it was turned away."""
    row = database.execute_sql(
        "SELECT session_id, route_id, number, caller, action, sip_status, reason, outcome,"
        " (SELECT coalesce(sum(deliveries), 0) FROM webhook_deliveries w WHERE w.call_id = p.call_id)"
        " FROM phone_calls p WHERE namespace = %s AND call_id = %s",
        (namespace, call_id),
    ).fetchone()
    if row is None:
        raise PhoneCallNotFound(f"no phone call {call_id!r}")
    session_id, route_id, number, caller, action, status, reason, outcome, deliveries = row
    return {
        "call_id": call_id,
        "session_id": session_id,
        "route_id": route_id,
        "dialled": number,
        "caller": caller,
        "action": action,
        "sip_status": status,
        "reason": reason,
        "outcome": outcome,
        "deliveries": int(deliveries),
    }


class _AlreadyRinging(Exception):
    """Another delivery created the call's row first: this session is rolled back."""


def _known_call(ringing: Ringing) -> Decision | None:
    """The decision for a call already recorded, or None for a call never seen."""
    with database.atomic():
        row = database.execute_sql(_CALL, (CLAIM_LEASE_S, ringing.call_id)).fetchone()
        if row is None:
            return None
        session_id, action, status, reason, claimed_by, lease_over, was_answered = row
        if was_answered:
            return Decision("answered", session_id=session_id)
        if claimed_by is not None and claimed_by != ringing.request_id and not lease_over:
            return Decision("busy", session_id=session_id, reason="the call is being answered")
        again = claimed_by != ringing.request_id
        if again:
            database.execute_sql(
                "UPDATE phone_calls SET claimed_by = %s, claimed_at = now() WHERE call_id = %s",
                (ringing.request_id, ringing.call_id),
            )
    if again and session_id is not None:
        # The answer (and the sideband) move to the gateway that claimed it now. Not in the
        # claim's transaction: that would lock the call's row, then the session's, while the
        # answer's record locks them the other way round.
        database.execute_sql(
            "UPDATE sessions SET owning_gateway = %s WHERE id = %s", (ringing.gateway_id, session_id)
        )
    if action == "reject":
        return Decision("reject", status_code=status, reason=reason)
    return _accept_again(session_id, ringing.namespace, again=again)


def _accept_again(session_id: str, namespace: str, *, again: bool) -> Decision:
    """The claim is this request's (again): accept with the session as it is, unless it ended
    meanwhile (its admission timed out), when the caller is turned away."""
    try:
        with locked_session(session_id, namespace=namespace) as session:
            state: SessionState = session.state
    except SessionNotFound:
        return Decision("reject", status_code=GONE_BEFORE_ANSWER, reason="session_gone")
    if state.phase in TERMINAL_PHASES:
        return Decision(
            "reject", session_id=session_id, status_code=GONE_BEFORE_ANSWER, reason="session_over"
        )
    return Decision("accept", session_id=session_id, state=state, again=again)


def _refusal(ringing: Ringing, route: Route | None) -> tuple[int, str] | None:
    if route is None:
        return UNKNOWN_NUMBER, "unknown_number"
    live = database.execute_sql(
        "SELECT count(*) FILTER (WHERE p.route_id = %s), count(*) FROM phone_calls p"
        " JOIN sessions s ON s.id = p.session_id"
        " WHERE p.namespace = %s AND p.action = 'accept' AND s.status NOT IN ('ended', 'failed')",
        (route.id, ringing.namespace),
    ).fetchone()
    on_route, everywhere = int(live[0]), int(live[1])
    # The deployment's lines are shared with the calls it places (a campaign keeps some free
    # for callers: `SWITCHBOARD_RESERVE_INBOUND`).
    going_out = database.execute_sql(
        "SELECT count(*) FROM outbound_calls WHERE namespace = %s AND outcome IS NULL", (ringing.namespace,)
    ).fetchone()
    everywhere += int(going_out[0])
    if everywhere >= ringing.maximum_calls:
        return ALL_FULL, "all_lines_busy"
    if route.terms.max_calls is not None and on_route >= route.terms.max_calls:
        return ROUTE_FULL, "route_busy"
    return None


def _insert_rejection(ringing: Ringing, route: Route | None, status: int, reason: str) -> bool:
    try:
        row = database.execute_sql(
            _INSERT_CALL,
            (
                ringing.call_id,
                ringing.namespace,
                None,
                route.id if route is not None else None,
                ringing.line.dialled[:200],
                ringing.line.caller[:400],
                "reject",
                status,
                reason,
                ringing.request_id,
            ),
        ).fetchone()
    except psycopg2.errors.UniqueViolation:
        return False
    return row is not None
