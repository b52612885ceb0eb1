"""What erasing a session's content decides (issue 25), without a database.

A session's content is what its callers said and what was said or done about it: transcripts,
event payloads, tool arguments and results, compaction summaries, Live delegation tasks and
answers, typed text, incident quotes, the phone numbers of the call. Erasing it keeps the
metadata: the phase, the end reason, timings, usage and cost, the provider, ids, and the
app's own configuration (its instructions, prompt blocks, tools, greeting, webhook, limits).

A session is erased only once it is over (`refusal_to_erase`): a live call is still making
content, which would land after the erasure. Retention is counted from when the call ended.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pipeline.call.errors import SessionLive
from pipeline.dialects import DIALECTS
from pipeline.phone.sip import PhoneLine
from pipeline.session.state import TERMINAL_PHASES, Phase, SessionState

# Why a session's content went: asked for, its retention over, or its storage "metadata" (the
# call was created so, or the caller declined recording) once the call was over.
Because = Literal["request", "retention", "storage"]

# What an erased event payload keeps: its type (the log's kind) and that it was erased.
ERASED = "erased"


def numbers_matching(number: str) -> tuple[str, ...]:
    """How a number in its E.164 form (`pipeline.phone.numbers.e164`) may stand in a call's SIP
    metadata: as dialled, or without its plus (a `From: <sip:14155550123@…>` names the same
    caller)."""
    return (number, number[1:])


def refusal_to_erase(phase: Phase, session_id: str) -> SessionLive | None:
    """A session whose call is not over is not erased (409 `session_live`)."""
    if phase in TERMINAL_PHASES:
        return None
    return SessionLive(f"session {session_id!r} is {phase}: end the call before erasing it")


def retention_days(policy_days: int | None, deployment_days: int | None) -> int | None:
    """The days a session's content is kept after its call ended: its policy's, else the
    deployment's (None: until erased on request)."""
    return policy_days if policy_days is not None else deployment_days


def retention_over(ended_at: datetime | None, days: int | None, now: datetime) -> bool:
    """Whether a session's retention is over: it ended, it has a retention, and that many days
    have passed since."""
    if ended_at is None or days is None:
        return False
    return now - ended_at >= timedelta(days=days)


def erased_state(state: SessionState) -> SessionState:
    """What an erased session's state keeps: everything but the content. The app's own
    configuration stays (instructions, prompt blocks, tools, greeting, webhook, limits), and so
    do the phase, end reason, usage, provider, ids and counters; the phone line keeps its route
    and terms but not who called which number or the SIP headers; what was said (a compaction's
    summary, a pending tool output, Live's heard words and its delegations' tasks and answers,
    a supervisor's directed words, why a person was asked for) goes."""
    changes: dict[str, object] = {"directed": None, "attention": None}
    if state.phone is not None:
        # Kept field by field: a field added later is content until it is said to be kept.
        changes["phone"] = PhoneLine(
            route_id=state.phone.route_id,
            transfer_targets=state.phone.transfer_targets,
            keys=state.phone.keys,
            silences=state.phone.silences,
            silence_ms=state.phone.silence_ms,
        )
    if state.outbound is not None:
        # Whom it dialled, and what they said, are the callee's.
        changes["outbound"] = state.outbound.model_copy(update={"to": "", "heard": ()})
    erased = state.evolve(**changes)
    # Every wing erases its own parts, whichever provider the session had: what was said is
    # gone from any field that could hold it.
    for dialect in DIALECTS.values():
        erased = dialect.erased(erased)
    return erased


def erased_payload(kind: str) -> dict[str, Any]:
    """What an erased event's payload keeps: its type."""
    return {"type": kind, ERASED: True}


def erased_controls(controls: list[Any]) -> list[dict[str, Any]]:
    """What an erased event's controls keep: each one's id and type (what was sent, not its
    words)."""
    kept: list[dict[str, Any]] = []
    for control in controls:
        if not isinstance(control, dict):
            continue
        if control.get(ERASED) is True:
            kept.append(control)  # erased before: as it was
            continue
        inner = control.get("control")
        kept.append(
            {
                "id": control.get("id"),
                "kind": control.get("kind"),
                "type": inner.get("type") if isinstance(inner, dict) else None,
                ERASED: True,
            }
        )
    return kept


def is_erased_payload(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get(ERASED) is True and set(payload) <= {"type", ERASED}
