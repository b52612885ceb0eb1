"""The row lock and the ordered event log of a session.

`locked_session(id)` is the one place a row lock is taken. Under it, `LockedSession.deliver`
logs a numbered event and applies every logged event from `applied_seq + 1` upward while they
are contiguous (DESIGN invariant 2), and `apply_host` applies an unnumbered host input
(creation, admission, a timer). Both return what must leave the transaction: the items for the gateway
for the owning gateway, timers to schedule, incidents to report.

The hot path (the next event of a live call) is two round trips: one opens the transaction,
takes the lock and reads the session (and whether the provider already sent this event under
another seq); the other writes the event, its effects and the session and commits. Between the
two the worker publishes the controls, still under the lock (DESIGN invariant 3): writes that
answer nothing are held back (`LockedSession.defer`) and travel with the COMMIT. Building these
statements through the ORM cost more than running them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from functools import cache
from typing import Any

import psycopg2

from models import campaigns, compactions, timers
from models import outbound as outgoing
from models.data_keys import create_session_key, session_public_key
from models.db import advisory_key, database, reopen
from models.releases import read_across
from pipeline.call.catalog import ToolError, ToolOutcome
from pipeline.call.errors import (
    MalformedFrame,
    SessionExists,
    SessionNotFound,
    ToolOutcomeConflict,
    ToolStepTerminal,
)
from pipeline.call.tool_steps import ToolStepIdentity
from pipeline.dialects import dialect_of, parse_inbound
from pipeline.platform.envelope import (
    CloseCall,
    CollectDigits,
    EventEnvelope,
    OpenSideband,
    PlaceCall,
    Reply,
    SendControl,
    ToGatewayItem,
    TransferCall,
)
from pipeline.platform.releases import as_stored
from pipeline.privacy.sealing import DeploymentKey
from pipeline.session import sequencer
from pipeline.session.sequencer import Arrival
from pipeline.session.state import TERMINAL_PHASES, Phase, SessionState, Usage
from pipeline.session.step import (
    AnswerRequest,
    CancelTimer,
    CancelTool,
    FinishCompaction,
    InterruptToolStep,
    NotifyApp,
    OutboundEnded,
    PersistTranscript,
    RecordIncident,
    RefuseToolStep,
    RequestToolStep,
    RunTool,
    SaveCompactionSummary,
    ScheduleTimer,
    StartCompaction,
    Step,
    Suppress,
)
from pipeline.session.step import CloseCall as CloseCallEffect
from pipeline.session.step import CollectDigits as CollectDigitsEffect
from pipeline.session.step import OpenSideband as OpenSidebandEffect
from pipeline.session.step import PlaceCall as PlaceCallEffect
from pipeline.session.step import TransferCall as TransferCallEffect
from pipeline.session.wire import (
    ArrivedLate,
    CompactionUnsaved,
    GatewayLost,
    HostInput,
    SeqLost,
    TimerFired,
    control_wire,
    host_event,
)
from pipeline.transitions import Disposition, apply, disposition_of

# ── SQL ──────────────────────────────────────────────────────────────────────────────────

# BEGIN travels with the lock: one round trip opens the transaction, takes the row and reads it,
# with which of the provider events about to be delivered were applied already (under other
# seqs). The read is a statement of its own after the lock, so it sees what the transaction
# that held the lock before committed (READ COMMITTED takes a snapshot per statement; a subquery
# of the locking statement would use the snapshot from before the wait). The state comes as
# text: pydantic parses the JSON itself, faster than psycopg2's json.loads and a validation of
# dicts.
_READ_SESSION = """
SELECT generation, applied_seq, logged_seq, applied_count, owning_gateway, state::text,
       erased_at IS NOT NULL,
       ARRAY(SELECT provider_event_id FROM session_events
              WHERE session_id = %(id)s AND provider_event_id = ANY(%(events)s)
                AND disposition IN ('applied', 'late'))
  FROM sessions WHERE id = %(id)s AND namespace = coalesce(%(namespace)s, namespace)
