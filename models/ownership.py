"""Which gateway owns a deployment's sessions: the owner of each unfinished session holds its
sideband (or will), and a takeover moves all of a gateway's sessions to another.

Read without locks: each session is locked to move (`LockedSession.take_over`, which writes
`TAKE_OVER` in the session's own transaction).
"""

from __future__ import annotations

from models.db import database
from pipeline.session.state import TERMINAL_PHASES, Phase

TAKE_OVER = "UPDATE sessions SET owning_gateway = %s WHERE id = %s"

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


def sessions_owned_by(namespace: str, gateway_id: str) -> list[str]:
    """The unfinished sessions a gateway of the deployment `namespace` owns (read without locks:
    each is locked to move). Gateway ids are a deployment's own: another's gw1 is not this one's."""
    rows = database.execute_sql(OWNED_UNFINISHED, (namespace, gateway_id)).fetchall()
    return [str(row[0]) for row in rows]
