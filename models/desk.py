"""What the supervisor's desk reads in one go: the calls in progress whose line needs a person
or whose turns go wrong (the decision of who waits, and in what order, is `pipeline.desk`)."""

from __future__ import annotations

import time
from typing import Any

from models.db import database
from pipeline.desk import STRUGGLE_WINDOW_S, QueuedCall, call_queue
from pipeline.state import IN_CALL

# Only calls in progress, and of those only the ones whose line is asked for, held or taken, or
# that had an incident or a failed tool lately: a quiet call costs the read nothing but its row.
# An attention request's time is its logged input's: the app's request, or a key press the call's
# route maps to a person (the latest of them).
QUEUE = """
WITH live AS (
  SELECT s.id, s.status, s.state, s.created_at
    FROM sessions s
   WHERE s.namespace = %(namespace)s AND s.status = ANY(%(in_call)s)
), troubles AS (
  SELECT session_id, count(*) AS n, (array_agg(code ORDER BY at DESC))[1] AS last_code
    FROM (SELECT i.session_id, i.code, i.created_at AS at FROM incidents i
           WHERE i.session_id IN (SELECT id FROM live) AND i.severity IN ('warning', 'error')
             AND i.created_at > now() - make_interval(secs => %(window_s)s)
          UNION ALL
          SELECT t.session_id, 'tool ' || t.tool_name || ' ' || t.status, t.requested_at FROM tool_steps t
           WHERE t.session_id IN (SELECT id FROM live)
             AND t.status IN ('failed', 'timed_out', 'unavailable')
             AND t.requested_at > now() - make_interval(secs => %(window_s)s)) found
   GROUP BY session_id
)
SELECT l.id, l.status, l.state, extract(epoch FROM l.created_at), p.caller, p.route_id,
       (SELECT max(e.received_at) FROM session_events e
         WHERE e.session_id = l.id
           AND (e.kind = 'switchboard.attention'
                OR (e.kind = 'input_audio_buffer.dtmf_event_received'
                    AND l.state -> 'phone' -> 'keys' ->> (e.payload ->> 'event') = 'attention'))),
       coalesce(tr.n, 0), tr.last_code
  FROM live l
  LEFT JOIN phone_calls p ON p.session_id = l.id
  LEFT JOIN troubles tr ON tr.session_id = l.id
 WHERE l.state -> 'attention' <> 'null'::jsonb OR (l.state ->> 'held')::boolean
    OR l.state -> 'taken_by' <> 'null'::jsonb OR tr.n IS NOT NULL
"""


def queue(namespace: str) -> dict[str, list[dict[str, Any]]]:
    """The deployment's callers waiting for a person (longest first), callers on hold, and calls
    in trouble."""
    rows = database.execute_sql(
        QUEUE,
        {"namespace": namespace, "in_call": [str(phase) for phase in IN_CALL], "window_s": STRUGGLE_WINDOW_S},
    ).fetchall()
    calls = [
        QueuedCall(
            session_id=session_id,
            status=status,
            state=state or {},
            created_at=float(created),
            caller=caller or _outbound_to(state or {}),
            route_id=route_id,
            attention_since=float(since) if since is not None else None,
            troubles=int(troubles),
            last_trouble=last,
        )
        for session_id, status, state, created, caller, route_id, since, troubles, last in rows
    ]
    return call_queue(calls, time.time())


def _outbound_to(state: dict[str, Any]) -> str | None:
    outbound = state.get("outbound")
    return outbound.get("to") if isinstance(outbound, dict) else None
