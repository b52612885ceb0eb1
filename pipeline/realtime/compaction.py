"""In-call context compaction: keep a long call's provider context small.

A realtime call's context grows with every turn, and so do the cost and latency of each
response. When the previous spoken response reported at least the session's threshold of input
tokens, Switchboard asks the model for one maintenance response at a quiet boundary: text only,
no tools, at most 2,048 tokens of working notes. The response runs out of band
(`conversation: "none"`): it reads the conversation but adds nothing to it and never blocks a
spoken response. Its final text is the summary, persisted before anything is pruned. When the
response completes, every provider item older than the most recent six Switchboard can name is
deleted and one system message carries the summary. The next three responses are a cooldown.

A compaction is abandoned, with nothing pruned, when the maintenance response is cancelled,
empty, fails, runs out of tokens or time, when its summary cannot be persisted, and when the
caller speaks (a real turn is never delayed behind maintenance). Abandoning also starts the
cooldown, so compaction can never loop on itself.

The same guards apply to a compaction forced from the API, except the token threshold.
"""

from __future__ import annotations

from typing import Any

from pipeline.call.limits import COMPACTION_DEADLINE_MS, MAXIMUM_SUMMARY_BYTES
from pipeline.realtime.controls import ItemCreate, ItemDelete, ResponseCancel, ResponseCreate, ResponseParams
from pipeline.realtime.events import (
    AssistantTranscriptFinal,
    ResponseCreated,
    ResponseDone,
    ResponseRef,
    ResponseSummary,
)
from pipeline.session.state import Compaction, Phase, SessionState
from pipeline.session.step import (
    AnswerRequest,
    FinishCompaction,
    RecordIncident,
    SaveCompactionSummary,
    StartCompaction,
    Step,
    schedule_timer,
    unchanged,
)
from pipeline.session.timers import CompactionDeadline

COOLDOWN_RESPONSES = 3
KEEP_RECENT_ITEMS = 6
MAXIMUM_KNOWN_ITEMS = 64
MAXIMUM_OUTPUT_TOKENS = 2_048
# Maintenance response ids remembered, so their text is never taken for conversation.
MAXIMUM_MAINTENANCE_RESPONSES = 4

# The metadata a maintenance response.create carries; the provider echoes it on the
# response's created and done events.
METADATA_KEY = "switchboard"
METADATA_VALUE = "compaction"

SUMMARY_PREFIX = "Earlier conversation compacted. Summary: "

INSTRUCTIONS = (
    "This is a maintenance request from the host, not a turn of the call: nobody hears this "
    "response, so do not speak to the person or answer them. Write your own working notes on "
    "the call so far: which requests and steps are finished; every exact value, name, number, "
    "identifier and result that came up, copied verbatim; what is still open; and the next "
    "thing to do. Record only what was said or found. Do not add claims, promises or actions."
)

REASONS = {
    "session_not_live": "the session is not listening to a live call",
    "compaction_in_flight": "a compaction is already running",
    "response_in_flight": "a response is in progress; compaction waits for a quiet boundary",
    "tool_chain_active": "a tool call is in flight",
    "input_queued": "caller input is waiting for its response",
    "cooling_down": "the last compaction was too recent",
    "nothing_to_compact": f"there are at most {KEEP_RECENT_ITEMS} known items, so nothing would be pruned",
    "below_threshold": "the last response's input tokens are below the session's threshold",
    "superseded_by_input": "the caller spoke while the summary was being written",
    "maintenance_cancelled": "the maintenance response was cancelled",
    "maintenance_failed": "the maintenance response failed",
    "maintenance_incomplete": "the maintenance response ran out of output tokens",
    "maintenance_timed_out": "the maintenance response did not finish in time",
    "empty_summary": "the maintenance response wrote no summary",
    "summary_not_persisted": "the summary could not be stored, so nothing was pruned",
}


# ── when ─────────────────────────────────────────────────────────────────────────────────


