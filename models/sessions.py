"""The row lock and the ordered event log of a session.

`locked_session(id)` is the one place a row lock is taken. Under it, `LockedSession.deliver`
logs a numbered event and applies every logged event from `applied_seq + 1` upward while they
are contiguous (DESIGN invariant 2), and `apply_host` applies an unnumbered host input
(creation, admission, a timer). Both return what must leave the transaction
(`models.applied.Applied`): the items for the owning gateway, timers to schedule, incidents to
report.

Every input takes the one apply path (`LockedSession._apply_event`): decide (the pipeline),
write its row (one of the ways of `models.event_log`), persist and collect its effects
(`models.applied.collect`), advance the head. Which gateway owns which sessions is read in
`models.ownership`.

The hot path (the next event of a live call) is two round trips: one opens the transaction,
takes the lock and reads the session (and whether the provider already sent this event under
another seq); the other writes the event, its effects and the session and commits. Between the
two the worker publishes the controls, still under the lock (DESIGN invariant 3): writes that
answer nothing are held back (`LockedSession.defer`) and travel with the COMMIT. Building these
statements through the ORM cost more than running them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg2

from models import event_log, timers
from models.applied import Applied, collect, reply, to_gateway
from models.data_keys import create_session_key
from models.db import advisory_key, database, reopen
from models.event_log import Write, Written, provider_event_id
from models.ownership import TAKE_OVER
from models.releases import read_across
from pipeline.call.errors import MalformedFrame, SessionExists, SessionNotFound
from pipeline.dialects import parse_inbound
from pipeline.platform.envelope import EventEnvelope
from pipeline.platform.releases import as_stored
from pipeline.privacy.sealing import DeploymentKey
from pipeline.session import sequencer
from pipeline.session.sequencer import Arrival
from pipeline.session.state import SessionState
from pipeline.session.step import AnswerRequest, RecordIncident, ScheduleTimer, Step
from pipeline.session.wire import (
    ArrivedLate,
    CompactionUnsaved,
    GatewayLost,
    HostInput,
    SeqLost,
    TimerFired,
    host_event,
)
from pipeline.transitions import Disposition, apply, disposition_of

# ── the lock ────────────────────────────────────────────────────────────────────────────

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


@dataclass
class _Head:
    """The locked row's bookkeeping columns."""

    generation: int
    applied_seq: int
    logged_seq: int
    applied_count: int
    owning_gateway: str


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
    event_ids = [event_id for e in envelopes if (event_id := provider_event_id(e.event)) is not None]
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
            if event_log.was_declared_lost(self, seq):
                # It lands now, at the end of the log, as arrived late: its transcript is kept,
                # and nothing acts on an event the call has moved past.
                late = ArrivedLate(event=envelope.event)
                decided = self._decide(host_event(late), envelope.generation)
                write = event_log.replace_lost(self, late, envelope)
                self._apply_event(decided, seq, applied, write=write, arrived_late=True)
                self._save()
            return applied
        if where is Arrival.NEXT:
            if not self._applied_before(envelope):
                # The common case: the next event, nothing waiting — one statement does it all,
                # and it goes with the COMMIT.
                decided = self._decide(envelope.event, envelope.generation)
                write = event_log.write_next(self, envelope, head.logged_seq)
                self._apply_event(decided, seq, applied, write=write)
                event_id = provider_event_id(envelope.event)
                if event_id is not None:
                    self._applied_event_ids.add(event_id)
                self._settle_unsaved(applied, envelope.received_at)
                return applied
            # The provider sent this event before, under a lower seq: this seq occupies its
            # slot in the order as a duplicate, and applies as nothing.
            self._apply_duplicate(seq, applied, write=event_log.write_duplicate(self, envelope))
        else:
            if event_log.log_pending(self, envelope) and where is Arrival.EARLY:
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
        applied.replies += [reply(self.id, e) for e in step.effects if isinstance(e, AnswerRequest)]
        applied.dispositions.append((envelope.seq, "erased"))
        return applied

    def _drain(self, applied: Applied) -> None:
        """Apply the logged events after applied_seq while they are contiguous."""
        head = self._head
        if head.logged_seq <= head.applied_seq:
            return
        rows = event_log.pending_events(self, head.applied_seq)
        for seq in sequencer.contiguous(head.applied_seq, rows):
            _, event_id, payload, generation, disposition = rows[seq]
            if disposition == "duplicate" or event_log.was_applied(self, event_id):
                self._apply_duplicate(seq, applied, write=event_log.update_pending(self, seq))
            else:
                decided = self._decide(payload, generation)
                self._apply_event(decided, seq, applied, write=event_log.update_pending(self, seq))

    # ── host inputs: creation, admission, timers ───────────────────────────────────────

    def apply_host(self, event: HostInput, now: float) -> Applied:
        """Decide, log and carry out one host input. A refusal raises before anything is
        logged, so a refused request leaves no trace in the fold."""
        applied = Applied()
        write = event_log.insert_unnumbered(self, event, None, self.state.generation, now)
        self._apply_event(self._decide_host(event), None, applied, write=write)
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
        for seq in sequencer.declared_lost(missing, event_log.next_logged(self, missing)):
            marker = SeqLost(seq=seq)
            write = event_log.insert_unnumbered(self, marker, marker.seq, self.state.generation, now)
            self._apply_event(self._decide_host(marker), seq, applied, write=write)
            head.logged_seq = max(head.logged_seq, seq)
        self._drain(applied)
        self._watch_gap(applied)
        self._save()
        return applied

    def _applied_before(self, envelope: EventEnvelope) -> bool:
        """Whether the envelope's provider event was applied under another seq (the lock's read
        answered it for the envelope it was opened for; any other is asked now)."""
        event_id = provider_event_id(envelope.event)
        if event_id is None:
            return False
        if event_id in self._applied_event_ids:
            return True
        if event_id in self._checked_event_ids:
            return False
        return event_log.was_applied(self, event_id)

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
        write: Write,
        arrived_late: bool = False,
    ) -> None:
        """Write a decided event's row (how, `write` says), persist and collect its effects, and
        advance the head. The transcripts of a late event, or of one that `arrived_late` after
        its seq was declared lost, are marked late in the record."""
        step, disposition = decided
        order = self._head.applied_count + 1
        prefix = f"ctl_{seq}" if seq is not None else f"ctl_x{order}"
        items = to_gateway(self, step, prefix) if disposition == "applied" else []
        if write(step, disposition, order, items) is Written.ROW_ONLY:
            event_log.persist_effects(self, step, seq, late=arrived_late or disposition == "late")
        self._unsaved_summaries += collect(self, self.state, step, applied, items)
        self.state = step.state
        self._advance(seq, order)
        applied.dispositions.append((seq, disposition))

    def _apply_duplicate(self, seq: int, applied: Applied, *, write: Write) -> None:
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

    # ── deciding ───────────────────────────────────────────────────────────────────────

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

    def _save(self) -> None:
        head = self._head
        event_log.save_session(self, self.state, head.applied_seq, head.logged_seq, head.applied_count)
