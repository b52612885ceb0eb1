"""Numbered events: a session's events, logged and applied under its row lock as they become
contiguous, whichever of the four event queues they came by."""

from __future__ import annotations

import time
from typing import Any

import dramatiq
from pydantic import ValidationError

from models.applied import Applied
from models.releases import read_across
from models.sessions import locked_for
from pipeline.call.errors import MalformedEnvelope
from pipeline.platform.envelope import EventEnvelope
from pipeline.platform.names import ADMISSION_QUEUE, COMPACTION_QUEUE, TOOL_QUEUE, TRANSCRIPT_QUEUE
from workers import metrics as worker_metrics
from workers import tracing
from workers.actors.shared import EVENT_POLICY, NEVER_RETRIED, after_commit, deployment, publish
from workers.outages import waits_out_outages


def deliver(envelope_messages: list[dict[str, Any]]) -> Applied:
    """Log numbered events of one session (the gateway sends a session's events of one flush
    together) and apply what is now contiguous, under the row lock, in one transaction."""
    try:
        envelopes = [read_across(EventEnvelope, message, "event envelope") for message in envelope_messages]
    except ValidationError as exc:
        raise MalformedEnvelope(f"not an event envelope: {exc.errors()[0]['msg']}") from exc
    if not envelopes or len({envelope.session_id for envelope in envelopes}) != 1:
        raise MalformedEnvelope("a message carries the events of exactly one session")
    with tracing.applying(envelopes) as spans:
        with locked_for(envelopes, namespace=deployment()) as session:
            each = [session.deliver(envelope) for envelope in envelopes]
            applied = Applied.together(each)
            # Under the lock, before the writes and the COMMIT go in one round trip: a rollback
            # re-applies the same events and re-emits the same ids, which the gateway sends once.
            publish(session, applied)
            published_at = time.time()
        if spans:
            disposition = dict(applied.dispositions)
            tracing.disposed(spans, [disposition.get(envelope.seq, "") for envelope in envelopes])
        after_commit(envelopes[0].session_id, applied)
    for envelope, delivered in zip(envelopes, each, strict=True):
        worker_metrics.delivered(envelope, delivered, published_at)
    return applied


def _envelopes(
    envelope: dict[str, Any] | None, envelopes: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """A message's events: one (`envelope`), or a session's several (`envelopes`)."""
    if envelopes is not None:
        return envelopes
    if envelope is None:
        raise MalformedEnvelope("an event message carries an envelope or envelopes")
    return [envelope]


@dramatiq.actor(
    queue_name=ADMISSION_QUEUE, actor_name="admission_event", throws=NEVER_RETRIED, **EVENT_POLICY
)
@waits_out_outages()
def admission_event(
    envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None
) -> None:
    deliver(_envelopes(envelope, envelopes))


@dramatiq.actor(
    queue_name=TRANSCRIPT_QUEUE, actor_name="transcript_event", throws=NEVER_RETRIED, **EVENT_POLICY
)
@waits_out_outages()
def transcript_event(
    envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None
) -> None:
    deliver(_envelopes(envelope, envelopes))


@dramatiq.actor(queue_name=TOOL_QUEUE, actor_name="tool_event", throws=NEVER_RETRIED, **EVENT_POLICY)
@waits_out_outages()
def tool_event(envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None) -> None:
    deliver(_envelopes(envelope, envelopes))


@dramatiq.actor(
    queue_name=COMPACTION_QUEUE, actor_name="compaction_event", throws=NEVER_RETRIED, **EVENT_POLICY
)
@waits_out_outages()
def compaction_event(
    envelope: dict[str, Any] | None = None, envelopes: list[dict[str, Any]] | None = None
) -> None:
    """A forced compaction or a deleted item: numbered like every event of the session."""
    deliver(_envelopes(envelope, envelopes))