def blocker(state: SessionState, *, forced: bool) -> str | None:
    """Why a compaction cannot start now, or None when it can."""
    if state.phase not in (Phase.LISTENING, Phase.RESPONDING):
        return "session_not_live"
    if state.line_closed:
        # A held line sends no response but a person's words; maintenance waits for the line.
        return "line_held"
    if state.realtime.compaction is not None:
        return "compaction_in_flight"
    if state.realtime.chain.pending is not None:
        return "tool_chain_active"
    if state.realtime.turn is not None or state.phase is Phase.RESPONDING:
        return "response_in_flight"
    if state.realtime.queued_input_item_id is not None:
        return "input_queued"
    if state.realtime.compaction_cooldown > 0:
        return "cooling_down"
    if len(state.realtime.known_items) <= KEEP_RECENT_ITEMS:
        return "nothing_to_compact"
    if not forced and state.realtime.last_response_input_tokens < state.limits.compaction_input_tokens:
        return "below_threshold"
    return None


def after_response(before: SessionState, after: SessionState, event: ResponseDone) -> Step:
    """At the boundary where a spoken turn completed, start a compaction if it is due."""
    ended_a_turn = before.realtime.turn is not None and after.realtime.turn is None
    if event.response.status != "completed" or not ended_a_turn or blocker(after, forced=False):
        return unchanged(after)
    return _start(after, forced=False)


def requested(state: SessionState, request_id: str, gateway_id: str) -> Step:
    """A compaction forced from the API: started under the same guards (the token threshold
    aside), or answered at once with why it cannot run (a provider that compacts its own
    context refused it before it came here)."""
    reason = blocker(state, forced=True)
    if reason is not None:
        body = _result(state, None, compacted=False, reason=reason)
        return Step(
            state=state, effects=(AnswerRequest(request_id=request_id, gateway_id=gateway_id, body=body),)
        )
    return _start(state, forced=True, request_id=request_id, reply_to=gateway_id)


def _start(
    state: SessionState, *, forced: bool, request_id: str | None = None, reply_to: str | None = None
) -> Step:
    number = state.realtime.compactions + 1
    compaction = Compaction(
        number=number,
        forced=forced,
        trigger_input_tokens=state.realtime.last_response_input_tokens,
        items_before=len(state.realtime.known_items),
        request_id=request_id,
        reply_to=reply_to,
    )
    maintenance = ResponseCreate(
        response=ResponseParams(
            conversation="none",
            instructions=INSTRUCTIONS,
            output_modalities=("text",),
            max_output_tokens=MAXIMUM_OUTPUT_TOKENS,
            tool_choice="none",
            metadata={METADATA_KEY: METADATA_VALUE, "compaction": str(number)},
        )
    )
    return Step(
        state=state.with_realtime(compaction=compaction, compactions=number),
        controls=(maintenance,),
        effects=(
            StartCompaction(
                number=number,
                forced=forced,
                trigger_input_tokens=compaction.trigger_input_tokens,
                items_before=compaction.items_before,
            ),
            schedule_timer(CompactionDeadline(number), delay_ms=COMPACTION_DEADLINE_MS),
        ),
    )


# ── the maintenance response ─────────────────────────────────────────────────────────────


def maintenance_number(response: ResponseRef | ResponseSummary) -> int | None:
    """The compaction a response was asked for by, from its echoed metadata (None for any
    other response)."""
    metadata = response.metadata or {}
    if metadata.get(METADATA_KEY) != METADATA_VALUE:
        return None
    try:
        return int(metadata.get("compaction", ""))
    except ValueError:
        return 0


def is_maintenance_metadata(metadata: object) -> bool:
    """Whether a raw response's metadata marks it as a maintenance response (the gateway keeps
    their text off the watchers' transcript)."""
    return isinstance(metadata, dict) and metadata.get(METADATA_KEY) == METADATA_VALUE


def is_maintenance_done(state: SessionState, event: ResponseDone) -> bool:
    return (
        maintenance_number(event.response) is not None
        or event.response.id in state.realtime.maintenance_responses
    )


