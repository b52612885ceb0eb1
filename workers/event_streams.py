"""Event streams to the app's own broker, through kombu (`docs/events.md`): every call-log entry
of a session, then its end-of-call report, published in seq order, at least once, each with a
message id that never changes (`pipeline.event_streams`).

One sweep publishes what the session's cursor has not confirmed yet: it waits to be the session's
only publisher (`models.event_streams.sole_publisher`), projects the call log past the cursor (as
`GET /v1/sessions/{id}/log` does), publishes each entry and moves the cursor past it once the
broker confirmed it, then the report once `call.ended` went. A sweep that fails stops at the first
message the broker did not take and raises `EventStreamFailed`, so Dramatiq tries it again with
backoff and then dead-letters it; any later sweep (another commit's, or `dlq replay`) starts at the
same message. The sweep's message names only the session: the URL (which may hold a password) is
read from PostgreSQL when it runs, never written to a queue or a dead letter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from kombu.connection import Connection
from kombu.entity import Exchange

from models.db import SessionRow
from models.event_streams import entry_published, report_published, sole_publisher
from models.records import call_log
from models.releases import read_across
from pipeline.cost import ModelPrices
from pipeline.errors import Fault
from pipeline.event_streams import REPORT_KIND, entry_body, entry_id, report_body, report_id, routing_key
from pipeline.state import EventStream, SessionState
from workers.app_webhooks import report

# A broker that does not connect, or confirm a message, within this is down for this try.
PUBLISH_TIMEOUT_S = 5.0
# Messages survive a restart of the app's broker (AMQP's delivery mode 2).
PERSISTENT = 2


class EventStreamFailed(Fault):
    """The app's broker did not take a message (not reachable, refused, or no confirmation): the
    sweep is tried again from that message."""

    code = "event_stream_failed"


def publish_pending(session_id: str, prices: dict[str, ModelPrices], model_for: Callable[[str], str]) -> int:
    """Publish the session's entries past its cursor, and its report once the call ended; how many
    messages the broker confirmed. Raises `EventStreamFailed` at the first it did not."""
    row = SessionRow.get_or_none(SessionRow.id == session_id)
    if row is None:
        return 0  # the session is gone: nothing to stream
    if row.erased_at is not None:
        # An erased session's call log is only how it ended, numbered afresh: published, its
        # entries would take ids the real ones had. Its stream stops where it was.
        return 0
    state = read_across(SessionState, row.state, "stored session state")
    stream = state.event_stream
    if stream is None:
        return 0
    with sole_publisher(session_id) as cursor:
        story = [entry.model_dump(mode="json") for entry in call_log(session_id)]
        pending = [entry for entry in story if entry["seq"] > cursor.published_seq]
        ended = next((entry for entry in story if entry["kind"] == "call.ended"), None)
        owes_report = ended is not None and not cursor.report_published
        if not pending and not owes_report:
            return 0
        published = 0
        with _Broker(stream) as publish:
            for entry in pending:
                publish(entry_body(session_id, entry), entry_id(session_id, entry["seq"]), entry["kind"])
                entry_published(session_id, entry["seq"])
                published += 1
            if ended is not None and owes_report:
                # The record as it is now, as the call.ended webhook's report is.
                fresh = read_across(
                    SessionState, SessionRow.get(SessionRow.id == session_id).state, "stored session state"
                )
                done = report(session_id, fresh, prices.get(model_for(str(fresh.provider))))
                body = report_body(session_id, ended["seq"], done)
                publish(body, report_id(session_id), REPORT_KIND)
                report_published(session_id)
                published += 1
        return published


class _Broker:
    """A connection to the stream's broker and a `publish(body, id, kind)` that returns once the
    broker took the message (AMQP: a publisher confirm), else raises `EventStreamFailed`."""

    def __init__(self, stream: EventStream) -> None:
        self.stream = stream
        self.where = _where(stream.url)
        self.connection = Connection(
            stream.url,
            connect_timeout=PUBLISH_TIMEOUT_S,
            transport_options={
                "confirm_publish": True,  # AMQP: basic_publish waits for the broker's ack
                "socket_timeout": PUBLISH_TIMEOUT_S,  # Redis
                "socket_connect_timeout": PUBLISH_TIMEOUT_S,
                "max_retries": 1,
            },
        )
        self.exchange = Exchange(stream.exchange, type="topic", durable=True)

    def __enter__(self) -> Callable[[dict[str, Any], str, str], None]:
        try:
            self.connection.ensure_connection(max_retries=1, timeout=PUBLISH_TIMEOUT_S)
            producer = self.connection.Producer(serializer="json")
            self.exchange(producer.channel).declare()
        except Exception as error:  # noqa: BLE001 (every transport raises its own: each is this broker down)
            self.connection.release()
            raise self._failed("could not be reached", error) from None

        def publish(body: dict[str, Any], message_id: str, kind: str) -> None:
            try:
                producer.publish(
                    body,
                    exchange=self.exchange,
                    routing_key=routing_key(kind),
                    message_id=message_id,
                    delivery_mode=PERSISTENT,
                    headers={"session_id": body["session_id"], "kind": kind},
                    timeout=PUBLISH_TIMEOUT_S,
                )
            except Exception as error:  # noqa: BLE001 (as above)
                raise self._failed(f"did not take {message_id}", error) from None

        return publish

    def __exit__(self, *_exc: object) -> None:
        self.connection.release()

    def _failed(self, what: str, error: BaseException) -> EventStreamFailed:
        # The error's type and the broker's host only: the URL and kombu's message may hold a password.
        return EventStreamFailed(f"the app's broker {self.where} {what} ({type(error).__name__})")


def _where(url: str) -> str:
    """The broker as it may be named in an error or a dead letter: its scheme, host and port."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}"
