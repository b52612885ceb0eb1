"""What the event sink keeps, in Redis and in memory, and for how long (real Redis): counters and
the restart marker expire unless renewed, a session leaves the sink's memory once it is done with
here, and a seq is never reused, whether its counter expired or the gateway never numbered for
the session before."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import gateway.restart_marker
import gateway.retention
import gateway.sink
from gateway.sink import EventSink
from pipeline.call.limits import GATEWAY_MARKER_TTL_SECONDS, SEQ_COUNTER_TTL_SECONDS
from switchboard.services import Services
from workers.broker import make_broker


@pytest.fixture
def namespace(services: Services) -> Iterator[str]:
    name = f"sbtest-retention-{uuid.uuid4().hex[:8]}"
    yield name
    client = redis.Redis.from_url(services.redis_url)
    keys = list(client.scan_iter(f"{name}*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def client(services: Services) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(services.redis_url)
    yield connection
    connection.close()


@pytest.fixture
def make_sink(services: Services, namespace: str) -> Iterator[Callable[[str], EventSink]]:
    made: list[EventSink] = []
    broker = make_broker(services.redis_url, namespace=namespace)

    def make(gateway_id: str) -> EventSink:
        sink = EventSink(services.redis_url, broker, gateway_id, namespace)
        made.append(sink)
        return sink

    yield make
    for sink in made:
        sink.close()
    broker.close()


@pytest.fixture
def short_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retransmit window and prune interval short enough for a test to see them pass."""
    monkeypatch.setattr(gateway.retention, "RETRANSMIT_WINDOW_S", 0.5)
    monkeypatch.setattr(gateway.sink, "PRUNE_INTERVAL_S", 0.1)


def _speech(event_id: str) -> dict[str, Any]:
    return {
        "type": "input_audio_buffer.speech_started",
        "event_id": event_id,
        "item_id": "i",
        "audio_start_ms": 1,
    }


def _remembered(sink: EventSink) -> set[str]:
    """Every session the sink keeps anything of, read on its own thread."""

    def sessions() -> set[str]:
        retention = sink._retention
        return (
            set(retention.issued)
            | set(retention.held)
            | set(retention.hosted)
            | set(retention.guests)
            | set(sink._unsent)
        )

    return sink._executor.submit(sessions).result(timeout=5)


