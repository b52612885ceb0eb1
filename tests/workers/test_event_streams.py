"""A session's event stream (workers/event_streams.py, docs/events.md) on real PostgreSQL, Redis
and the machine's RabbitMQ: a publisher killed between the broker taking a message and the cursor
moving past it costs a duplicate with the same id, never a gap or a reordering; racing sweeps
publish each message once, in seq order, and none waits for another; an erasure stops a sweep at
the next message; a broker that is down (a listener that never answers, a closed port, a refused
login) costs a sweep at most its connect timeout, and is not tried again before its back-off is
over, by any session streaming to it."""

from __future__ import annotations

import socket
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
from pipeline.session.state import EventStream
from pipeline.session.wire import AdmissionBegun, CallAttached, SessionCreated
from tests.support.calls import GATEWAY, deliver, new_session_id, spoken_turns

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
# The consumer waits this long for a message before it counts what it has as all.
QUIET_S = 1.0


class Killed(BaseException):
    """The publisher's process died here (not an Exception: nothing on the way catches it)."""


def _streaming_call(exchange: str, url: str = RABBITMQ) -> str:
    """A session that streams to `exchange` at `url`, with two spoken turns and its end applied."""
    session_id = new_session_id()
    now = time.time()
    stream = EventStream(url=url, exchange=exchange)
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


def _gate(runtime: Any, *, minimum_ms: int = 1_000, maximum_ms: int = 300_000, retries: int = 8) -> Any:
    from workers.event_streams import StreamGate

    settings = runtime.settings
    return StreamGate(
        runtime.broker.client,
        settings.broker_namespace,
        minimum_ms=minimum_ms,
        maximum_ms=maximum_ms,
        retries=retries,
    )


def _sweep(session_id: str, gate: Any, waiting: Any = None) -> Any:
    from workers.event_streams import sweep

    return sweep(session_id, waiting, gate=gate, price_of=lambda _provider, _model: None, namespace="")


def _publish(session_id: str) -> int:
    from workers import runtime

    return int(_sweep(session_id, _gate(runtime.current())).published)


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