def is_maintenance_text(state: SessionState, event: AssistantTranscriptFinal) -> bool:
    return event.response_id in state.realtime.maintenance_responses


def maintenance_started(state: SessionState, event: ResponseCreated) -> Step:
    """The maintenance response began. One nobody waits for any more (its cycle was abandoned
    before it started) is cancelled."""
    response_id = event.response.id
    remembered = state.with_realtime(
        maintenance_responses=(*state.realtime.maintenance_responses, response_id)[
            -MAXIMUM_MAINTENANCE_RESPONSES:
        ]
    )
    compaction = state.realtime.compaction
    if (
        compaction is not None
        and compaction.response_id is None
        and compaction.number == maintenance_number(event.response)
    ):
        return Step(
            state=remembered.with_realtime(
                compaction=compaction.model_copy(update={"response_id": response_id})
            )
        )
    return Step(state=remembered, controls=(ResponseCancel(response_id=response_id),))


def summary_written(state: SessionState, event: AssistantTranscriptFinal) -> Step:
    """The maintenance response's final text is the summary: persisted now, before any prune."""
    compaction = state.realtime.compaction
    if compaction is None or compaction.response_id != event.response_id:
        return unchanged(state)
    text = event.transcript.strip()
    if not text:
        return unchanged(state)
    if compaction.summary:
        text = f"{compaction.summary}\n{text}"
    summary = bounded_summary(text)
    return Step(
        state=state.with_realtime(compaction=compaction.model_copy(update={"summary": summary})),
        effects=(
            SaveCompactionSummary(number=compaction.number, response_id=event.response_id, summary=summary),
        ),
    )


def maintenance_finished(state: SessionState, event: ResponseDone) -> Step:
    """The maintenance response ended: prune and summarize if it completed with a persisted
    summary; otherwise abandon. (Its usage is counted by the caller: it is not a spoken
    response, so it neither feeds the trigger nor counts down the cooldown.)"""
    compaction = state.realtime.compaction
    number = maintenance_number(event.response)
    is_current = compaction is not None and (
        compaction.response_id == event.response.id
        or (compaction.response_id is None and number == compaction.number)
    )
    if compaction is None or not is_current:
        return Step(state=state)
    status = event.response.status
    if status == "completed" and compaction.summary:
        return _complete(state, compaction)
    if status == "completed":
        return abandon(state, "empty_summary")
    reason = f"maintenance_{status}"
    return abandon(state, reason if reason in REASONS else "maintenance_failed")


def _complete(state: SessionState, compaction: Compaction) -> Step:
    assert compaction.summary is not None
    known = state.realtime.known_items
    dropped = max(len(known) - KEEP_RECENT_ITEMS, 0)
    deleted, kept = known[:dropped], known[dropped:]
    summary_item = ItemCreate(
        item={
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": SUMMARY_PREFIX + compaction.summary}],
        }
    )
    items_after = len(kept) + 1
    finished = state.with_realtime(compaction=None, compaction_cooldown=COOLDOWN_RESPONSES, known_items=kept)
    effects: list[Any] = [
        FinishCompaction(
            number=compaction.number, status="completed", items_deleted=len(deleted), items_after=items_after
        )
    ]
    if compaction.request_id and compaction.reply_to:
        body = _result(
            finished,
            compaction,
            compacted=True,
            items_deleted=len(deleted),
            items_after=items_after,
            summary_length=len(compaction.summary),
        )
        effects.append(
            AnswerRequest(request_id=compaction.request_id, gateway_id=compaction.reply_to, body=body)
        )
    return Step(
        state=finished,
        controls=(*(ItemDelete(item_id=item_id) for item_id in deleted), summary_item),
        effects=tuple(effects),
    )


# ── abandoning ───────────────────────────────────────────────────────────────────────────


