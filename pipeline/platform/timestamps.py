"""Points in time as Switchboard writes them: RFC 3339, in UTC, to the microsecond, with a `Z`
(`2026-12-04T23:37:51.123456Z`, the form of Standard Webhooks' own `timestamp`), in every API
answer, the session record and its event log, the call log, the end-of-call report, webhooks
and event streams (docs/api.md, "Timestamps").

One format, so a client parses every time the same way and sorts them as text. Microseconds,
because that is what PostgreSQL and the event log hold: the log's received/taken/applied times
are sub-millisecond apart, and an export or a latency breakdown read from them loses nothing.
Durations and offsets (`*_ms`, `*_s`) stay numbers; only points in time are written here."""

from __future__ import annotations

import re
from datetime import UTC, datetime

# What `rfc3339` writes, and nothing else (a test walks the API's answers with it).
RFC3339_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


def rfc3339(moment: datetime | float) -> str:
    """A point in time (an aware datetime, or seconds since the epoch) as RFC 3339 UTC. A naive
    datetime is taken to be UTC already (what PostgreSQL's `timestamp` columns hold)."""
    if isinstance(moment, datetime):
        aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    else:
        aware = datetime.fromtimestamp(float(moment), UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def rfc3339_or_none(moment: datetime | float | None) -> str | None:
    """`rfc3339`, with None (a time that has not come: not ended, never revoked) kept None."""
    return None if moment is None else rfc3339(moment)


def is_rfc3339(value: object) -> bool:
    """Whether a value is a point in time as `rfc3339` writes it."""
    return isinstance(value, str) and RFC3339_UTC.fullmatch(value) is not None


def epoch_seconds(written: str) -> float:
    """A time as `rfc3339` wrote it, back in seconds since the epoch (a reader that computes
    with the log's times: an export's offsets, a latency breakdown)."""
    return datetime.fromisoformat(written).timestamp()