"""
# Deployments may share a database: a worker locks only its own deployment's sessions (the
# namespace it is given), so another deployment's id is a session it cannot find.
LOCK_SESSION = f"""
BEGIN;
SELECT 1 FROM sessions WHERE id = %(id)s AND namespace = coalesce(%(namespace)s, namespace) FOR UPDATE;
{_READ_SESSION}"""

# A session's first transaction publishes what it decided before it commits (a dial, say), and
# what that sets off can come back to the workers before the commit: a lock taken then would not
# see the row yet and would call the session missing. So the creating transaction holds the
# session's creation lock (an advisory lock, released with its commit or rollback), and a lock
# that finds no row waits for that lock and looks once more (`_transaction`).
CREATE_SESSION = """
BEGIN;
SELECT pg_advisory_xact_lock(%s);
INSERT INTO sessions (id, status, owning_gateway, namespace, state)
VALUES (%s, 'created', %s, %s, %s::jsonb)
ON CONFLICT DO NOTHING RETURNING id
"""
# Shared: waiters never wait for each other, only for the transaction creating the row.
AWAIT_CREATION = f"""
SELECT pg_advisory_xact_lock_shared(%(creation)s);
SELECT 1 FROM sessions WHERE id = %(id)s AND namespace = coalesce(%(namespace)s, namespace) FOR UPDATE;
{_READ_SESSION}"""

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
        parts.append(
            f", incident_{index} AS (INSERT INTO incidents (session_id, code, severity, summary, context)"
            " VALUES (%s, %s, %s, %s, %s::jsonb))"
        )
    parts.append(_SAVE_SESSION.strip())
    return "\n".join(parts)


TAKE_OVER = "UPDATE sessions SET owning_gateway = %s WHERE id = %s"

NEXT_LOGGED = "SELECT min(seq) FROM session_events WHERE session_id = %s AND seq >= %s"
LOST_EVENT = "SELECT 1 FROM session_events WHERE session_id = %s AND seq = %s AND disposition = 'lost'"
REPLACE_LOST = """
UPDATE session_events SET disposition = %s, applied_order = %s, controls = %s::jsonb, payload = %s::jsonb,
    kind = %s, provider_event_id = %s, applied_at = extract(epoch FROM clock_timestamp())
 WHERE session_id = %s AND seq = %s AND disposition = 'lost'
"""

# The phases of a session not yet over, as the status column spells them.
_UNFINISHED = ", ".join(f"'{phase}'" for phase in Phase if phase not in TERMINAL_PHASES)

# The sessions a gateway holds a sideband for, or will: a takeover moves all of them.
OWNED_UNFINISHED = f"""
SELECT id FROM sessions
 WHERE namespace = %s AND owning_gateway = %s AND status IN ({_UNFINISHED})
 ORDER BY created_at
"""


OWNERS_OF_UNFINISHED = f"""
SELECT DISTINCT owning_gateway FROM sessions
 WHERE namespace = %s AND status IN ({_UNFINISHED})
"""


def owners_of_unfinished(namespace: str) -> list[str]:
    """The gateways that own a deployment's unfinished sessions."""
    return sorted(str(row[0]) for row in database.execute_sql(OWNERS_OF_UNFINISHED, (namespace,)).fetchall())


class _Written(Enum):
    """What a write of an applied event's row wrote."""

    ROW_ONLY = "row only"  # its effects are persisted after it
    ALL = "all"  # the row, its effects and the session, in one statement


_Write = Callable[[Step, str, int, list[ToGatewayItem]], _Written]


def _controls(to_gateway: list[ToGatewayItem]) -> str:
    """What an event emitted, as its log row keeps it: each item as sent (a dial names its
    trunk, never the trunk's password)."""
    return json.dumps([item.model_dump(mode="json") for item in to_gateway])


def sessions_owned_by(namespace: str, gateway_id: str) -> list[str]:
    """The unfinished sessions a gateway of the deployment `namespace` owns (read without locks:
    each is locked to move). Gateway ids are a deployment's own: another's gw1 is not this one's."""
    rows = database.execute_sql(OWNED_UNFINISHED, (namespace, gateway_id)).fetchall()
    return [str(row[0]) for row in rows]


# ── results ─────────────────────────────────────────────────────────────────────────────


@dataclass
class Applied:
    """What one locked transaction decided that must leave it."""

    to_gateway: list[ToGatewayItem] = field(default_factory=list)
    timers: list[ScheduleTimer] = field(default_factory=list)
    incidents: list[RecordIncident] = field(default_factory=list)
    # Tool bodies to run on tool_runs, and running ones to stop, once the transaction commits.
    tool_runs: list[RunTool] = field(default_factory=list)
    tool_cancels: list[CancelTool] = field(default_factory=list)
    # Answers to API requests, each for the gateway that is waiting on it.
    replies: list[tuple[str, Reply]] = field(default_factory=list)
    # (seq, disposition) of every event this transaction logged or applied, for tests and logs.
    dispositions: list[tuple[int | None, str]] = field(default_factory=list)
    # How each compaction this transaction finished ended (for the metrics).
    compactions_finished: list[str] = field(default_factory=list)
    # What the app that owns the call is told, once the transaction commits.
    notifications: list[NotifyApp] = field(default_factory=list)
    # The campaigns whose dialer looks again once this commits (a call of theirs ended), and
    # the calls going out that ended, by outcome (for the metrics).
    campaigns: list[str] = field(default_factory=list)
    calls_ended: list[str] = field(default_factory=list)
    # The session's usage before and after this transaction (for the metrics: whatever events
    # it applied, a drained one included).
    usage_before: Usage | None = None
    usage_after: Usage | None = None
    # The session's provider (its usage is priced by that provider's model).
    provider: str = "realtime"
    # The session streams its call log to the app's broker, and this applied an input of it
    # (its call log may have grown): its stream is swept once this commits.
    streams_events: bool = False

    @classmethod
    def together(cls, parts: list[Applied]) -> Applied:
        """What several deliveries of one transaction decided, in their order."""
        if len(parts) == 1:
            return parts[0]
        merged = cls()
        for part in parts:
            for name in (
                "to_gateway",
                "timers",
                "incidents",
                "tool_runs",
                "tool_cancels",
                "replies",
                "dispositions",
                "compactions_finished",
                "notifications",
                "campaigns",
                "calls_ended",
            ):
                getattr(merged, name).extend(getattr(part, name))
            if merged.usage_before is None:
                merged.usage_before = part.usage_before
            merged.usage_after = part.usage_after or merged.usage_after
            merged.provider = part.provider
            merged.streams_events = merged.streams_events or part.streams_events
        return merged