def abandon(state: SessionState, reason: str, *, cancel: bool = False) -> Step:
    """End the cycle without pruning, and cool down. With `cancel`, a maintenance response that
    is still running is cancelled (one not yet started is cancelled when it starts)."""
    compaction = state.realtime.compaction
    if compaction is None:
        return unchanged(state)
    released = state.with_realtime(compaction=None, compaction_cooldown=COOLDOWN_RESPONSES)
    controls = (
        (ResponseCancel(response_id=compaction.response_id),) if cancel and compaction.response_id else ()
    )
    effects: list[Any] = [FinishCompaction(number=compaction.number, status="abandoned", reason=reason)]
    if compaction.request_id and compaction.reply_to:
        body = _result(released, compaction, compacted=False, reason=reason)
        effects.append(
            AnswerRequest(request_id=compaction.request_id, gateway_id=compaction.reply_to, body=body)
        )
    return Step(state=released, controls=controls, effects=tuple(effects))


def superseded(state: SessionState) -> Step:
    """The caller spoke: their turn goes first, and the maintenance response is cancelled."""
    return abandon(state, "superseded_by_input", cancel=True)


def deadline_passed(state: SessionState, number: int) -> Step:
    compaction = state.realtime.compaction
    if compaction is None or compaction.number != number:
        return unchanged(state)
    return abandon(state, "maintenance_timed_out", cancel=True)


def summary_unsaved(state: SessionState, number: int, detail: str) -> Step:
    """The summary could not be stored: nothing may be pruned, so the cycle is abandoned."""
    compaction = state.realtime.compaction
    if compaction is None or compaction.number != number:
        return unchanged(state)
    incident = RecordIncident(
        code="compaction_summary_not_persisted",
        summary=REASONS["summary_not_persisted"],
        severity="warning",
        context={"compaction": number, "detail": detail},
    )
    # The response has written its text already and is about to finish: nothing to cancel.
    abandoned = abandon(state, "summary_not_persisted")
    return abandoned.then(Step(state=abandoned.state, effects=(incident,)))


def interrupted_by_end(before: SessionState, step: Step) -> Step:
    """A session that ends mid-compaction records the cycle as abandoned (the call is over, so
    nothing is cancelled on it)."""
    if before.is_terminal or not step.state.is_terminal or step.state.realtime.compaction is None:
        return step
    abandoned = abandon(step.state, step.state.end_reason or "session_ended")
    return Step(state=abandoned.state, controls=step.controls, effects=step.effects + abandoned.effects)


# ── what Switchboard knows by id ─────────────────────────────────────────────────────────


def track(state: SessionState, item_id: str) -> SessionState:
    """Remember a provider item by id (newest last, at most 64)."""
    known = tuple(known_id for known_id in state.realtime.known_items if known_id != item_id)
    return state.with_realtime(known_items=(*known, item_id)[-MAXIMUM_KNOWN_ITEMS:])


def forget(state: SessionState, item_id: str) -> SessionState:
    """An item the provider deleted is not known any more."""
    if item_id not in state.realtime.known_items:
        return state
    return state.with_realtime(
        known_items=tuple(known_id for known_id in state.realtime.known_items if known_id != item_id)
    )


def bounded_summary(text: str) -> str:
    """The summary cut to its bound on a UTF-8 character boundary."""
    return text.encode()[:MAXIMUM_SUMMARY_BYTES].decode(errors="ignore")


def _result(
    state: SessionState,
    compaction: Compaction | None,
    *,
    compacted: bool,
    reason: str | None = None,
    items_deleted: int = 0,
    items_after: int | None = None,
    summary_length: int = 0,
) -> dict[str, Any]:
    """The answer to a forced compaction: compacted or not and why, with the item counts."""
    items_before = compaction.items_before if compaction else len(state.realtime.known_items)
    return {
        "compacted": compacted,
        "compaction": compaction.number if compaction else None,
        "reason": reason,
        "message": "compacted" if compacted else REASONS.get(reason or "", reason or ""),
        "items_before": items_before,
        "items_after": items_before if items_after is None else items_after,
        "items_deleted": items_deleted,
        "summary_length": summary_length,
        "trigger_input_tokens": compaction.trigger_input_tokens
        if compaction
        else state.realtime.last_response_input_tokens,
        "cooldown_responses": state.realtime.compaction_cooldown,
    }
