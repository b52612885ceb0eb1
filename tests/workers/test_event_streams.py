"""A session's event stream (workers/event_streams.py, docs/events.md) on real PostgreSQL and the
machine's RabbitMQ: a publisher killed between the broker taking a message and the cursor moving
past it costs a duplicate with the same id, never a gap or a reordering; racing sweeps publish
each message once, in seq order."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.message import Message
from kombu.messaging import Consumer

from models.event_streams import StreamCursor, cursor_of
from models.records import call_log
from models.sessions import locked_session, new_session
from pipeline.state import EventStream
from pipeline.wire import AdmissionBegun, CallAttached, SessionCreated
from tests.support.calls import GATEWAY, deliver, new_session_id, spoken_turns

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
# The consumer waits this long for a message before it counts what it has as all.
QUIET_S = 1.0


class Killed(BaseException):
    """The publisher's process died here (not an Exception: nothing on the way catches it)."""


def _streaming_call(exchange: str) -> str:
    """A session that streams to `exchange`, with two spoken turns and its end applied."""
    session_id = new_session_id()
    now = time.time()
    stream = EventStream(url=RABBITMQ, exchange=exchange)
    with new_session(session_id, GATEWAY) as session:
        session.apply_host(SessionCreated(instructions="Be brief.", event_stream=stream), now)
    for event in (AdmissionBegun(), CallAttached(call_id="rtc_test")):
        with locked_session(session_id) as session:
            session.apply_host(event, now)
    events = [*spoken_turns(2), {"type": "switchboard.end_requested", "reason": "app_ended"}]
    for seq, event in enumerate(events, start=1):
        deliver(session_id, seq, event)
    return session_id


class Bus:
    """The app's queue on the stream's exchange, and the ids of what it took, in order."""

    def __init__(self, exchange: str) -> None:
        self.connection = Connection(RABBITMQ, connect_timeout=5)
        try:
            self.connection.ensure_connection(max_retries=1, timeout=5)
        except Exception as error:  # noqa: BLE001 (any transport error says the same)
            pytest.fail(
                f"RabbitMQ is not reachable at {RABBITMQ} ({error!r}); .ci/run starts it when installed"
            )
        self.queue = Queue(
            f"app-{uuid.uuid4().hex[:8]}",
            Exchange(exchange, type="topic", durable=True),
            routing_key="session.#",
            exclusive=True,
        )
        self.queue(self.connection.default_channel).declare()

    def taken_ids(self) -> list[str]:
        ids: list[str] = []

        def taken(_body: dict[str, Any], message: Message) -> None:
            ids.append(message.properties["message_id"])
            message.ack()

        with Consumer(self.connection, queues=[self.queue], callbacks=[taken], accept=["json"]):
            while True:
                try:
                    self.connection.drain_events(timeout=QUIET_S)
                except TimeoutError:
                    return ids


@pytest.fixture
def exchange() -> str:
    return f"test.events.{uuid.uuid4().hex[:8]}"


@pytest.fixture
def bus(exchange: str) -> Iterator[Bus]:
    app = Bus(exchange)
    yield app
    app.connection.release()


def _publish(session_id: str) -> int:
    from workers.event_streams import publish_pending

    return publish_pending(session_id, {}, lambda _provider: "gpt-realtime")


def test_a_publisher_killed_before_its_cursor_moved_costs_a_duplicate_in_order(
    worker_runtime: Any, exchange: str, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the broker took entry 2: the next sweep sends 2 again, then the rest."""
    import workers.event_streams as streams

    session_id = _streaming_call(exchange)
    seqs = [entry.seq for entry in call_log(session_id)]
    assert len(seqs) >= 4

    moved = streams.entry_published

    def killed_at_the_second(session: str, seq: int) -> None:
        if seq == seqs[1]:
            raise Killed
        moved(session, seq)

    monkeypatch.setattr(streams, "entry_published", killed_at_the_second)
    with pytest.raises(Killed):
        _publish(session_id)
    assert cursor_of(session_id) == StreamCursor(seqs[0], report_published=False)

    monkeypatch.setattr(streams, "entry_published", moved)
    assert _publish(session_id) == len(seqs)  # from entry 2 on, and the report
    ids = [f"{session_id}:{seq}" for seq in seqs] + [f"{session_id}:report"]
    assert bus.taken_ids() == [ids[0], ids[1], *ids[1:]]
    assert _publish(session_id) == 0  # nothing more to send


def test_racing_sweeps_publish_each_message_once_in_seq_order(
    worker_runtime: Any, exchange: str, bus: Bus
) -> None:
    """Four sweeps at once: one publishes under the session's lock, the others find it done."""
    session_id = _streaming_call(exchange)
    published: list[int] = []
    errors: list[BaseException] = []

    def sweep() -> None:
        try:
            published.append(_publish(session_id))
        except BaseException as error:  # noqa: BLE001 (surfaced below; a thread must not swallow it)
            errors.append(error)

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seqs = [entry.seq for entry in call_log(session_id)]
    assert sorted(published) == [0, 0, 0, len(seqs) + 1]
    assert bus.taken_ids() == [f"{session_id}:{seq}" for seq in seqs] + [f"{session_id}:report"]
