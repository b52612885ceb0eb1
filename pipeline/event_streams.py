"""Event streams: a call's log entries and its end-of-call report, published to the app's own
broker through kombu (`docs/events.md`). This module is the stream's shape — which brokers, the
message ids, routing keys and bodies — with no I/O; `workers/event_streams.py` publishes.

Every message of a session has an id that is the same however often it is published (a worker
killed mid-publish, a retry, a dead letter replayed): `{session_id}:{seq}` for a log entry and
`{session_id}:report` for the report, so an app that keeps the ids it took drops duplicates.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

# The brokers kombu reaches that an app is offered: AMQP (RabbitMQ), Amazon SQS and Redis, each
# with its TLS form where it has one.
SCHEMES = frozenset({"amqp", "amqps", "sqs", "redis", "rediss"})
# A topic exchange, so an app binds only the kinds it reads (`session.turn.*`, `session.#`).
DEFAULT_EXCHANGE = "switchboard.events"
REPORT_KIND = "call.report"
# What stands in for a password wherever the URL is shown.
MASK = "***"


def is_supported(url: str) -> bool:
    """Whether kombu is asked to reach this broker: its scheme is one offered, and it names a host
    (SQS's may be empty: the region and credentials come from the URL's user or the environment)."""
    parts = urlsplit(url)
    return parts.scheme in SCHEMES and (bool(parts.hostname) or parts.scheme == "sqs")


def masked(url: str) -> str:
    """The URL as it may be shown: its password (or an SQS secret key) replaced by `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def entry_id(session_id: str, seq: int) -> str:
    """A log entry's message id."""
    return f"{session_id}:{seq}"


def report_id(session_id: str) -> str:
    """The end-of-call report's message id."""
    return f"{session_id}:report"


def routing_key(kind: str) -> str:
    """The topic a message is published under: `session.` and its kind (`session.turn.user`)."""
    return f"session.{kind}"


def entry_body(session_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A log entry's message body: the entry exactly as `GET /v1/sessions/{id}/log` answers it,
    and the session it belongs to."""
    return {"session_id": session_id, **entry}


def report_body(session_id: str, after_seq: int, report: dict[str, Any]) -> dict[str, Any]:
    """The report's message body: published after the log's last entry (`after_seq`)."""
    return {"session_id": session_id, "kind": REPORT_KIND, "after_seq": after_seq, "report": report}


def shown(events: object) -> dict[str, Any] | None:
    """A session's (or route's) `events` as an answer may show it: the URL masked."""
    if not isinstance(events, dict) or not isinstance(events.get("url"), str):
        return None
    return {"url": masked(events["url"]), "exchange": events.get("exchange", DEFAULT_EXCHANGE)}
