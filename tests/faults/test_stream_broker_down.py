"""An app's event-stream broker that is down — a listener that accepts and never answers, a
closed port, a login it refuses — holds up nothing but its own deliveries (issue 44, item 11).

With one `switchboard worker` on every queue (the README's way), three calls streaming to a
listener that never answers made an unrelated six-turn call take 41 s instead of 2.4 s (the
sweeps held every thread of the one worker: each waited for the session's publisher lock or for
kombu's connect, retry and connect again); a closed port or a refused login made the streaming
calls themselves take 30 to 35 s. With the Procfile's separate stream worker, another app's healthy
stream took 189 s. Each test proves its fault happened (the listener was connected to, the
streams are behind), then bounds what the fault must not touch, generously but far below the
defect's figure."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.entity import Exchange, Queue
from kombu.message import Message
from kombu.messaging import Consumer

from pipeline.platform.names import EVENT_STREAMS_QUEUE, QUEUES
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
TURNS = 6
# A call of six turns takes 2 to 3 s here; the defect took 26 to 41 s (one worker) and 189 s (the
# healthy stream beside a dead one). Far above the first, far below the second.
BOUND_S = 10.0


def _turns(gap_ms: int) -> dict[str, Any]:
    return {
        "name": "six-turns",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 20,
            "speech_ms": 100,
            "response_wait_ms": 20_000,
        },
        "caller": [
            *({"say": f"Question number {turn}?", "after_ms": gap_ms} for turn in range(TURNS)),
            {"hangup": True, "after_ms": 200},
        ],
        "model": [{"say": f"Answer number {turn}."} for turn in range(TURNS)],
    }


class DeadListener:
    """A broker that hangs: a TCP listener that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0), backlog=200)
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


def _call_seconds(record: dict[str, Any]) -> float:
    """How long the call took, by the worker's own clock: created to ended."""
    ended = datetime.fromisoformat(record["ended_at"])
    created = datetime.fromisoformat(record["created_at"])
    return (ended - created).total_seconds()


def _calls(client: Client, count: int, **spec: Any) -> list[str]:
    """`count` calls connected at once, each with `spec`."""
    sessions = [str(client.create_session("Be brief.", **spec)["id"]) for _ in range(count)]
    for session_id in sessions:
        client.connect(session_id)
    return sessions


def _ended(client: Client, session_id: str) -> dict[str, Any]:
    record = client.wait_for_status(session_id, timeout_s=120)
    assert record["status"] == "ended", record
    return record


@pytest.fixture(scope="module")
def one_worker(services: Services, namespace: str) -> Iterator[Stack]:
    """The README's way: one `switchboard worker` process on every queue."""
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-onestream") as stack:
        stack.start(workers=1)
        yield stack


def test_a_broker_that_never_answers_holds_up_no_other_call(
    one_worker: Stack, dead_listener: DeadListener, figure: Callable[[str], None]
) -> None:
    client = Client(one_worker.api_url, one_worker.api_token)
    set_script(one_worker, _turns(gap_ms=100))
    alone = _call_seconds(_ended(client, _calls(client, 1)[0]))

    dead = {"url": f"amqp://guest:guest@127.0.0.1:{dead_listener.port}/"}
    set_script(one_worker, _turns(gap_ms=300))
    streaming = _calls(client, 3, events=dead)
    set_script(one_worker, _turns(gap_ms=100))
    [unrelated] = _calls(client, 1)
    beside = _call_seconds(_ended(client, unrelated))
    streamed = [_call_seconds(_ended(client, session_id)) for session_id in streaming]

    # The fault happened: the sweeps connected to the listener, and nothing of the streams went.
    assert dead_listener.accepted
    for session_id in streaming:
        assert client.session(session_id)["event_stream"]["published_seq"] == 0
    figure(
        f"dead stream broker, one worker: an unrelated {TURNS}-turn call {beside:.1f} s beside three "
        f"streaming to it (alone {alone:.1f} s); the streaming calls {max(streamed):.1f} s at most; "
        f"{len(dead_listener.accepted)} connections to the dead broker"
    )
    assert beside < BOUND_S, (beside, alone)
    assert max(streamed) < BOUND_S, streamed


