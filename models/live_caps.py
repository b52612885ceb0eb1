"""The Live sessions in a call, per model, counted under the model's own lock.

Each Live model has a cap of sessions at once at the provider (`pipeline.admission.LiveCap`).
Every admission of a session on a capped model — an app's connect, a phone call rung in, a call
placed, a campaign's claim — takes the model's advisory lock in its own transaction, counts, and
admits (its session `admitting`, or its claim's row written) before it commits. The lock is held
until the commit, and the count is a statement run after the lock is taken, so two admissions
racing for the last place count one after the other: the second sees the first, and is refused.
A transaction that takes the dialer's lock too (`models.outbound.hold_the_dialer`) takes that one
first; nothing holding a model's lock waits for a session's row.

A session counts from its admission until it ends or fails (a created one, not yet connecting,
holds no session at the provider); a campaign's claim counts from its claim until its session is
created, and then as that session.
"""

from __future__ import annotations

import json
from typing import Any

from models.db import advisory_key
from pipeline.admission import LiveCap, over_cap, room_under
from pipeline.call.errors import LiveModelAtCapacity
from pipeline.session.state import IN_CALL, Phase

# A session holds a session at the provider from its admission until it is over.
_HOLDING = sorted({str(Phase.ADMITTING), *(str(phase) for phase in IN_CALL)})

# A session names its model in its state ("" before models were chosen per session: its
# provider's default then); a claim that has no session yet, in its campaign's session spec.
_IN_A_CALL = """
SELECT (SELECT count(*) FROM sessions
         WHERE namespace = %(namespace)s AND status = ANY(%(holding)s)
           AND coalesce(nullif(state->'model'->>'id', ''), %(defaults)s::jsonb->>(state->>'provider'))
               = %(model)s)
     + (SELECT count(*) FROM outbound_calls o JOIN campaigns c ON c.id = o.campaign_id
         WHERE o.namespace = %(namespace)s AND o.outcome IS NULL
           AND c.status IN ('scheduled', 'running', 'paused')
           AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = o.session_id)
           AND coalesce(nullif(c.spec->'session'->>'model', ''),
                        %(defaults)s::jsonb->>(c.spec->'session'->>'provider')) = %(model)s)
"""


def hold_the_model(namespace: str, model: str, execute: Any) -> None:
    """Serialize this transaction's admissions of `model` with every other of the deployment's."""
    key = advisory_key(f"switchboard live model {namespace} {model}")
    execute("SELECT pg_advisory_xact_lock(%s)", (key,))


def in_a_call(namespace: str, cap: LiveCap, execute: Any) -> int:
    """The deployment's sessions of the cap's model admitted and not over, and its campaigns'
    claims on that model whose session is not created yet (a claim of a campaign cancelled or
    completed before its session was created is never placed, and holds nothing)."""
    row = execute(
        _IN_A_CALL,
        {
            "namespace": namespace,
            "holding": _HOLDING,
            "defaults": json.dumps(dict(cap.defaults)),
            "model": cap.model,
        },
    ).fetchone()
    return int(row[0])


def admission_refused(namespace: str, cap: LiveCap | None, execute: Any) -> LiveModelAtCapacity | None:
    """In the admitting transaction: hold the model and count; the refusal when its cap is
    reached, None when the session may be admitted (or its model has no cap)."""
    if cap is None:
        return None
    hold_the_model(namespace, cap.model, execute)
    return over_cap(cap, in_a_call(namespace, cap, execute))


def room(namespace: str, cap: LiveCap | None, execute: Any) -> int | None:
    """In a campaign's claiming transaction: how many more sessions of the cap's model may be
    claimed now (None: its model has no cap). The model is held until the claims commit."""
    if cap is None:
        return None
    hold_the_model(namespace, cap.model, execute)
    return room_under(cap, in_a_call(namespace, cap, execute))
