"""What the supervisor's desk reads in one go: the calls in progress whose line needs a person
or whose turns go wrong (the decision of who waits, and in what order, is `pipeline.records.desk`)."""

from __future__ import annotations

import time
from typing import Any

from models.db import database
from pipeline.records.desk import SLOW_ANSWER_MS, SLOW_TURNS_READ, STRUGGLE_WINDOW_S, QueuedCall, call_queue
from pipeline.session.state import IN_CALL

# Only calls in progress, and of those only the ones whose line is asked for, held or taken, that
# had an incident or a failed tool lately, or whose latest answers kept a caller waiting: a quiet
# call costs the read its row and a walk back through its log to its last few answers.
# A turn's wait is read off the heard stamp the gateway puts on a logged response.done (when the
# caller stopped speaking, when the answer's first audio came), not by replaying the call log; a
# provider whose sideband stamps no logged event (Live, whose waits are the call log's own
# timeline) is never read as slow here.
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
), waits AS (
  SELECT l.id AS session_id, array_agg(w.ms ORDER BY w.applied_order) AS ms, max(w.ms) AS longest
    FROM live l
    CROSS JOIN LATERAL (
      SELECT e.applied_order,
             round(((e.payload -> 'heard' ->> 'first_audio_at')::float8
                    - (e.payload -> 'heard' ->> 'speech_ended_at')::float8) * 1000)::int AS ms
        FROM session_events e
       WHERE e.session_id = l.id AND e.disposition IN ('applied', 'late') AND e.payload ? 'heard'
       ORDER BY e.applied_order DESC
       LIMIT %(turns)s) w
   WHERE w.ms >= 0
   GROUP BY l.id
)
SELECT l.id, l.status, l.state, extract(epoch FROM l.created_at), p.caller, p.route_id,
       (SELECT max(e.received_at) FROM session_events e
         WHERE e.session_id = l.id
           AND (e.kind = 'switchboard.attention'
                OR (e.kind = 'input_audio_buffer.dtmf_event_received'
                    AND l.state -> 'phone' -> 'keys' ->> (e.payload ->> 'event') = 'attention'))),
       coalesce(tr.n, 0), tr.last_code, wt.ms, c.name
  FROM live l
  LEFT JOIN phone_calls p ON p.session_id = l.id
  LEFT JOIN campaigns c ON c.id = l.state -> 'outbound' ->> 'campaign_id' AND c.namespace = %(namespace)s
  LEFT JOIN troubles tr ON tr.session_id = l.id
  LEFT JOIN waits wt ON wt.session_id = l.id
 WHERE l.state -> 'attention' <> 'null'::jsonb OR (l.state ->> 'held')::boolean
    OR l.state -> 'taken_by' <> 'null'::jsonb OR tr.n IS NOT NULL OR wt.longest > %(slow_ms)s
"""


def queue(namespace: str) -> dict[str, list[dict[str, Any]]]:
    """The deployment's callers waiting for a person (longest first), callers on hold, and calls
    in trouble or slow to answer."""
    rows = database.execute_sql(
        QUEUE,
        {
            "namespace": namespace,
            "in_call": [str(phase) for phase in IN_CALL],
            "window_s": STRUGGLE_WINDOW_S,
            "turns": SLOW_TURNS_READ,
            "slow_ms": SLOW_ANSWER_MS,
        },
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
            recent_heard_ms=tuple(waits or ()),
            campaign_name=campaign_name,
        )
        for (
            session_id,
            status,
            state,
            created,
            caller,
            route_id,
            since,
            troubles,
            last,
            waits,
            campaign_name,
        ) in rows
    ]
    return call_queue(calls, time.time())


def _outbound_to(state: dict[str, Any]) -> str | None:
    outbound = state.get("outbound")
    return outbound.get("to") if isinstance(outbound, dict) else None
