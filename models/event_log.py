"""The rows a locked transaction writes for a session: its numbered and unnumbered events in
`session_events`, the transcripts and incidents they carry, and the session row they fold into.

`models.sessions` decides what to write and when; this module says how. Every write is held
back (`SessionTransaction.defer`) to travel with the next round trip: nothing in the
transaction reads it back. The reads here are those of the ordered log: what waits behind a gap,
whether a provider event was applied already, whether a seq was declared lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum
from functools import cache
from typing import Any

from models.db import SessionTransaction
from pipeline.platform.envelope import EventEnvelope, ToGatewayItem
from pipeline.platform.releases import as_stored
from pipeline.session.state import SessionState
from pipeline.session.step import PersistTranscript, RecordIncident, Step
from pipeline.session.wire import ArrivedLate, HostInput, host_event

# ── SQL ──────────────────────────────────────────────────────────────────────────────────

_EVENT_COLUMNS = (
    "session_id, seq, provider_event_id, kind, payload, generation, received_at, disposition,"
    " applied_order, controls, taken_at, applied_at"
)
# On the database's clock, in seconds since the epoch: taken_at is the transaction's start (the
# worker took the event and asked for the row lock); applied_at is when the row was written, and
# a pending event's is set again when it is applied.
_EVENT_VALUES = (
    "%s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s::jsonb,"
    " extract(epoch FROM now()), extract(epoch FROM clock_timestamp())"
)

INSERT_EVENT = f"""
INSERT INTO session_events ({_EVENT_COLUMNS}) VALUES ({_EVENT_VALUES})
ON CONFLICT DO NOTHING RETURNING id
"""
# The hot path's event row: the lock's read said the provider's event is new and the seq is
# the next one, so nothing can conflict; if something did, the statement fails and the
# transaction is retried, rather than controls having been published for a row never written.
_INSERT_NEXT_EVENT = f"INSERT INTO session_events ({_EVENT_COLUMNS}) VALUES ({_EVENT_VALUES})"

UPDATE_EVENT = """
UPDATE session_events SET disposition = %s, applied_order = %s, controls = %s::jsonb,
    applied_at = extract(epoch FROM clock_timestamp())
 WHERE session_id = %s AND seq = %s
"""

PENDING_EVENTS = """
SELECT seq, provider_event_id, payload, generation, disposition FROM session_events
 WHERE session_id = %s AND seq > %s ORDER BY seq
"""

WAS_APPLIED = """
SELECT 1 FROM session_events
 WHERE session_id = %s AND provider_event_id = %s AND disposition IN ('applied', 'late')
"""

_SAVE_SESSION = """
UPDATE sessions SET
    state = %s::jsonb, status = %s, generation = %s, provider_call_id = %s, instructions = %s,
    usage = %s::jsonb, end_reason = %s, applied_seq = %s, logged_seq = %s, applied_count = %s,
    updated_at = now(), ended_at = CASE WHEN %s AND ended_at IS NULL THEN now() ELSE ended_at END
 WHERE id = %s
"""


_INSERT_TRANSCRIPT = (
    "INSERT INTO transcript_items (session_id, role, text, provider_item_id, response_id, seq, late)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
# More words of a stored line (`PersistTranscript.continues`): added to its row; should that row
# not be there (erased, say), the words are a row of their own rather than lost.
_CONTINUE_TRANSCRIPT = (
    "UPDATE transcript_items SET text = text || %s"
    " WHERE session_id = %s AND provider_item_id = %s AND role = %s AND NOT late RETURNING id"
)
_INSERT_UNLESS_CONTINUED = (
    "INSERT INTO transcript_items (session_id, role, text, provider_item_id, response_id, seq, late)"
    " SELECT %s, %s, %s, %s, %s, %s::bigint, %s WHERE NOT EXISTS (SELECT 1 FROM {continued})"
)
CONTINUE_OR_INSERT_TRANSCRIPT = (
    f"WITH continued AS ({_CONTINUE_TRANSCRIPT}) {_INSERT_UNLESS_CONTINUED.format(continued='continued')}"
)

_INSERT_INCIDENT = (
    "INSERT INTO incidents (session_id, code, severity, summary, context) VALUES (%s, %s, %s, %s, %s::jsonb)"
)

NEXT_LOGGED = "SELECT min(seq) FROM session_events WHERE session_id = %s AND seq >= %s"
LOST_EVENT = "SELECT 1 FROM session_events WHERE session_id = %s AND seq = %s AND disposition = 'lost'"
REPLACE_LOST = """
UPDATE session_events SET disposition = %s, applied_order = %s, controls = %s::jsonb, payload = %s::jsonb,
    kind = %s, provider_event_id = %s, applied_at = extract(epoch FROM clock_timestamp())
 WHERE session_id = %s AND seq = %s AND disposition = 'lost'