@dataclass
class _Head:
    """The locked row's bookkeeping columns."""

    generation: int
    applied_seq: int
    logged_seq: int
    applied_count: int
    owning_gateway: str


# ── the lock ────────────────────────────────────────────────────────────────────────────


@contextmanager
def locked_session(session_id: str, *, namespace: str | None = None) -> Iterator[LockedSession]:
    """Open a transaction and lock the session row (blocking, never NOWAIT: a waiting worker
    must see every event the holder logged). Commits when the block ends, rolls back if it
    raises. With `namespace`, only a session of that deployment is found (a worker always
    names its own; only the tests' checks of the whole database leave it out)."""
    with _transaction(session_id, namespace, create_for=None) as session:
        yield session


@contextmanager
def locked_for(envelopes: list[EventEnvelope], *, namespace: str | None = None) -> Iterator[LockedSession]:
    """`locked_session` for delivering these envelopes of one session: the lock's round trip
    also reads which of their provider events were applied already (under other seqs), which
    the hot path must know before it publishes anything."""
    event_ids = [event_id for e in envelopes if (event_id := _provider_event_id(e.event)) is not None]
    session_id = envelopes[0].session_id
    with _transaction(session_id, namespace, create_for=None, provider_event_ids=event_ids) as session:
        yield session


@contextmanager
def new_session(
    session_id: str, owning_gateway: str, namespace: str = "", keys: Sequence[DeploymentKey] = ()
) -> Iterator[LockedSession]:
    """Insert a session row (of the deployment `namespace`) and hold it, in the same
    transaction, for its first input (its creation). An id that exists already is a
    `SessionExists` refusal. With the deployment's `keys`, the session's key pair is made in
    the same transaction (its public half seals the tools' sensitive parameters)."""
    with _transaction(session_id, namespace, create_for=(owning_gateway, namespace)) as session:
        if keys:
            create_session_key(session_id, keys, execute=session.execute)
        yield session


@contextmanager
def _transaction(
    session_id: str,
    namespace: str | None,
    *,
    create_for: tuple[str, str] | None,
    provider_event_ids: list[str] | None = None,
) -> Iterator[LockedSession]:
    reading = {"id": session_id, "namespace": namespace, "events": provider_event_ids or []}
    opening: tuple[str, Any] = (LOCK_SESSION, reading)
    if create_for is not None:
        initial = as_stored(SessionState())
        owning_gateway, namespace = create_for
        opening = (
            CREATE_SESSION,
            (creation_lock(session_id), session_id, owning_gateway, namespace, initial),
        )
    cursor = _open(*opening)
    try:
        if create_for is not None:
            if cursor.fetchone() is None:
                raise SessionExists(f"session {session_id!r} exists already")
            cursor.execute(_READ_SESSION, reading)
        row = cursor.fetchone()
        if row is None and create_for is None:
            # Not there, or not committed yet: wait for a transaction still creating it.
            cursor.execute(AWAIT_CREATION, {**reading, "creation": creation_lock(session_id)})
            row = cursor.fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        generation, applied_seq, logged_seq, applied_count, gateway, state, erased, applied_events = row
        session = LockedSession(
            session_id,
            cursor,
            _Head(generation, applied_seq, logged_seq, applied_count, gateway),
            read_across(SessionState, state, "stored session state"),
            checked_event_ids=provider_event_ids or [],
            applied_event_ids=applied_events,
            erased=bool(erased),
        )
        yield session
        session.commit()
    except BaseException:
        _rollback(cursor)
        raise
    finally:
        cursor.close()


def creation_lock(session_id: str) -> int:
    """The advisory lock a session's creating transaction holds."""
    return advisory_key(f"switchboard session {session_id}")


def _open(sql: str, parameters: Any) -> Any:
    """Run a transaction's opening statement. A connection PostgreSQL dropped (a restart) is
    only found dead by using it; nothing ran yet, so reconnect and run it once more."""
    cursor = database.cursor()
    try:
        cursor.execute(sql, parameters)
    except (psycopg2.OperationalError, psycopg2.InterfaceError):
        if not cursor.connection.closed:
            _rollback(cursor)
            raise
        reopen()
        cursor = database.cursor()
        cursor.execute(sql, parameters)
    return cursor


def _rollback(cursor: Any) -> None:
    try:
        cursor.execute("ROLLBACK")
    except psycopg2.Error:  # a dead connection has rolled back already
        database.close()