def test_an_erasure_during_a_sweep_stops_it_at_the_next_message(
    worker_runtime: Any, exchange: str, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Erased once the broker took the first entry: nothing after it goes, the report neither,
    though the sweep had projected the whole log before the erasure."""
    import workers.event_streams as streams
    from models.erasure import erase_session

    session_id = _streaming_call(exchange)
    seqs = [entry.seq for entry in call_log(session_id)]
    moved = streams.entry_published

    def erased_after_the_first(session: str, seq: int) -> None:
        moved(session, seq)
        if seq == seqs[0]:
            erase_session(session, by="test")

    monkeypatch.setattr(streams, "entry_published", erased_after_the_first)
    assert _publish(session_id) == 1
    assert bus.taken_ids() == [f"{session_id}:{seqs[0]}"]
    monkeypatch.setattr(streams, "entry_published", moved)
    assert _publish(session_id) == 0  # erased: its stream stops where it was
    assert bus.taken_ids() == []


def test_a_sweep_that_finds_the_publisher_busy_leaves_at_once_and_its_entries_still_go(
    worker_runtime: Any, exchange: str, bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second sweep while the first is held mid-publish holds no thread: it returns at once,
    and the first publishes what the second came for (an entry logged after its projection)."""
    import workers.event_streams as streams

    session_id = _streaming_call(exchange)
    first_seqs = [entry.seq for entry in call_log(session_id)]
    held, go_on = threading.Event(), threading.Event()
    moved = streams.entry_published

    def held_at_the_first(session: str, seq: int) -> None:
        moved(session, seq)
        if seq == first_seqs[0] and not held.is_set():
            held.set()
            assert go_on.wait(30)

    monkeypatch.setattr(streams, "entry_published", held_at_the_first)
    published: list[int] = []
    first = threading.Thread(target=lambda: published.append(_publish(session_id)))
    first.start()
    try:
        assert held.wait(30)
        # An input logged after the first sweep projected the log (a late transcript is kept).
        late = {"type": "switchboard.end_requested", "reason": "app_ended"}
        deliver(session_id, len(spoken_turns(2)) + 2, late)
        started = time.monotonic()
        assert _publish(session_id) == 0
        assert time.monotonic() - started < 1.0  # it did not wait for the publisher's lock
    finally:
        go_on.set()
        first.join(30)
    seqs = [entry.seq for entry in call_log(session_id)]
    ids = [f"{session_id}:{seq}" for seq in seqs] + [f"{session_id}:report"]
    assert published == [len(ids)]
    assert bus.taken_ids() == ids


class DeadListener:
    """A TCP listener that accepts every connection and never answers (a broker that hangs)."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.socket.close()
        for connection in self.accepted:
            connection.close()


@pytest.fixture
def dead_listener() -> Iterator[DeadListener]:
    listener = DeadListener()
    yield listener
    listener.close()


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def test_a_broker_that_never_answers_is_tried_once_then_left_alone_until_its_back_off_is_over(
    worker_runtime: Any, exchange: str, dead_listener: DeadListener
) -> None:
    """The first sweep waits its connect timeout, no longer; then neither it nor another
    session's sweep to the same broker connects before the back-off is over, and each session
    waits with one sweep; once it is over, one sweep tries again."""
    from workers.event_streams import CONNECT_TIMEOUT_S, Swept

    url = f"amqp://guest:guest@127.0.0.1:{dead_listener.port}/"
    gate = _gate(worker_runtime, minimum_ms=2_000, maximum_ms=8_000)
    first, second = _streaming_call(exchange, url), _streaming_call(exchange, url)

    started = time.monotonic()
    tried = _sweep(first, gate)
    took = time.monotonic() - started
    assert len(dead_listener.accepted) == 1  # the fault happened: the broker was reached
    assert CONNECT_TIMEOUT_S - 0.5 < took < CONNECT_TIMEOUT_S + 1.5, took
    assert tried.published == 0 and tried.waiting is not None
    assert 1_000 < tried.again_in_ms <= 2_000

    started = time.monotonic()
    left = _sweep(second, gate)
    assert time.monotonic() - started < 0.5
    assert len(dead_listener.accepted) == 1  # known down: not tried
    assert left.waiting is not None and left.waiting != tried.waiting
    # A second sweep of the first session while it waits: its waiting sweep carries it.
    assert _sweep(first, gate) == Swept(0)
    assert len(dead_listener.accepted) == 1

    time.sleep(tried.again_in_ms / 1000)
    again = _sweep(first, gate, tried.waiting)
    assert len(dead_listener.accepted) == 2  # the back-off was over: tried once more
    assert again.waiting == tried.waiting and 3_000 < again.again_in_ms <= 4_000  # doubled


@pytest.mark.parametrize("refusal", ["closed port", "refused login"])
def test_a_broker_that_refuses_costs_a_sweep_no_wait(
    worker_runtime: Any, exchange: str, refusal: str
) -> None:
    """A closed port (kombu waited 2 s to try again) or a login the broker refuses fails the try
    at once; the stream waits for the broker's back-off."""
    url = (
        f"amqp://guest:guest@127.0.0.1:{_closed_port()}/"
        if refusal == "closed port"
        else "amqp://guest:not-the-password@127.0.0.1:5672/"
    )
    session_id = _streaming_call(exchange, url)
    started = time.monotonic()
    swept = _sweep(session_id, _gate(worker_runtime))
    assert time.monotonic() - started < 1.0
    assert swept.published == 0 and swept.waiting is not None and swept.again_in_ms > 0
    assert cursor_of(session_id) == StreamCursor(0, report_published=False)


def test_a_stream_that_waited_longer_than_its_retries_allow_is_given_up(
    worker_runtime: Any, exchange: str
) -> None:
    """Two retries from 100 ms: the session waits 100 ms, then 200 ms, and the third failure is
    a dead letter naming the broker's host, never its password. Its replay, made while the
    broker's back-off (400 ms after the third failure) is not over, waits instead."""
    from workers.event_streams import EventStreamGivenUp

    port = _closed_port()
    session_id = _streaming_call(exchange, f"amqp://guest:s3cret@127.0.0.1:{port}/")
    gate = _gate(worker_runtime, minimum_ms=100, maximum_ms=1_000, retries=2)
    waiting = None
    for _ in range(2):
        swept = _sweep(session_id, gate, waiting)
        assert swept.waiting is not None
        waiting = swept.waiting
        time.sleep(swept.again_in_ms / 1000)
    with pytest.raises(EventStreamGivenUp) as given_up:
        _sweep(session_id, gate, waiting)
    assert f"amqp://127.0.0.1:{port}" in str(given_up.value) and "s3cret" not in str(given_up.value)
    assert given_up.value.code == "event_stream_failed"
    # Replayed at once (its message as it was): the broker's back-off is not over, so it waits
    # for the broker's next try instead of being given up again untried.
    replayed = _sweep(session_id, gate, waiting)
    assert replayed.waiting == waiting and replayed.again_in_ms > 0
