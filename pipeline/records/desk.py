"""What a supervisor's desk shows of calls, decided from their stored rows: who is doing what on a
line, what a call came to, and which callers wait for a person (longest first). Its list of calls
is paged as every list is (`pipeline.api.pages`).

The rules:
- A caller waits for a person while an attention request is open and nobody holds the line; the
  one who has waited longest is first.
- A call "struggles" when something went wrong in it lately (an incident, a failed tool), or when
  its callers wait too long for its answers (the median heard latency of its last three measured
  turns is over 1.5 s, the alert's threshold in docs/operations.md): the most troubled first, then
  the slowest.
- A session that never reached a provider (nobody connected it in time) did not connect; it is not
  an outage, and reads "not connected".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.call.errors import MalformedRequest
from pipeline.call.heard import percentile
from pipeline.session.state import IN_CALL, Phase

# The failures of a session that never had a call: nobody connected it, or it was refused before
# the provider answered. Read as "not connected", not as an outage.
_NEVER_CONNECTED = frozenset({"admission_timeout", "tool_catalog_changed"})
# How far back an incident or a failed tool counts against a call in progress.
STRUGGLE_WINDOW_S = 300.0
# A caller who waits longer than this for an answer hears a slow agent (the heard-latency alert's
# threshold, docs/operations.md).
SLOW_ANSWER_MS = 1_500
# How many of a call's latest measured turns tell whether it is slow now: the median of three, so
# one slow answer among quick ones does not make a call struggle, and two of the last three do.
SLOW_TURNS_READ = 3
# The longest search text: words said, a number or an id.
MAXIMUM_SEARCH_CHARS = 200
# What `GET /v1/sessions?status=` may ask for: a status, or the calls live (connecting included)
# or never connected. Anything else is refused: an empty list would read as "no such calls".
LISTED_STATUSES = frozenset({*(str(phase) for phase in Phase), "live", "not_connected"})


def checked_status(asked: str) -> str:
    """The status filter as asked (empty: every status), or `MalformedRequest` naming those known."""
    if asked and asked not in LISTED_STATUSES:
        known = ", ".join(sorted(LISTED_STATUSES))
        raise MalformedRequest(f"status must be one of {known} (got {asked[:40]!r})")
    return asked


def activity(status: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """What is happening on the line now, in words a supervisor reads: `what` is one of
    `not connected`, `connecting`, `taken over`, `held`, `collecting digits`, `waiting for a
    person`, `running a tool`, `agent speaking`, `listening`, `reconnecting`, `ended`; `by` names
    the person who holds the line."""
    taken_by = state.get("taken_by")
    if status in (Phase.ENDED, Phase.FAILED):
        return {"what": "ended", "by": None}
    if status == Phase.CREATED:
        return {"what": "not connected", "by": None}
    if status == Phase.ADMITTING:
        return {"what": "connecting", "by": None}
    if isinstance(taken_by, dict):
        return {"what": "taken over", "by": taken_by.get("name") or taken_by.get("id")}
    if state.get("collecting"):
        return {"what": "collecting digits", "by": None}
    if state.get("attention"):
        return {"what": "waiting for a person", "by": None}
    if state.get("held"):
        return {"what": "held", "by": None}
    if state.get("sideband_down"):
        return {"what": "reconnecting", "by": None}
    if _is_running_a_tool(state):
        return {"what": "running a tool", "by": None}
    if status == Phase.RESPONDING or _realtime(state, "turn"):
        return {"what": "agent speaking", "by": None}
    return {"what": "listening", "by": None}


def _is_running_a_tool(state: Mapping[str, Any]) -> bool:
    chain = _realtime(state, "chain") or {}
    live = state.get("live") or {}
    return chain.get("pending") is not None or bool(live.get("open"))


def _realtime(state: Mapping[str, Any], name: str) -> Any:
    """A field of a stored state's Realtime part, where the release that stored it keeps it
    (`pipeline.platform.releases.MOVED`): under `realtime`, or at the top."""
    part = state.get("realtime")
    return part.get(name) if isinstance(part, Mapping) and name in part else state.get(name)


def outcome(status: str, end_reason: str | None, call_id: str | None) -> str | None:
    """What a finished call came to, in one phrase (None while it runs): `not connected` for a
    session no call ever reached, else its end reason."""
    if status not in (Phase.ENDED, Phase.FAILED):
        return None
    if call_id is None and (status == Phase.FAILED or end_reason in _NEVER_CONNECTED):
        return "not connected"
    return end_reason or str(status)


def direction(state: Mapping[str, Any]) -> str:
    """`outbound` for a call Switchboard placed, else `inbound`."""
    return "outbound" if isinstance(state.get("outbound"), dict) else "inbound"


def _campaign_id(state: Mapping[str, Any]) -> str | None:
    outbound = state.get("outbound")
    campaign_id = outbound.get("campaign_id") if isinstance(outbound, dict) else None
    return campaign_id if isinstance(campaign_id, str) else None


@dataclass(frozen=True)
class QueuedCall:
    """A call in progress as the queue reads it: its line, and what went wrong in it lately."""

    session_id: str
    status: str
    state: Mapping[str, Any]
    created_at: float
    caller: str | None
    route_id: str | None
    # When the open attention request was made (None: no request, or its time is unknown).
    attention_since: float | None
    troubles: int
    last_trouble: str | None
    # The heard latency of its latest measured turns, oldest first (at most SLOW_TURNS_READ).
    recent_heard_ms: tuple[int, ...] = ()
    # The name of the campaign that placed the call (None: no campaign did).
    campaign_name: str | None = None


def slow_answers_ms(recent_heard_ms: Sequence[int]) -> int | None:
    """How long a call's callers wait for its answers now, when that is too long: the median of its
    latest measured turns, if over SLOW_ANSWER_MS (None: quick enough, or nothing measured)."""
    latest = sorted(recent_heard_ms[-SLOW_TURNS_READ:])
    if not latest:
        return None
    median = percentile(latest, 0.50)
    return median if median > SLOW_ANSWER_MS else None


def _why_struggling(call: QueuedCall, slow_ms: int | None) -> list[str]:
    """What went wrong in a struggling call, in a supervisor's words: how slow its answers are, and
    its latest trouble (an incident's code or a failed tool, its underscores read as spaces)."""
    why = [f"slow answers: {slow_ms / 1000:.1f} s"] if slow_ms is not None else []
    if call.troubles and call.last_trouble is not None:
        why.append(call.last_trouble.replace("_", " "))
    return why


def call_queue(calls: Iterable[QueuedCall], now: float) -> dict[str, list[dict[str, Any]]]:
    """The desk's queue: callers waiting for a person (longest wait first), callers on hold or
    held by a person, and calls in trouble or slow to answer (most troubles first, then slowest)."""
    waiting: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    struggling: list[dict[str, Any]] = []
    for call in calls:
        if call.status not in IN_CALL:
            continue
        state = call.state
        base = {
            "session_id": call.session_id,
            "caller": call.caller,
            "route_id": call.route_id,
            "direction": direction(state),
            "campaign_id": _campaign_id(state),
            "campaign_name": call.campaign_name,
            "provider": state.get("provider") or "realtime",
            "activity": activity(call.status, state),
            "in_call_s": round(max(now - call.created_at, 0.0), 1),
        }
        attention = state.get("attention")
        if isinstance(attention, dict) and state.get("taken_by") is None:
            since = call.attention_since if call.attention_since is not None else call.created_at
            waited = max(now - since, 0.0)
            waiting.append(
                {
                    **base,
                    "reason": attention.get("reason"),
                    "waited_s": round(waited, 1),
                    "wait_limit_s": attention.get("wait_s"),
                }
            )
        elif state.get("held") or state.get("taken_by") is not None:
            held.append(base)
        slow_ms = slow_answers_ms(call.recent_heard_ms)
        if call.troubles or slow_ms is not None:
            struggling.append(
                {
                    **base,
                    "troubles": call.troubles,
                    "last_trouble": call.last_trouble,
                    "slow_answers_ms": slow_ms,
                    "why": _why_struggling(call, slow_ms),
                }
            )
    waiting.sort(key=lambda entry: -entry["waited_s"])
    held.sort(key=lambda entry: -entry["in_call_s"])
    struggling.sort(
        key=lambda entry: (-entry["troubles"], -(entry["slow_answers_ms"] or 0), -entry["in_call_s"])
    )
    return {"waiting": waiting, "held": held, "struggling": struggling}