class LockedSession:
    """A session row held under `SELECT … FOR UPDATE` for the length of one transaction."""

    def __init__(
        self,
        session_id: str,
        cursor: Any,
        head: _Head,
        state: SessionState,
        *,
        checked_event_ids: list[str] | None = None,
        applied_event_ids: list[str] | None = None,
        erased: bool = False,
    ) -> None:
        self.id = session_id
        # The session's content was erased (`models.erasure`): nothing more of it is kept.
        self.erased = erased
        self._cursor = cursor
        self._head = head
        self.state = state
        # The provider event ids the lock's read asked about, and those of them applied already
        # (then, as this transaction applies provider events, theirs too).
        self._checked_event_ids = set(checked_event_ids or ())
        self._applied_event_ids = set(applied_event_ids or ())
        # Compaction summaries that could not be stored in this transaction: (number, why).
        self._unsaved_summaries: list[tuple[int, str]] = []
        # Writes held back for the next round trip (see `defer`), as the statements to send.
        self._deferred: list[bytes] = []

    @property
    def owning_gateway(self) -> str:
        return self._head.owning_gateway

    @property
    def applied_seq(self) -> int:
        return self._head.applied_seq

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        """Run SQL inside this locked transaction (for the other tables a session owns), after
        the writes held back so far, so that it sees them."""
        self._flush()
        self._cursor.execute(sql, parameters)
        return self._cursor

    def defer(self, sql: str, parameters: Any = ()) -> None:
        """A write nothing in this transaction reads the answer of: it travels with the next
        statement that needs a round trip anyway (the COMMIT, on the hot path)."""
        self._deferred.append(self._cursor.mogrify(sql, parameters))

    def commit(self) -> None:
        """The held-back writes and the COMMIT, in one round trip."""
        self._deferred.append(b"COMMIT")
        self._flush()

    def _flush(self) -> None:
        if self._deferred:
            statements, self._deferred = self._deferred, []
            self._cursor.execute(b";\n".join(statements))

    # ── numbered events ────────────────────────────────────────────────────────────────

    def deliver(self, envelope: EventEnvelope) -> Applied:
        """Log one numbered event, then apply every contiguous logged event after
        `applied_seq` (the order is the sequencer's). A redelivered seq changes nothing."""
        if self.erased:
            return self._deliver_erased(envelope)
        applied = Applied()
        head = self._head
        seq = envelope.seq
        where = sequencer.arrival(head.applied_seq, head.logged_seq, seq)
        if where is Arrival.REDELIVERED:
            if self._was_declared_lost(seq):
                # It lands now, at the end of the log, as arrived late: its transcript is kept,
                # and nothing acts on an event the call has moved past.
                late = ArrivedLate(event=envelope.event)
                decided = self._decide(host_event(late), envelope.generation)
                self._apply_event(
                    decided, seq, applied, write=self._replace_lost(late, envelope), arrived_late=True
                )
                self._save()
            return applied
        if where is Arrival.NEXT:
            if not self._applied_before(envelope):
                # The common case: the next event, nothing waiting — one statement does it all,
                # and it goes with the COMMIT.
                decided = self._decide(envelope.event, envelope.generation)
                self._apply_event(decided, seq, applied, write=self._write_all(envelope))
                event_id = _provider_event_id(envelope.event)
                if event_id is not None:
                    self._applied_event_ids.add(event_id)
                self._settle_unsaved(applied, envelope.received_at)
                return applied
            # The provider sent this event before, under a lower seq: this seq occupies its
            # slot in the order as a duplicate, and applies as nothing.
            self._apply_duplicate(seq, applied, write=self._insert_duplicate(envelope))
        else:
            if self._insert_event(envelope, "pending", None) and where is Arrival.EARLY:
                applied.dispositions.append((seq, "pending"))
            head.logged_seq = max(head.logged_seq, seq)
        self._drain(applied)
        # An early seq opens a gap; one that fills a gap may leave the next gap open behind the
        # events it let through: watched now, or its events would wait for ever if none came after.
        self._watch_gap(applied)
        self._save()
        self._settle_unsaved(applied, envelope.received_at)
        return applied

    def _deliver_erased(self, envelope: EventEnvelope) -> Applied:
        """An event of an erased session (a straggler of the ended call, an end asked again) is
        not kept: its words would land after the erasure. It is decided only for the answer to
        a request it carries (an end of the ended call is refused, as ever)."""
        applied = Applied()
        step, _ = self._decide(envelope.event, envelope.generation)
        applied.replies += [self._reply(e) for e in step.effects if isinstance(e, AnswerRequest)]
        applied.dispositions.append((envelope.seq, "erased"))
        return applied

    def _reply(self, effect: AnswerRequest) -> tuple[str, Reply]:
        """An API request's answer, for the gateway waiting on it."""
        reply = Reply(
            id=f"reply_{effect.request_id}",
            request_id=effect.request_id,
            status=effect.status,
            body={"session_id": self.id, **effect.body},
        )
        return effect.gateway_id, reply

    def _drain(self, applied: Applied) -> None:
        """Apply the logged events after applied_seq while they are contiguous."""
        head = self._head
        if head.logged_seq <= head.applied_seq:
            return
        self.execute(PENDING_EVENTS, (self.id, head.applied_seq))
        rows = {row[0]: row for row in self._cursor.fetchall()}
        for seq in sequencer.contiguous(head.applied_seq, rows):
            _, provider_event_id, payload, generation, disposition = rows[seq]
            if disposition == "duplicate" or self._was_applied(provider_event_id):
                self._apply_duplicate(seq, applied, write=self._update_pending(seq))
            else:
                decided = self._decide(payload, generation)
                self._apply_event(decided, seq, applied, write=self._update_pending(seq))

    # ── host inputs: creation, admission, timers ───────────────────────────────────────

    def apply_host(self, event: HostInput, now: float) -> Applied:
        """Decide, log and carry out one host input. A refusal raises before anything is
        logged, so a refused request leaves no trace in the fold."""
        applied = Applied()
        self._apply_event(self._decide_host(event), None, applied, write=self._insert_host(event, now))
        self._save()
        self._settle_unsaved(applied, now)
        return applied

    def take_over(self, gateway_id: str, now: float, *, handed_over: bool = False) -> Applied:
        """The owning gateway died (or, `handed_over`, is stopping): `gateway_id` owns the
        session from now on (its controls go there), and the session re-opens its sideband
        through it."""
        self.defer(TAKE_OVER, (gateway_id, self.id))
        self._head.owning_gateway = gateway_id
        return self.apply_host(GatewayLost(gateway_id=gateway_id, handed_over=handed_over), now)

    def fire_timer(self, name: str, now: float) -> Applied:
        """A timer fired (its delayed message, or the sweeper): it is no longer pending, and the
        transition checks it against the state it finds. A timer that is not pending (cancelled,
        or fired already by the other of its two paths) fires nothing."""
        if not timers.fired(self, name):
            return Applied()
        missing = sequencer.gap_of(name)
        if missing is not None:
            return self._skip_gap(missing, now)
        return self.apply_host(TimerFired(name=name), now)

    # ── gaps: a seq that never arrives ─────────────────────────────────────────────────

    def _watch_gap(self, applied: Applied) -> None:
        """Events wait behind a missing seq: if it has not come within the gap timeout, it is
        declared lost (the gateway died between numbering and enqueueing it, say)."""
        missing = sequencer.awaited(self._head.applied_seq, self._head.logged_seq)
        if missing is None:
            return
        name = sequencer.gap_timer(missing)
        if timers.schedule_once(self, name, sequencer.GAP_TIMEOUT_MS):
            applied.timers.append(ScheduleTimer(name=name, delay_ms=sequencer.GAP_TIMEOUT_MS))

    def _skip_gap(self, missing: int, now: float) -> Applied:
        """The gap timer of `missing` fired: if the seq is still the one awaited, a `seq_lost`
        marker takes its place and that of every seq missing with it (an `event_lost` warning
        each) and the events after them are applied."""
        applied = Applied()
        head = self._head
        if not sequencer.is_still_missing(head.applied_seq, missing):
            return applied  # it arrived (or an earlier gap is still open)
        self.execute(NEXT_LOGGED, (self.id, missing))
        row = self._cursor.fetchone()
        for seq in sequencer.declared_lost(missing, row[0] if row else None):
            marker = SeqLost(seq=seq)
            self._apply_event(self._decide_host(marker), seq, applied, write=self._insert_marker(marker, now))
            head.logged_seq = max(head.logged_seq, seq)
        self._drain(applied)
        self._watch_gap(applied)
        self._save()
        return applied

    def _applied_before(self, envelope: EventEnvelope) -> bool:
        """Whether the envelope's provider event was applied under another seq (the lock's read
        answered it for the envelope it was opened for; any other is asked now)."""
        event_id = _provider_event_id(envelope.event)
        if event_id is None:
            return False
        if event_id in self._applied_event_ids:
            return True
        if event_id in self._checked_event_ids:
            return False
        return self._was_applied(event_id)

    def _was_applied(self, provider_event_id: str | None) -> bool:
        if provider_event_id is None:
            return False
        self.execute(WAS_APPLIED, (self.id, provider_event_id))
        return self._cursor.fetchone() is not None

    def _was_declared_lost(self, seq: int) -> bool:
        self.execute(LOST_EVENT, (self.id, seq))
        return self._cursor.fetchone() is not None

    def _settle_unsaved(self, applied: Applied, now: float) -> None:
        """A summary that could not be stored abandons its compaction: logged as a host input
        in the same transaction, so the session's state stays the fold of its log."""
        while self._unsaved_summaries:
            number, reason = self._unsaved_summaries.pop(0)
            more = self.apply_host(CompactionUnsaved(compaction=number, reason=reason), now)
            for name in ("to_gateway", "timers", "incidents", "tool_runs", "tool_cancels", "replies"):
                getattr(applied, name).extend(getattr(more, name))

    # ── the one apply path ─────────────────────────────────────────────────────────────

    def _apply_event(
        self,
        decided: tuple[Step, Disposition],
        seq: int | None,
        applied: Applied,
        *,
        write: _Write,
        arrived_late: bool = False,
    ) -> None:
        """Write a decided event's row (how, `write` says), persist and collect its effects, and
        advance the head. The transcripts of a late event, or of one that `arrived_late` after
        its seq was declared lost, are marked late in the record."""
        step, disposition = decided
        order = self._head.applied_count + 1
        prefix = f"ctl_{seq}" if seq is not None else f"ctl_x{order}"
        to_gateway = self._to_gateway(step, prefix) if disposition == "applied" else []
        if write(step, disposition, order, to_gateway) is _Written.ROW_ONLY:
            self._persist_effects(step, seq, late=arrived_late or disposition == "late")
        self._collect(step, applied, to_gateway)
        self._advance(seq, order)
        applied.dispositions.append((seq, disposition))

    def _apply_duplicate(self, seq: int, applied: Applied, *, write: _Write) -> None:
        """A seq whose provider event was applied under another seq: it occupies its slot in
        the order and applies as nothing."""
        order = self._head.applied_count + 1
        write(Step(state=self.state), "duplicate", order, [])
        self._advance(seq, order)
        applied.dispositions.append((seq, "duplicate"))

    def _advance(self, seq: int | None, order: int) -> None:
        head = self._head
        head.applied_count = order
        if seq is not None and seq > head.applied_seq:
            head.applied_seq = seq
            head.logged_seq = max(head.logged_seq, seq)

    # The ways an applied event's row is written. Each returns what it wrote: the row alone
    # (the effects are persisted after it), or everything (the hot path's one statement). All
    # are held back (`defer`): nothing in the transaction reads them back.

    def _write_all(self, envelope: EventEnvelope) -> _Write:
        """The next event, nothing waiting: its row, its transcripts and incidents and the
        session in one statement."""

        def write(step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> _Written:
            seq = envelope.seq
            transcripts = [e for e in step.effects if isinstance(e, PersistTranscript)]
            incidents = [e for e in step.effects if isinstance(e, RecordIncident)]
            parameters: list[Any] = [*self._event_row(envelope, disposition, order, to_gateway)]
            late = disposition == "late"
            for item in transcripts:
                parameters += transcript_parameters(self.id, item, seq, late)
            for incident in incidents:
                context = json.dumps(incident.context)
                parameters += [self.id, incident.code, incident.severity, incident.summary, context]
            logged = max(self._head.logged_seq, seq)
            parameters += self._session_row(step.state, seq, logged, order)
            shapes = tuple(item.continues and not late for item in transcripts)
            self.defer(_write_sql(shapes, len(incidents)), parameters)
            return _Written.ALL

        return write

    def _insert_duplicate(self, envelope: EventEnvelope) -> _Write:
        """A seq whose provider event was applied under a lower one: its row, as a duplicate,
        without the provider's id (which belongs to the applied row)."""

        def write(_step: Step, disposition: str, order: int, _to_gateway: list[ToGatewayItem]) -> _Written:
            row = self._event_row(envelope, disposition, order, [])
            row[2] = None
            self.defer(INSERT_EVENT, row)
            return _Written.ROW_ONLY

        return write

    def _update_pending(self, seq: int) -> _Write:
        """A logged (pending) event is applied: its row gets its disposition and controls."""

        def write(_step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> _Written:
            self.defer(UPDATE_EVENT, (disposition, order, _controls(to_gateway), self.id, seq))
            return _Written.ROW_ONLY

        return write

    def _replace_lost(self, late: ArrivedLate, envelope: EventEnvelope) -> _Write:
        """A seq declared lost came after all: the marker's row becomes the late event."""

        def write(_step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> _Written:
            self.defer(
                REPLACE_LOST,
                (
                    disposition,
                    order,
                    _controls(to_gateway),
                    json.dumps(host_event(late)),
                    late.type,
                    _provider_event_id(envelope.event),
                    self.id,
                    envelope.seq,
                ),
            )
            return _Written.ROW_ONLY

        return write

    def _insert_host(self, event: HostInput, now: float) -> _Write:
        """A host input: a row of its own, without a seq, in the order it was applied."""
        return self._insert_unnumbered(event, None, now)

    def _insert_marker(self, marker: SeqLost, now: float) -> _Write:
        """The marker of a lost seq, in that seq's place."""
        return self._insert_unnumbered(marker, marker.seq, now)

    def _insert_unnumbered(self, event: HostInput, seq: int | None, now: float) -> _Write:
        def write(_step: Step, disposition: str, order: int, to_gateway: list[ToGatewayItem]) -> _Written:
            self.defer(
                INSERT_EVENT,
                (
                    self.id,
                    seq,
                    None,
                    event.type,
                    json.dumps(host_event(event)),
                    self.state.generation,
                    now,
                    disposition,
                    order,
                    _controls(to_gateway),
                ),
            )
            return _Written.ROW_ONLY

        return write

    # ── shared ─────────────────────────────────────────────────────────────────────────

    def _decide_host(self, event: HostInput) -> tuple[Step, Disposition]:
        """What a host input does; it is logged applied (a refusal raises before anything is
        logged), but for the marker of a lost seq."""
        step = apply(self.state, event, self.state.generation)
        return step, "lost" if isinstance(event, SeqLost) else "applied"

    def _decide(self, event: dict[str, Any], generation: int) -> tuple[Step, Disposition]:
        """What a numbered event does, and how the log records it (the pipeline decides both;
        an end request is never late, and a stale caller line still counts)."""
        try:
            parsed = parse_inbound(event)
        except MalformedFrame as exc:
            # The gateway validates before it enqueues, so this is a replayed or hand-made
            # message; it occupies its seq and applies as an incident.
            incident = RecordIncident(
                code=exc.code, summary=str(exc), severity="warning", context={"type": event.get("type")}
            )
            return Step(state=self.state, effects=(incident,)), "applied"
        return apply(self.state, parsed, generation), disposition_of(self.state, parsed, generation)

    def _sealing_key(self) -> str | None:
        public = session_public_key(self.id, execute=self.execute)
        return None if public is None else base64.urlsafe_b64encode(public).decode()

    def _open_sideband(self, state: SessionState, directive_id: str, call_id: str) -> OpenSideband:
        return OpenSideband(
            id=directive_id,
            call_id=call_id,
            provider=state.provider.value,
            redact=tuple(sorted(state.privacy.kinds)),
            keys=_meaningful_keys(state),
            sealed=state.tool_sensitive,
            sealing_key=self._sealing_key() if state.tool_sensitive else None,
            route_id=state.phone.route_id if state.phone is not None else "",
        )

    def _to_gateway(self, step: Step, prefix: str) -> list[ToGatewayItem]:
        items: list[ToGatewayItem] = []
        for index, control in enumerate(step.controls):
            event_id = f"{prefix}_{index}"
            wire = control_wire(control.model_copy(update={"event_id": event_id}))
            items.append(SendControl(id=event_id, control=wire))
        provider = step.state.provider.value
        for index, effect in enumerate(step.effects):
            if isinstance(effect, OpenSidebandEffect):
                items.append(self._open_sideband(step.state, f"{prefix}_d{index}", effect.call_id))
            elif isinstance(effect, TransferCallEffect) and step.state.call_id is not None:
                items.append(
                    TransferCall(
                        id=f"{prefix}_d{index}", call_id=step.state.call_id, to=effect.to, provider=provider
                    )
                )
            elif isinstance(effect, CollectDigitsEffect):
                spec = effect.digits
                items.append(
                    CollectDigits(
                        id=f"{prefix}_d{index}",
                        number=effect.number,
                        max=spec.max if spec is not None else 0,
                        end=spec.end if spec is not None else None,
                        stop=spec is None,
                    )
                )
            elif isinstance(effect, PlaceCallEffect) and step.state.outbound is not None:
                call = step.state.outbound
                items.append(
                    PlaceCall(
                        id=f"{prefix}_d{index}",
                        call=call.id,
                        to=call.to,
                        trunk=outgoing.trunk_for_dial(self.id, call.trunk, self.execute),
                        session=dialect_of(step.state).creation_configuration(step.state) or {},
                        provider=provider,
                        # The call's id is the provider's to give: the gateway fills it in.
                        sideband=self._open_sideband(step.state, f"{prefix}_d{index}_sideband", ""),
                    )
                )
            elif isinstance(effect, CloseCallEffect):
                items.append(
                    CloseCall(
                        id=f"{prefix}_d{index}",
                        call_id=effect.call_id or step.state.call_id,
                        reason=effect.reason,
                        hangup=effect.hangup,
                        provider=provider,
                    )
                )
        return items

    def _event_row(
        self, envelope: EventEnvelope, disposition: str, order: int | None, to_gateway: list[ToGatewayItem]
    ) -> list[Any]:
        return [
            self.id,
            envelope.seq,
            _provider_event_id(envelope.event),
            str(envelope.event.get("type", "")),
            json.dumps(envelope.event),
            envelope.generation,
            envelope.received_at,
            disposition,
            order,
            _controls(to_gateway),
        ]

    def _insert_event(
        self,
        envelope: EventEnvelope,
        disposition: str,
        order: int | None,
        *,
        keep_provider_event_id: bool = True,
    ) -> bool:
        row = self._event_row(envelope, disposition, order, [])
        if not keep_provider_event_id:
            row[2] = None
        self.execute(INSERT_EVENT, row)
        return self._cursor.fetchone() is not None

    def _persist_effects(self, step: Step, seq: int | None, *, late: bool) -> None:
        for effect in step.effects:
            if isinstance(effect, PersistTranscript):
                statement = (
                    CONTINUE_OR_INSERT_TRANSCRIPT if effect.continues and not late else _INSERT_TRANSCRIPT
                )
                self.defer(statement, transcript_parameters(self.id, effect, seq, late))
            elif isinstance(effect, RecordIncident):
                self.defer(
                    "INSERT INTO incidents (session_id, code, severity, summary, context)"
                    " VALUES (%s, %s, %s, %s, %s::jsonb)",
                    (self.id, effect.code, effect.severity, effect.summary, json.dumps(effect.context)),
                )

    def _collect(self, step: Step, applied: Applied, to_gateway: list[ToGatewayItem]) -> None:
        for effect in step.effects:
            if isinstance(effect, RecordIncident):
                applied.incidents.append(effect)
            elif isinstance(effect, ScheduleTimer):
                timers.schedule(self, effect.name, effect.delay_ms)
                applied.timers.append(effect)
            elif isinstance(effect, CancelTimer):
                timers.cancel(self, effect.name)
            elif isinstance(effect, RequestToolStep | RefuseToolStep):
                self._record_tool_step(step.state, effect)
            elif isinstance(effect, RunTool):
                applied.tool_runs.append(effect)
            elif isinstance(effect, CancelTool):
                applied.tool_cancels.append(effect)
            elif isinstance(effect, InterruptToolStep):
                self._interrupt_tool_step(effect)
            elif isinstance(effect, StartCompaction):
                compactions.start(self, effect)
            elif isinstance(effect, SaveCompactionSummary):
                failure = compactions.save_summary(self, effect)
                if failure is not None:
                    self._unsaved_summaries.append((effect.number, failure))
            elif isinstance(effect, FinishCompaction):
                compactions.finish(self, effect)
                applied.compactions_finished.append(effect.status)
            elif isinstance(effect, NotifyApp):
                applied.notifications.append(effect)
            elif isinstance(effect, Suppress):
                outgoing.suppress_for_session(self.execute, self.id, effect.number, effect.source)
            elif isinstance(effect, OutboundEnded):
                applied.calls_ended.append(effect.outcome)
                dialled = outgoing.call_ended(self.execute, effect)
                if dialled is not None:
                    campaign_id, contact_id = dialled
                    campaigns.contact_called(
                        self.execute, campaign_id, contact_id, effect.outcome, datetime.now(UTC)
                    )
                    applied.campaigns.append(campaign_id)
            elif isinstance(effect, AnswerRequest):
                applied.replies.append(self._reply(effect))
        applied.to_gateway += to_gateway
        if applied.usage_before is None:
            applied.usage_before = self.state.usage
        applied.usage_after = step.state.usage
        applied.provider = str(step.state.provider)
        applied.streams_events = applied.streams_events or step.state.event_stream is not None
        if step.state.is_terminal and not self.state.is_terminal:
            # Every timer checks a finished session and does nothing: they go with the call, so
            # none outlives it in the table (or is swept, fired and re-claimed for ever).
            timers.cancel_all_but_gaps(self)
        self.state = step.state

    def _record_tool_step(self, state: SessionState, effect: RequestToolStep | RefuseToolStep) -> None:
        """The durable step of a function call: running for a request, terminal for a refusal."""
        from models import tool_steps

        identity = ToolStepIdentity(
            session_id=self.id,
            provider_call_id=effect.call_id,
            provider_item_id=effect.item_id,
            provider_response_id=effect.response_id,
            turn_input_item_id=state.realtime.turn.context.input_item_id if state.realtime.turn else None,
            tool_name=effect.name,
            tool_version=effect.version or state.tool_versions.get(effect.name, "unknown"),
            catalog_digest=state.catalog_digest or "none",
            side_effect=state.tool_side_effects.get(effect.name, "unknown"),
            raw_arguments=effect.arguments,
        )
        if isinstance(effect, RequestToolStep):
            if tool_steps.request_step(self, identity, running=True)[1] == "existing":
                tool_steps.start_step(self, effect.call_id)
        else:
            tool_steps.request_step(self, identity)
            error = ToolError(code=effect.code, message=effect.message)
            tool_steps.finish_step(
                self, effect.call_id, ToolOutcome(status=effect.status, error=error, elapsed_ms=0)
            )

    def _interrupt_tool_step(self, effect: InterruptToolStep) -> None:
        """Finish a running step as interrupted; one that finished meanwhile keeps its outcome."""
        from models import tool_steps

        error = ToolError(code=effect.code, message=effect.message)
        try:
            tool_steps.finish_step(
                self, effect.call_id, ToolOutcome(status="interrupted", error=error, elapsed_ms=0)
            )
        except (ToolOutcomeConflict, ToolStepTerminal):
            pass

    def _session_row(
        self, state: SessionState, applied_seq: int, logged_seq: int, applied_count: int
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
            self.id,
        ]

    def _save(self) -> None:
        head = self._head
        self.defer(
            _SAVE_SESSION,
            self._session_row(self.state, head.applied_seq, head.logged_seq, head.applied_count),
        )


def _provider_event_id(event: dict[str, Any]) -> str | None:
    value = event.get("event_id")
    if isinstance(value, str) and not str(event.get("type", "")).startswith("switchboard."):
        return value
    return None


def _meaningful_keys(state: SessionState) -> tuple[str, ...]:
    """The keypad keys that mean something on this call (the route's, and the consent's decline
    key): the only digits the gateway's boundary keeps pressed."""
    keys = set(state.phone.keys) if state.phone is not None else set()
    consent = state.privacy.consent
    if consent is not None and consent.decline_key is not None:
        keys.add(consent.decline_key)
    return tuple(sorted(keys))