"""


def transcript_parameters(session_id: str, item: PersistTranscript, seq: int | None, late: bool) -> list[Any]:
    """The parameters of a transcript's statement: `_INSERT_TRANSCRIPT`, or for a line that
    goes on, `_CONTINUE_TRANSCRIPT` then `_INSERT_UNLESS_CONTINUED`."""
    row = [session_id, item.role, item.text, item.item_id, item.response_id, seq, late]
    if not item.continues or late:
        return row
    return [item.text, session_id, item.item_id, item.role, *row]


@cache
def _write_sql(transcripts: tuple[bool, ...], incidents: int) -> str:
    """One statement: the event row, its transcripts (each stored, or added to its line) and
    incidents, and the session."""
    parts = [f"WITH event AS ({_INSERT_NEXT_EVENT})"]
    for index, continues in enumerate(transcripts):
        if continues:
            parts.append(f", transcript_{index}_line AS ({_CONTINUE_TRANSCRIPT})")
            insert = _INSERT_UNLESS_CONTINUED.format(continued=f"transcript_{index}_line")
            parts.append(f", transcript_{index} AS ({insert})")
        else:
            parts.append(f", transcript_{index} AS ({_INSERT_TRANSCRIPT})")
    for index in range(incidents):
        parts.append(f", incident_{index} AS ({_INSERT_INCIDENT})")
    parts.append(_SAVE_SESSION.strip())
    return "\n".join(parts)


# ── rows ─────────────────────────────────────────────────────────────────────────────────


def provider_event_id(event: dict[str, Any]) -> str | None:
    """The provider's id of an event (None for the gateway's own `switchboard.*` events)."""
    value = event.get("event_id")
    if isinstance(value, str) and not str(event.get("type", "")).startswith("switchboard."):
        return value
    return None


def _controls(to_gateway: list[ToGatewayItem]) -> str:
    """What an event emitted, as its log row keeps it: each item as sent (a dial names its
    trunk, never the trunk's password)."""
    return json.dumps([item.model_dump(mode="json") for item in to_gateway])


def _event_row(
    session_id: str,
    envelope: EventEnvelope,
    disposition: str,
    order: int | None,
    to_gateway: list[ToGatewayItem],
) -> list[Any]:
    return [
        session_id,
        envelope.seq,
        provider_event_id(envelope.event),
        str(envelope.event.get("type", "")),
        json.dumps(envelope.event),
        envelope.generation,
        envelope.received_at,
        disposition,
        order,
        _controls(to_gateway),
    ]


def _session_row(
    session_id: str, state: SessionState, applied_seq: int, logged_seq: int, applied_count: int
) -> list[Any]:
    return [
        as_stored(state),
        str(state.phase),
        state.generation,
        state.call_id,
        state.instructions,
        json.dumps(state.usage.model_dump(mode="json")),
        state.end_reason,
        applied_seq,
        logged_seq,
        applied_count,
        state.is_terminal,
        session_id,
    ]


def save_session(
    session: SessionTransaction, state: SessionState, applied_seq: int, logged_seq: int, applied_count: int
) -> None:
    """The session row: its state and the log's head."""
    session.defer(_SAVE_SESSION, _session_row(session.id, state, applied_seq, logged_seq, applied_count))


def log_pending(session: SessionTransaction, envelope: EventEnvelope) -> bool:
    """Log a numbered event that does not apply yet; answers whether its seq was new."""
    row = _event_row(session.id, envelope, "pending", None, [])
    return session.execute(INSERT_EVENT, row).fetchone() is not None


def persist_effects(session: SessionTransaction, step: Step, seq: int | None, *, late: bool) -> None:
    """The transcripts and incidents of an event whose row was written alone."""
    for effect in step.effects:
        if isinstance(effect, PersistTranscript):
            statement = CONTINUE_OR_INSERT_TRANSCRIPT if effect.continues and not late else _INSERT_TRANSCRIPT
            session.defer(statement, transcript_parameters(session.id, effect, seq, late))
        elif isinstance(effect, RecordIncident):
            session.defer(
                _INSERT_INCIDENT,
                (session.id, effect.code, effect.severity, effect.summary, json.dumps(effect.context)),
            )


# ── reads of the ordered log ─────────────────────────────────────────────────────────────


def pending_events(session: SessionTransaction, after_seq: int) -> dict[int, tuple[Any, ...]]:
    """The logged events after `after_seq`, by seq."""
    return {row[0]: row for row in session.execute(PENDING_EVENTS, (session.id, after_seq)).fetchall()}


def was_applied(session: SessionTransaction, event_id: str | None) -> bool:
    """Whether the provider's event `event_id` was applied (or landed late) under some seq."""
    if event_id is None:
        return False
    return session.execute(WAS_APPLIED, (session.id, event_id)).fetchone() is not None


def was_declared_lost(session: SessionTransaction, seq: int) -> bool:
    return session.execute(LOST_EVENT, (session.id, seq)).fetchone() is not None


def next_logged(session: SessionTransaction, seq: int) -> int | None:
    """The lowest seq logged from `seq` on."""
    row = session.execute(NEXT_LOGGED, (session.id, seq)).fetchone()
    return row[0] if row else None


# ── the ways an applied event's row is written ──────────────────────────────────────────
# Each returns what it wrote: the row alone (the effects are persisted after it), or
# everything (the hot path's one statement).


class Written(Enum):
    """What a write of an applied event's row wrote."""

    ROW_ONLY = "row only"  # its effects are persisted after it
    ALL = "all"  # the row, its effects and the session, in one statement


# (step, disposition, applied order, the items for the gateway) -> what was written
Write = Callable[[Step, str, int, list[ToGatewayItem]], Written]


def write_next(session: SessionTransaction, envelope: EventEnvelope, logged_seq: int) -> Write:
    """The next event, nothing waiting: its row, its transcripts and incidents and the
    session in one statement."""

    def write(step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> Written:
        seq = envelope.seq
        transcripts = [e for e in step.effects if isinstance(e, PersistTranscript)]
        incidents = [e for e in step.effects if isinstance(e, RecordIncident)]
        parameters: list[Any] = [*_event_row(session.id, envelope, disposition, order, to_gateway)]
        late = disposition == "late"
        for item in transcripts:
            parameters += transcript_parameters(session.id, item, seq, late)
        for incident in incidents:
            context = json.dumps(incident.context)
            parameters += [session.id, incident.code, incident.severity, incident.summary, context]
        logged = max(logged_seq, seq)
        parameters += _session_row(session.id, step.state, seq, logged, order)
        shapes = tuple(item.continues and not late for item in transcripts)
        session.defer(_write_sql(shapes, len(incidents)), parameters)
        return Written.ALL

    return write


def write_duplicate(session: SessionTransaction, envelope: EventEnvelope) -> Write:
    """A seq whose provider event was applied under a lower one: its row, as a duplicate,
    without the provider's id (which belongs to the applied row)."""

    def write(_step: Step, disposition: str, order: int, _to_gateway: list[ToGatewayItem]) -> Written:
        row = _event_row(session.id, envelope, disposition, order, [])
        row[2] = None
        session.defer(INSERT_EVENT, row)
        return Written.ROW_ONLY

    return write


def update_pending(session: SessionTransaction, seq: int) -> Write:
    """A logged (pending) event is applied: its row gets its disposition and controls."""

    def write(_step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> Written:
        session.defer(UPDATE_EVENT, (disposition, order, _controls(to_gateway), session.id, seq))
        return Written.ROW_ONLY

    return write


def replace_lost(session: SessionTransaction, late: ArrivedLate, envelope: EventEnvelope) -> Write:
    """A seq declared lost came after all: the marker's row becomes the late event."""

    def write(_step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> Written:
        session.defer(
            REPLACE_LOST,
            (
                disposition,
                order,
                _controls(to_gateway),
                json.dumps(host_event(late)),
                late.type,
                provider_event_id(envelope.event),
                session.id,
                envelope.seq,
            ),
        )
        return Written.ROW_ONLY

    return write


def insert_unnumbered(
    session: SessionTransaction, event: HostInput, seq: int | None, generation: int, now: float
) -> Write:
    """A host input (without a seq, in the order it was applied), or the marker of a lost seq
    (in that seq's place): a row of its own."""

    def write(_step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> Written:
        session.defer(
            INSERT_EVENT,
            (
                session.id,
                seq,
                None,
                event.type,
                json.dumps(host_event(event)),
                generation,
                now,
                disposition,
                order,
                _controls(to_gateway),
            ),
        )
        return Written.ROW_ONLY

    return write