@pytest.mark.parametrize("fault", ["closed port", "refused login"])
def test_a_broker_that_refuses_does_not_slow_the_calls_streaming_to_it(
    one_worker: Stack, fault: str, figure: Callable[[str], None]
) -> None:
    client = Client(one_worker.api_url, one_worker.api_token)
    url = (
        f"amqp://guest:guest@127.0.0.1:{_closed_port()}/"
        if fault == "closed port"
        else "amqp://guest:not-the-password@127.0.0.1:5672/"
    )
    set_script(one_worker, _turns(gap_ms=100))
    streaming = _calls(client, 3, events={"url": url})
    took = [_call_seconds(_ended(client, session_id)) for session_id in streaming]

    for session_id in streaming:  # the fault happened: nothing of the streams went
        assert client.session(session_id)["event_stream"]["published_seq"] == 0
    figure(f"stream broker down ({fault}), one worker: the three streaming calls {max(took):.1f} s at most")
    assert max(took) < BOUND_S, took


class AppBus:
    """The healthy app's queue on its exchange, read from a thread: when each message came (the
    machine's clock, as the session record's times are)."""

    def __init__(self, exchange: str) -> None:
        self.connection = Connection(RABBITMQ, connect_timeout=5)
        self.connection.ensure_connection(max_retries=1, timeout=5)
        self.queue = Queue(
            f"app-{uuid.uuid4().hex[:8]}",
            Exchange(exchange, type="topic", durable=True),
            routing_key="session.#",
            exclusive=True,
        )
        self.queue(self.connection.default_channel).declare()
        self.arrivals: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._take, daemon=True)
        self._thread.start()

    def _take(self) -> None:
        def taken(body: dict[str, Any], message: Message) -> None:
            self.arrivals.append((time.time(), body))
            message.ack()

        with Consumer(self.connection, queues=[self.queue], callbacks=[taken], accept=["json"]):
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError, socket.timeout):
                    self.connection.drain_events(timeout=0.2)

    def report_at(self, session_id: str) -> float | None:
        return next(
            (
                at
                for at, body in self.arrivals
                if body["session_id"] == session_id and body["kind"] == "call.report"
            ),
            None,
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.connection.release()


def test_a_dead_apps_stream_does_not_delay_a_healthy_apps_stream(
    services: Services, namespace: str, dead_listener: DeadListener, figure: Callable[[str], None]
) -> None:
    """The Procfile's way: the calls' queues on one worker, the event streams on their own with
    4 threads. Calls streaming to a broker that never answers, then one streaming to a healthy
    RabbitMQ: the healthy one's report arrives moments after its call ended, not behind the dead
    app's sweeps."""
    calls = ",".join(queue for queue in QUEUES if queue != EVENT_STREAMS_QUEUE)
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-twostreams") as stack:
        stack.start(workers=0)
        stack.add_worker("--queues", calls)
        stack.add_worker("--queues", EVENT_STREAMS_QUEUE, "--threads", "4")
        client = Client(stack.api_url, stack.api_token)
        exchange = f"test.healthy.{uuid.uuid4().hex[:8]}"
        bus = AppBus(exchange)
        try:
            set_script(stack, _turns(gap_ms=100))
            dead = _calls(client, 4, events={"url": f"amqp://guest:guest@127.0.0.1:{dead_listener.port}/"})
            # Every sweep the dead app's calls made is queued or done before the healthy call.
            for session_id in dead:
                _ended(client, session_id)
            [healthy] = _calls(client, 1, events={"url": RABBITMQ, "exchange": exchange})
            ended_at = datetime.fromisoformat(_ended(client, healthy)["ended_at"]).timestamp()
            deadline = time.monotonic() + 120
            while bus.report_at(healthy) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            report_at = bus.report_at(healthy)
            for session_id in dead:
                assert client.session(session_id)["event_stream"]["published_seq"] == 0
        finally:
            bus.close()
    assert dead_listener.accepted  # the fault happened: the dead app's broker was tried
    assert report_at is not None, "the healthy stream's report never came"
    late = report_at - ended_at
    figure(
        f"dead stream broker beside a healthy one (Procfile): the healthy report {late:.1f} s after "
        f"its call ended; {len(dead_listener.accepted)} connections to the dead broker"
    )
    assert late < BOUND_S, late