def _eventually(predicate: Callable[[], bool], timeout_s: float = 10) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_seq_counters_and_the_restart_marker_expire_unless_renewed(
    make_sink: Callable[[str], EventSink],
    namespace: str,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session's seq counter carries a TTL of a day, renewed by each event numbered; the
    gateway's restart marker carries one of a minute, renewed while the gateway lives."""
    monkeypatch.setattr(gateway.restart_marker, "MARKER_REFRESH_S", 0.2)
    sink = make_sink("gw-ttl")
    counter = f"{namespace}:seq:sess_ttl"
    marker = f"{namespace}:gateway-marker:gw-ttl"
    assert sink.submit_event("sess_ttl", 1, _speech("e1"), time.time()).result(timeout=5) == 1
    assert 0 < client.ttl(counter) <= SEQ_COUNTER_TTL_SECONDS
    client.expire(counter, 100)
    assert sink.submit_event("sess_ttl", 1, _speech("e2"), time.time()).result(timeout=5) == 2
    assert client.ttl(counter) > 100
    assert _eventually(lambda: client.exists(marker) == 1)
    assert 0 < client.ttl(marker) <= GATEWAY_MARKER_TTL_SECONDS
    client.expire(marker, 5)
    assert _eventually(lambda: client.ttl(marker) > 5), "the marker's expiry was never renewed"


def test_a_gateway_restarted_under_its_own_id_takes_its_marker_over_without_a_warning(
    make_sink: Callable[[str], EventSink],
    namespace: str,
    client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The marker outlives its gateway by a minute; the next process of that id finds it at its
    first check. Redis lost nothing: the marker becomes the new process's, with no warning (a
    restarted gateway said 'Redis lost its data' on every start within the minute)."""
    marker = f"{namespace}:gateway-marker:gw-again"
    before = make_sink("gw-again")
    assert _eventually(lambda: client.exists(marker) == 1)
    before.close()
    assert client.exists(marker) == 1
    with caplog.at_level(logging.WARNING, logger="gateway.sink"):
        after = make_sink("gw-again")
        # The sink's one thread took its first check before this event: both are done here.
        assert after.submit_event("sess_again", 1, _speech("e1"), time.time()).result(timeout=5) == 1
    assert client.get(marker) == after._marker.token.encode()
    assert [record.getMessage() for record in caplog.records] == []
    assert after.retransmitted == 0


def test_a_hosted_session_is_remembered_until_forgotten_and_then_not_at_all(
    make_sink: Callable[[str], EventSink], short_windows: None
) -> None:
    """A session whose control batches come here keeps its seq floor past the retransmit window
    (Redis may lose its counter while the call is silent); once forgotten, and its last event
    (the sideband's close, numbered after the forget) is past the window, nothing of it is left."""
    sink = make_sink("gw-host")
    for n in (1, 2):
        assert sink.submit_event("sess_host", 1, _speech(f"e{n}"), time.time()).result(timeout=5) == n
    sink.applied("sess_host", 2)
    time.sleep(1.5)
    assert "sess_host" in _remembered(sink)
    sink.forget("sess_host")
    closed = {"type": "switchboard.sideband_closed", "code": 1000, "reason": "", "by_host": True}
    assert sink.submit_event("sess_host", 1, closed, time.time()).result(timeout=5) == 3
    assert "sess_host" in _remembered(sink)
    assert _eventually(lambda: "sess_host" not in _remembered(sink)), "the sink still holds sess_host"


def test_a_session_this_gateway_never_hosted_is_forgotten_after_the_window(
    make_sink: Callable[[str], EventSink], short_windows: None
) -> None:
    """An API event for a call held by another gateway is never reported applied here: the
    sink lets go of it (held event and seq floor) once the retransmit window has passed."""
    sink = make_sink("gw-guest")
    end = {"type": "switchboard.end_requested", "reason": "app_ended"}
    assert sink.submit_event("sess_guest", 1, end, time.time()).result(timeout=5) == 1
    assert "sess_guest" in _remembered(sink)
    assert _eventually(lambda: "sess_guest" not in _remembered(sink)), "the sink still holds sess_guest"


def test_a_seq_is_never_reused_after_its_counter_expired(
    make_sink: Callable[[str], EventSink],
    namespace: str,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A counter that expired while the gateway still remembers the session is lifted above
    the gateway's last seq (and carries its TTL again); a gateway that never numbered for the
    session numbers above the seq its caller read from the session record."""
    monkeypatch.setattr(gateway.sink, "SEQ_COUNTER_TTL_SECONDS", 1)
    monkeypatch.setattr(gateway.retention, "SEQ_COUNTER_TTL_SECONDS", 1)
    sink = make_sink("gw-floor")
    counter = f"{namespace}:seq:sess_floor"
    for n in (1, 2):
        assert sink.submit_event("sess_floor", 1, _speech(f"e{n}"), time.time()).result(timeout=5) == n
    assert _eventually(lambda: client.exists(counter) == 0), "the counter never expired"
    assert sink.submit_event("sess_floor", 1, _speech("e3"), time.time()).result(timeout=5) == 3
    assert int(client.get(counter) or 0) == 3
    assert client.ttl(counter) > 0
    assert _eventually(lambda: client.exists(counter) == 0), "the counter never expired"
    peer = make_sink("gw-peer")
    end = {"type": "switchboard.end_requested", "reason": "app_ended"}
    assert peer.submit_event("sess_floor", 1, end, time.time(), after_seq=3).result(timeout=5) == 4
