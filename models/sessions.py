"""The row lock and the ordered event log of a session.

`locked_session(id)` is the one place a row lock is taken. Under it, `LockedSession.deliver`
logs a numbered event and applies every logged event from `applied_seq + 1` upward while they
are contiguous (DESIGN invariant 2), and `apply_host` applies an unnumbered host input
(creation, admission, a timer). Both return what must leave the transaction: outbound items
for the owning gateway, timers to schedule, incidents to report.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pipeline.envelope import CloseCall, OpenSideband, Outbound, SendControl
from pipeline.errors import MalformedFrame, SessionExists, SessionNotFound
from pipeline.session import apply, is_late
from pipeline.state import SessionState
from pipeline.step import CloseCall as CloseCallEffect
from pipeline.step import OpenSideband as OpenSidebandEffect
from pipeline.step import PersistTranscript, RecordIncident, ScheduleTimer, Step
from pipeline.wire import control_wire, parse_inbound
from pipeline.envelope import EventEnvelope

from peewee import IntegrityError

from models.db import IncidentRow, SessionEventRow, SessionRow, TranscriptItemRow, database, utcnow


@dataclass
class Applied:
    """What one locked transaction decided that must leave it."""

    outbound: list[Outbound] = field(default_factory=list)
    timers: list[ScheduleTimer] = field(default_factory=list)
    incidents: list[RecordIncident] = field(default_factory=list)
    # (seq, disposition) of every event this transaction logged or applied, for tests and logs.
    dispositions: list[tuple[int | None, str]] = field(default_factory=list)

    def extend(self, other: Applied) -> None:
        self.outbound += other.outbound
        self.timers += other.timers
        self.incidents += other.incidents
        self.dispositions += other.dispositions


@contextmanager
def locked_session(session_id: str) -> Iterator[LockedSession]:
    """Open a transaction and lock the session row (blocking, never NOWAIT: a waiting worker
    must see every event the holder logged)."""
    with database.atomic():
        row = SessionRow.select().where(SessionRow.id == session_id).for_update().first()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        yield LockedSession(row)


@contextmanager
def new_session(session_id: str, owning_gateway: str) -> Iterator[LockedSession]:
    """Insert a session row and hold it for its first input (its creation). An id that
    exists already is a `SessionExists` refusal."""
    with database.atomic():
        try:
            with database.atomic():
                row = SessionRow.create(
                    id=session_id,
                    status=str(SessionState().phase),
                    owning_gateway=owning_gateway,
                    state=SessionState().model_dump(mode="json"),
                )
        except IntegrityError as exc:
            raise SessionExists(f"session {session_id!r} exists already") from exc
        yield LockedSession(row)


class LockedSession:
    """A session row held under `SELECT … FOR UPDATE` for the length of one transaction."""

    def __init__(self, row: SessionRow) -> None:
        self.row = row
        self.state = SessionState.model_validate(row.state)

    @property
    def id(self) -> str:
        return str(self.row.id)

    @property
    def owning_gateway(self) -> str:
        return str(self.row.owning_gateway)

    # ── numbered events ────────────────────────────────────────────────────────────────

    def deliver(self, envelope: EventEnvelope) -> Applied:
        """Log one numbered event, then apply every contiguous logged event after
        `applied_seq`. A redelivered seq changes nothing."""
        applied = Applied()
        seq = envelope.seq
        if seq <= self.row.applied_seq:
            return applied
        if seq == self.row.applied_seq + 1:
            # The common case: the next event, applied straight away and logged once.
            self._apply_new(envelope, applied)
        else:
            self._log_pending(envelope, applied)
        if self.row.logged_seq > self.row.applied_seq:
            self._drain_pending(applied)
        self._save()
        return applied

    def _apply_new(self, envelope: EventEnvelope, applied: Applied) -> None:
        provider_event_id = _provider_event_id(envelope.event)
        order = self.row.applied_count + 1
        step, disposition = self._decide(envelope.event, envelope.generation)
        outbound = self._outbound(step, f"ctl_{envelope.seq}") if disposition == "applied" else []
        inserted = (
            SessionEventRow.insert(
                session=self.id,
                seq=envelope.seq,
                provider_event_id=provider_event_id,
                kind=str(envelope.event.get("type", "")),
                payload=envelope.event,
                generation=envelope.generation,
                received_at=envelope.received_at,
                disposition=disposition,
                applied_order=order,
                controls=[item.model_dump(mode="json") for item in outbound],
            )
            .on_conflict_ignore()
            .execute()
        )
        if not inserted:
            # Only a provider event already logged under another seq conflicts here: the seq
            # slot is taken by a duplicate that applies as nothing.
            self._insert_duplicate(envelope, order)
            applied.dispositions.append((envelope.seq, "duplicate"))
        else:
            self._carry_out(step, applied, seq=envelope.seq, outbound=outbound, late=disposition == "late")
            applied.dispositions.append((envelope.seq, disposition))
        self.row.applied_seq = envelope.seq
        self.row.applied_count = order
        self.row.logged_seq = max(self.row.logged_seq, envelope.seq)

    def _log_pending(self, envelope: EventEnvelope, applied: Applied) -> None:
        inserted = (
            SessionEventRow.insert(
                session=self.id,
                seq=envelope.seq,
                provider_event_id=_provider_event_id(envelope.event),
                kind=str(envelope.event.get("type", "")),
                payload=envelope.event,
                generation=envelope.generation,
                received_at=envelope.received_at,
                disposition="pending",
            )
            .on_conflict_ignore()
            .execute()
        )
        if inserted:
            applied.dispositions.append((envelope.seq, "pending"))
        self.row.logged_seq = max(self.row.logged_seq, envelope.seq)

    def _insert_duplicate(self, envelope: EventEnvelope, order: int | None) -> None:
        SessionEventRow.insert(
            session=self.id,
            seq=envelope.seq,
            provider_event_id=None,
            kind=str(envelope.event.get("type", "")),
            payload=envelope.event,
            generation=envelope.generation,
            received_at=envelope.received_at,
            disposition="duplicate",
            applied_order=order,
        ).on_conflict_ignore().execute()

    def _drain_pending(self, applied: Applied) -> None:
        waiting = (
            SessionEventRow.select()
            .where(
                (SessionEventRow.session == self.id)
                & (SessionEventRow.seq > self.row.applied_seq)
            )
            .order_by(SessionEventRow.seq)
        )
        for event_row in waiting:
            if event_row.seq != self.row.applied_seq + 1:
                break
            order = self.row.applied_count + 1
            if event_row.disposition == "duplicate" or self._was_applied(event_row.provider_event_id):
                event_row.disposition = "duplicate"
                event_row.applied_order = order
                event_row.save(only=[SessionEventRow.disposition, SessionEventRow.applied_order])
                applied.dispositions.append((event_row.seq, "duplicate"))
            else:
                step, disposition = self._decide(event_row.payload, event_row.generation)
                outbound = self._outbound(step, f"ctl_{event_row.seq}") if disposition == "applied" else []
                event_row.disposition = disposition
                event_row.applied_order = order
                event_row.controls = [item.model_dump(mode="json") for item in outbound]
                event_row.save(
                    only=[SessionEventRow.disposition, SessionEventRow.applied_order, SessionEventRow.controls]
                )
                self._carry_out(step, applied, seq=event_row.seq, outbound=outbound, late=disposition == "late")
                applied.dispositions.append((event_row.seq, disposition))
            self.row.applied_seq = event_row.seq
            self.row.applied_count = order

    def _was_applied(self, provider_event_id: str | None) -> bool:
        if provider_event_id is None:
            return False
        return bool(
            SessionEventRow.select(SessionEventRow.id)
            .where(
                (SessionEventRow.session == self.id)
                & (SessionEventRow.provider_event_id == provider_event_id)
                & (SessionEventRow.disposition.in_(("applied", "late")))
            )
            .exists()
        )

    # ── host inputs: creation, admission, timers ───────────────────────────────────────

    def apply_host(self, event: dict[str, Any], now: float) -> Applied:
        """Decide, log and carry out one host input. A refusal raises before anything is
        logged, so a refused request leaves no trace in the fold."""
        step = apply(self.state, parse_inbound(event), self.state.generation)
        applied = Applied()
        order = self.row.applied_count + 1
        outbound = self._outbound(step, f"ctl_x{order}")
        SessionEventRow.insert(
            session=self.id,
            seq=None,
            kind=str(event["type"]),
            payload=event,
            generation=self.state.generation,
            received_at=now,
            disposition="applied",
            applied_order=order,
            controls=[item.model_dump(mode="json") for item in outbound],
        ).execute()
        self._carry_out(step, applied, seq=None, outbound=outbound, late=False)
        self.row.applied_count = order
        self._save()
        return applied

    # ── shared ─────────────────────────────────────────────────────────────────────────

    def _decide(self, event: dict[str, Any], generation: int) -> tuple[Step, str]:
        late = is_late(self.state, generation) and event.get("type") != "switchboard.end_requested"
        try:
            parsed = parse_inbound(event)
        except MalformedFrame as exc:
            # The gateway validates before it enqueues, so this is a replayed or hand-made
            # message; it occupies its seq and applies as an incident.
            incident = RecordIncident(
                code=exc.code, summary=str(exc), severity="warning", context={"type": event.get("type")}
            )
            return Step(state=self.state, effects=(incident,)), "applied"
        return apply(self.state, parsed, generation), "late" if late else "applied"

    def _outbound(self, step: Step, prefix: str) -> list[Outbound]:
        items: list[Outbound] = []
        for index, control in enumerate(step.controls):
            event_id = f"{prefix}_{index}"
            items.append(SendControl(id=event_id, control=control_wire(control.model_copy(update={"event_id": event_id}))))
        for index, effect in enumerate(step.effects):
            if isinstance(effect, OpenSidebandEffect):
                items.append(OpenSideband(id=f"{prefix}_d{index}", call_id=effect.call_id))
            elif isinstance(effect, CloseCallEffect):
                items.append(
                    CloseCall(
                        id=f"{prefix}_d{index}",
                        call_id=effect.call_id or step.state.call_id,
                        reason=effect.reason,
                        hangup=effect.hangup,
                    )
                )
        return items

    def _carry_out(
        self, step: Step, applied: Applied, *, seq: int | None, outbound: list[Outbound], late: bool
    ) -> None:
        for effect in step.effects:
            if isinstance(effect, PersistTranscript):
                TranscriptItemRow.insert(
                    session=self.id,
                    role=effect.role,
                    text=effect.text,
                    provider_item_id=effect.item_id,
                    response_id=effect.response_id,
                    seq=seq,
                    late=late,
                ).execute()
            elif isinstance(effect, RecordIncident):
                IncidentRow.insert(
                    session=self.id,
                    code=effect.code,
                    severity=effect.severity,
                    summary=effect.summary,
                    context=effect.context,
                ).execute()
                applied.incidents.append(effect)
            elif isinstance(effect, ScheduleTimer):
                applied.timers.append(effect)
        applied.outbound += outbound
        self.state = step.state

    def _save(self) -> None:
        state = self.state
        row = self.row
        row.state = state.model_dump(mode="json")
        row.status = str(state.phase)
        row.generation = state.generation
        row.provider_call_id = state.call_id
        row.instructions = state.instructions
        row.usage = state.usage.model_dump(mode="json")
        row.end_reason = state.end_reason
        row.updated_at = utcnow()
        if state.is_terminal and row.ended_at is None:
            row.ended_at = row.updated_at
        row.save()


def _provider_event_id(event: dict[str, Any]) -> str | None:
    value = event.get("event_id")
    if isinstance(value, str) and not str(event.get("type", "")).startswith("switchboard."):
        return value
    return None
