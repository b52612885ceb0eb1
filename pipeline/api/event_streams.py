"""Event streams: a call's log entries and its end-of-call report, published to the app's own
broker through kombu (`docs/events.md`). This module is the stream's shape — which brokers, the
message ids, routing keys and bodies — and the rules of waiting for a broker that is down, with
no I/O; `workers/event_streams.py` publishes.

Every message of a session has an id that is the same however often it is published (a worker
killed mid-publish, a retry, a dead letter replayed): `{session_id}:{seq}` for a log entry and
`{session_id}:report` for the report, so an app that keeps the ids it took drops duplicates.

A broker that failed a try is down until its back-off is over (`backoff_ms`: doubling with each
failed try in a row, between the deployment's minimum and maximum): no sweep of any session
streaming to it tries it before then, and after it one sweep tries while the others wait for what
that try finds. A session's stream that has waited as long as its retries' back-offs add up to
(`gives_up_after_ms`) is given up: a dead letter, which `switchboard dlq replay` sends again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
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


def broker_key(url: str, exchange: str) -> str:
    """What names a stream's broker (and exchange) where its back-off is kept: a digest, since the
    URL may hold a password. Sessions of one app that stream to one exchange share it."""
    return hashlib.sha256(f"{url}\n{exchange}".encode()).hexdigest()[:32]


def backoff_ms(failures: int, minimum_ms: int, maximum_ms: int) -> int:
    """How long a broker that failed `failures` tries in a row (one or more) is left alone."""
    return min(maximum_ms, minimum_ms * 2 ** min(failures - 1, 32))  # type: ignore[no-any-return]


def gives_up_after_ms(retries: int, minimum_ms: int, maximum_ms: int) -> int:
    """How long a session's stream waits for its broker before it is a dead letter: the back-offs
    of its retries added up (`SWITCHBOARD_EVENT_STREAM_RETRIES` 8, from 1 s: 255 s)."""
    return sum(backoff_ms(failures, minimum_ms, maximum_ms) for failures in range(1, retries + 1))


@dataclass(frozen=True)
class Waiting:
    """A session's sweep waiting for its broker: since when (ms, the broker's clock), and the
    token that makes it the session's one waiting sweep (every other sweep of the session, while
    it waits, leaves the publishing to it)."""

    since_ms: int
    token: str

    def as_json(self) -> dict[str, Any]:
        return {"since_ms": self.since_ms, "token": self.token}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Waiting | None:
        if not isinstance(data, dict):
            return None
        since, token = data.get("since_ms"), data.get("token")
        if not isinstance(since, int) or not isinstance(token, str) or not token:
            return None
        return cls(since, token)
