"""One call, or one slow takeover, never holds up the rest of a gateway: its heartbeat, its
dispatcher and its API keep going. In-process gateways on real Redis, with a provider that
accepts connections and never answers."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from gateway.app import Gateway
from gateway.liveness import Heartbeat
from gateway.providers.realtime import SimulatedRealtime
from pipeline.call.limits import GATEWAY_DEAD_AFTER_MS
from pipeline.platform.config import Settings
from pipeline.platform.envelope import CloseCall, Reply
from pipeline.platform.names import gateway_alive_key, gateway_registry_key
from switchboard.services import Services
from workers.broker import make_broker
from workers.emit import ControlPublisher


@contextmanager
def silent_provider() -> Iterator[str]:
    """An HTTP address that accepts connections and never answers (a hung provider)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stopping = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stopping.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


def _gateway(services: Services, provider_url: str) -> Gateway:
    namespace = f"sbtest-iso-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        gateway_id=f"gw-iso-{uuid.uuid4().hex[:6]}", gateway_port=0, broker_namespace=namespace
    )
    broker = make_broker(services.redis_url, namespace=namespace)
    provider = SimulatedRealtime(provider_url, "ws://127.0.0.1:1/v1", "sk", "gpt-realtime")
    return Gateway(settings, services.redis_url, broker, provider)


def test_the_heartbeat_goes_on_while_a_takeover_waits(services: Services) -> None:
    """A dead peer's takeover that no worker answers (this test runs none) waits its full reply
    timeout; the gateway's liveness key never lapses meanwhile. (When the beat waited on the
    takeover, a slow one made a healthy gateway look dead, and a peer took its calls.)"""

    async def scenario() -> list[bool]:
        gateway = _gateway(services, "http://127.0.0.1:1/v1")
        client = redis.Redis.from_url(services.redis_url)
        namespace = gateway.settings.broker_namespace
        client.sadd(gateway_registry_key(namespace), "gw-long-dead")
        await gateway.start()
        seen = []
        try:
            # Over twice the liveness window, while the takeover of gw-long-dead is pending.
            deadline = time.monotonic() + 2.5 * GATEWAY_DEAD_AFTER_MS / 1000
            while time.monotonic() < deadline:
                seen.append(bool(client.exists(gateway_alive_key(namespace, gateway.gateway_id))))
                await asyncio.sleep(0.25)
            assert any(task.get_name() == "takeover-gw-long-dead" for task in gateway._tasks)
        finally:
            await gateway.stop()
            client.delete(gateway_registry_key(namespace))
            client.close()
        return seen

    seen = asyncio.run(scenario())
    assert len(seen) > 10 and all(seen), seen


def test_a_hung_provider_holds_up_neither_other_calls_controls_nor_the_api(services: Services) -> None:
    """Twenty calls closing at once against a provider that never answers their hangups: a
    reply for another request queued behind them is carried out while the hangups still
    hang, and the API answers."""

    async def scenario() -> None:
        with silent_provider() as provider_url:
            gateway = _gateway(services, provider_url)
            await gateway.start()
            try:
                publisher = ControlPublisher(services.redis_url, gateway.settings.broker_namespace)
                gateway_id = gateway.gateway_id
                answer = gateway.rpc.expect("req_behind")

                def publish_all() -> None:
                    for n in range(20):
                        close = CloseCall(
                            id=f"close_{n}", call_id=f"rtc_{n}", reason="app_ended", hangup=True
                        )
                        publisher.publish(gateway_id, f"sess_{n}", 1, [close])
                    reply = Reply(id="reply_behind", request_id="req_behind", status=200, body={"ok": True})
                    publisher.publish(gateway_id, "sess_other", 1, [reply])

                await asyncio.to_thread(publish_all)
                publisher.close()
                assert await asyncio.wait_for(answer, 30) == (200, {"ok": True})
                closing = [task for task in gateway._tasks if task.get_name().startswith("close-sess_")]
                assert len(closing) == 20 and not any(task.done() for task in closing)
                url = f"http://127.0.0.1:{gateway.http_port}/healthz"
                body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=30).read())
                assert b'"ok"' in body
                assert not any(task.done() for task in closing)
            finally:
                await gateway.stop()

    asyncio.run(scenario())


def test_peers_are_judged_only_after_a_liveness_window_of_steady_beats(services: Services) -> None:
    """A gateway whose beats failed (Redis was away, and every peer's key lapsed meanwhile)
    claims no peer as dead until it has beaten steadily for a liveness window: a healthy peer
    has beaten again by then (3 of 3 runs took a healthy peer's calls the moment Redis came
    back when it judged at once)."""
    namespace = f"sbtest-steady-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(services.redis_url)
    client.sadd(gateway_registry_key(namespace), "gw-peer")
    claimed: list[str] = []
    heartbeat = Heartbeat(services.redis_url, namespace, "gw-self", claimed.append)
    window = GATEWAY_DEAD_AFTER_MS / 1000
    try:
        assert heartbeat.tick(100.0) == []
        assert heartbeat.tick(100.0 + window / 2) == []
        real_beat = heartbeat.beat

        def failing_beat() -> None:
            raise redis.ConnectionError("Redis is away")

        heartbeat.beat = failing_beat  # type: ignore[method-assign]
        with pytest.raises(redis.ConnectionError):
            heartbeat.tick(100.0 + window)
        heartbeat.beat = real_beat  # type: ignore[method-assign]
        assert heartbeat.tick(100.0 + window + 0.1) == []
        assert heartbeat.tick(100.0 + 2 * window) == []
        assert heartbeat.tick(100.0 + 2 * window + 0.2) == ["gw-peer"]
    finally:
        client.delete(*client.keys(f"{namespace}:*"))
        client.close()
