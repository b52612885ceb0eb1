"""The event sink while Redis is unreachable, against a real Redis that is killed and started
again: what comes meanwhile is kept and sent in order once Redis answers, other work goes on,
and what a session's full outbox refuses leaves a numbered hole and an incident."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import dramatiq
import pytest
import redis

import gateway.sink
from gateway.sink import EventSink
from pipeline.call.errors import ReplyTimeout
from tests.faults.servers import PrivateRedis
from workers.broker import make_broker

NAMESPACE = "sbtest-outage"


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    # A short folder: a unix socket's path is limited to about a hundred bytes.
    with tempfile.TemporaryDirectory(prefix="sb-") as root:
        server = PrivateRedis(Path(root))
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def sink(private_redis: PrivateRedis) -> Iterator[EventSink]:
    broker = make_broker(private_redis.url, namespace=NAMESPACE)
    sink = EventSink(private_redis.url, broker, "gw-outage", NAMESPACE)
    try:
        yield sink
    finally:
        sink.close()
        broker.close()


def _speech(event_id: str) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_started",
        "event_id": event_id,
        "item_id": "i",
        "audio_start_ms": 1,
    }


def _outage(server: PrivateRedis, down_s: float) -> threading.Thread:
    """Kill Redis, keep it down `down_s`, start it again (empty); answers once it is down."""
    outage = threading.Thread(target=server.restart, args=(down_s,), daemon=True)
    outage.start()
    client = redis.Redis.from_url(server.url)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            client.ping()
        except redis.RedisError:
            break
        time.sleep(0.01)
    else:
        raise AssertionError("Redis never went down")
    client.close()
    return outage


def _queued(server: PrivateRedis, queue: str) -> list[dramatiq.Message[Any]]:
    """The messages waiting on a queue, in queue order."""
    client = redis.Redis.from_url(server.url)
    try:
        ids: list[bytes] = client.lrange(f"{NAMESPACE}:{queue}", 0, -1)  # type: ignore[assignment]
        stored: list[bytes] = client.hmget(f"{NAMESPACE}:{queue}.msgs", ids) if ids else []  # type: ignore[assignment]
        return [dramatiq.Message.decode(raw) for raw in stored]
    finally:
        client.close()


def _envelopes(server: PrivateRedis, session_id: str) -> list[tuple[int, dict[str, Any]]]:
    """(seq, event) of each event of the session waiting on the transcript queue, in seq order."""
    envelopes = [
        envelope
        for message in _queued(server, "transcript")
        for envelope in message.kwargs.get("envelopes") or [message.kwargs["envelope"]]
    ]
    mine = {e["seq"]: e["event"] for e in envelopes if e["session_id"] == session_id}
    return sorted(mine.items())


def test_what_comes_while_redis_is_down_for_twelve_seconds_is_kept_and_sent_in_order(
    private_redis: PrivateRedis, sink: EventSink
) -> None:
    """Events, an incident and a patient API request submitted while Redis is down longer than
    the sink's old 10 s patience are all enqueued once it is back, each session's events with
    consecutive seqs in submission order; meanwhile the sink thread answers other work; an API
    request whose caller stopped waiting is dropped, not sent late."""
    assert sink.submit_event("sess_early", 1, _speech("early"), time.time()).result(timeout=5) == 1
    outage = _outage(private_redis, 12.0)
    futures: dict[str, list[Future[int]]] = {"sess_a": [], "sess_b": []}
    for n in range(5):
        for session_id, kept in futures.items():
            kept.append(sink.submit_event(session_id, 1, _speech(f"{session_id}-{n}"), time.time()))
    patient = sink.submit_request("describe_session", reply_timeout_ms=60_000, request_id="patient")
    impatient = sink.submit_request("describe_session", reply_timeout_ms=1_000, request_id="impatient")
    sink.submit_incident("sess_a", "malformed_frame", "a bad frame", {"bytes": 3})

    # Other work is not queued behind the outage: a rate count fails at once, Redis still down.
    assert isinstance(sink.counts.within_rate("sess_a", "say", 12).exception(timeout=8), redis.RedisError)
    assert outage.is_alive(), "Redis came back before the sink answered: the check proved nothing"
    assert not any(f.done() for kept in futures.values() for f in kept)

    outage.join(30)
    for session_id, kept in futures.items():
        assert [f.result(timeout=15) for f in kept] == [1, 2, 3, 4, 5]
        assert [(seq, event["event_id"]) for seq, event in _envelopes(private_redis, session_id)] == [
            (n + 1, f"{session_id}-{n}") for n in range(5)
        ]
    assert patient.result(timeout=5) is None
    assert isinstance(impatient.exception(timeout=5), ReplyTimeout)
    admitted = _queued(private_redis, "admission")
    read = _queued(private_redis, "reads")
    assert [m.kwargs.get("request_id") for m in read if m.actor_name == "describe_session"] == ["patient"]
    assert [m.kwargs["code"] for m in admitted if m.actor_name == "record_incident"] == ["malformed_frame"]
    # Redis came back empty: the event enqueued before the outage was lost with it and is re-sent.
    assert _envelopes(private_redis, "sess_early") == [(1, _speech("early"))]


def test_a_session_over_its_bound_gets_one_numbered_events_dropped_where_the_hole_is(
    private_redis: PrivateRedis, sink: EventSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Redis down and a session's outbox full, what comes next is counted, not kept; once
    Redis answers the count is numbered right after the kept events, as one
    `switchboard.events_dropped` event (which the worker records as an incident); the next
    event follows it, and another session loses nothing."""
    monkeypatch.setattr(gateway.sink, "MAXIMUM_UNSENT_EVENTS_PER_SESSION", 3)
    outage = _outage(private_redis, 2.0)
    first = sink.submit_event("sess_a", 1, _speech("a1"), time.time())
    # The sink thread takes work in order: once this is answered, it has failed to send "a1".
    assert sink.counts.within_rate("sess_a", "say", 12).exception(timeout=10) is not None
    rest = [sink.submit_event("sess_a", 1, _speech(f"a{n}"), time.time()) for n in range(2, 6)]
    other = [sink.submit_event("sess_b", 1, _speech(f"b{n}"), time.time()) for n in range(1, 3)]
    outage.join(30)
    assert first.result(timeout=15) == 1  # the sink knows Redis is back
    after = sink.submit_event("sess_a", 1, _speech("a6"), time.time())

    assert [f.result(timeout=5) for f in (*rest[:2], after)] == [2, 3, 5]
    assert all(f.exception(timeout=5) is not None for f in rest[2:])
    assert [f.result(timeout=5) for f in other] == [1, 2]
    logged = _envelopes(private_redis, "sess_a")
    assert [(seq, event.get("event_id")) for seq, event in logged] == [
        (1, "a1"),
        (2, "a2"),
        (3, "a3"),
        (4, None),
        (5, "a6"),
    ]
    assert logged[3][1] == {
        "type": "switchboard.events_dropped",
        "count": 2,
        "types": {"input_audio_buffer.speech_started": 2},
        "reason": "redis_unreachable",
    }
    # The worker records the incident when it applies seq 4; the sink sends nothing else.
    assert [m for m in _queued(private_redis, "admission") if m.actor_name == "record_incident"] == []
    assert [event["event_id"] for _, event in _envelopes(private_redis, "sess_b")] == ["b1", "b2"]


def test_an_event_that_cannot_be_encoded_leaves_a_numbered_hole_not_a_gap(
    private_redis: PrivateRedis, sink: EventSink
) -> None:
    """An event that cannot be serialised takes its seq as an `events_dropped` event (recorded
    as an incident where it is applied); the events around it are enqueued as usual, so no seq is missing."""
    futures = [
        sink.submit_event("sess_x", 1, _speech("x1"), time.time()),
        sink.submit_event("sess_x", 1, {**_speech("x2"), "playback": object()}, time.time()),
        sink.submit_event("sess_x", 1, _speech("x3"), time.time()),
    ]
    assert futures[0].result(timeout=5) == 1
    assert futures[1].exception(timeout=5) is not None
    assert futures[2].result(timeout=5) == 3
    logged = _envelopes(private_redis, "sess_x")
    assert [(seq, event["type"], event.get("reason")) for seq, event in logged] == [
        (1, "input_audio_buffer.speech_started", None),
        (2, "switchboard.events_dropped", "unencodable"),
        (3, "input_audio_buffer.speech_started", None),
    ]
    assert [m for m in _queued(private_redis, "admission") if m.actor_name == "record_incident"] == []
