"""Incidents recorded outside a session's transaction: what a gateway saw (a malformed or
oversized provider frame) reaches PostgreSQL through the `record_incident` actor."""

from __future__ import annotations

from models.db import IncidentRow, SessionRow
from pipeline.session.step import RecordIncident


def record(session_id: str | None, incident: RecordIncident) -> None:
    """Store an incident, tied to its session when that session exists (an incident about a
    frame for a session deleted or never created is kept, unattached)."""
    known = session_id is not None and SessionRow.get_or_none(SessionRow.id == session_id) is not None
    IncidentRow.create(
        session=session_id if known else None,
        code=incident.code,
        severity=incident.severity,
        summary=incident.summary,
        context={**incident.context, "session_id": session_id},
    )
