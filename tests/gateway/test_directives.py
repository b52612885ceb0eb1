"""Carrying out the workers' batches (`gateway.directives`), against a real provider socket and
real Redis: controls of a superseded generation are dropped, a batch of a newer release is
carried out but for what this one does not know, nothing of a call is kept once it ends, and a
transfer is referred once."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.providers.realtime import SimulatedRealtime
from pipeline.platform.config import Settings
from pipeline.platform.envelope import CloseCall, OpenSideband, SendControl, ToGateway, TransferCall
from simulator.server import Simulator
from switchboard.services import Services
from tests.gateway.support import open_socket, running_provider, until
from tests.simulator.support import quick, running
from workers.broker import make_broker


def test_controls_for_another_generation_are_dropped(services: Services) -> None:
    """A batch stamped with a superseded generation never reaches the current socket."""
    asyncio.run(_stale_generation(services))


async def _stale_generation(services: Services) -> None:
    async with running_provider() as provider:
        settings = Settings(gateway_id="gw-generation-test", gateway_port=0)
        broker = make_broker(services.redis_url, namespace="sbtest-generation")
        gateway = Gateway(
            settings,
            services.redis_url,
            broker,
            SimulatedRealtime(provider.url, provider.url, "sk", "m"),
        )
        host_events: list[dict[str, Any]] = []
        socket = await open_socket(provider, host_events)
        socket.generation = 2
        gateway.sockets["sess_x"] = socket
        stale = ToGateway(
            session_id="sess_x",
            generation=1,
            items=(SendControl(id="ctl_9_0", control={"type": "response.cancel"}),),
        )
        current = ToGateway(
            session_id="sess_x",
            generation=2,
            items=(SendControl(id="ctl_10_0", control={"type": "response.cancel"}),),
        )
        gateway.directives.carry_out(stale)
        gateway.directives.carry_out(current)
        await socket.close()
        await asyncio.sleep(0.05)
        assert provider.received == [{"type": "response.cancel"}]
        gateway.sink.close()


def test_a_batch_of_a_newer_release_is_carried_out_but_for_what_this_one_does_not_know(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    """During a rolling deploy a worker of the next release publishes a batch with a field and
    a directive kind this gateway does not know: the controls it knows reach the provider in
    order, the rest is ignored and named once in the log. (Every field was refused: the whole
    batch was dropped, its controls and replies with it.)"""
    caplog.set_level(logging.WARNING, logger="gateway.directives")
    asyncio.run(_newer_release(services))
    warnings = [record.getMessage() for record in caplog.records if "another release" in record.getMessage()]
    assert warnings == [
        "control batch of another release: ignored what this release does not know "
        "(items of kind teleport, items.priority, shiny)"
    ]


async def _newer_release(services: Services) -> None:
    async with running_provider() as provider:
        settings = Settings(gateway_id="gw-release-test", gateway_port=0)
        broker = make_broker(services.redis_url, namespace="sbtest-release")
        gateway = Gateway(
            settings, services.redis_url, broker, SimulatedRealtime(provider.url, provider.url, "sk", "m")
        )
        host_events: list[Any] = []
        socket = await open_socket(provider, host_events)
        gateway.sockets["sess_x"] = socket
        newer = {
            "session_id": "sess_x",
            "generation": 1,
            "shiny": {"anything": True},
            "items": [
                {"kind": "control", "id": "ctl_1_0", "control": {"type": "response.create"}, "priority": 1},
                {"kind": "teleport", "id": "tp_1", "where": "elsewhere"},
                {"kind": "control", "id": "ctl_2_0", "control": {"type": "response.cancel"}},
            ],
        }
        for _ in range(2):  # the same names twice: logged once
            gateway.directives.carry_out_taken([json.dumps(newer).encode()])
        await socket.close()
        await asyncio.sleep(0.05)
        assert provider.received == [{"type": "response.create"}, {"type": "response.cancel"}]
        gateway.sink.close()


def _holding(gateway: Gateway, session_ids: set[str]) -> dict[str, list[str]]:
    """Which of the gateway's (and its parts': the directives, the watch hub, the watched
    sessions) own collections still name one of these sessions: a dict or set keyed by session
    id, or by a tuple that starts with one. The hub's recent ends are left out: a late listener
    hears the end from them, and they are bounded by a count (REMEMBERED_ENDS), not by the
    calls alive."""
    found: dict[str, list[str]] = {}
    owners = (
        ("gateway", vars(gateway)),
        ("directives", vars(gateway.directives)),
        ("watchers", vars(gateway.watchers)),
        ("watched", vars(gateway.watched)),
    )
    for owner, attributes in owners:
        for name, value in attributes.items():
            if not isinstance(value, dict | set) or (owner, name) == ("watchers", "_ended"):
                continue
            keys = [key[0] if isinstance(key, tuple) and key else key for key in value]
            named = sorted(str(key) for key in keys if key in session_ids)
            if named:
                found[f"{owner}.{name}"] = named
    return found


def test_a_gateway_keeps_nothing_of_its_calls_once_they_end(services: Services, namespace: str) -> None:
    """Twenty phone calls on two routes: while their sidebands are held, the live-call gauge
    counts them by route; once they end — ten closed by the workers' CloseCall (a hang-up, a
    failure, an admission that timed out), ten dropped by the provider (the call moved to a
    peer, or the provider ended it) — nothing of them is left in the gateway, with /metrics
    never scraped. (The route was kept per session from the answer until a scrape: 20 ended
    calls left 20 entries, and with metrics off or nobody scraping they stayed for good.)"""
    asyncio.run(_calls_that_end(services, namespace))


async def _calls_that_end(services: Services, namespace: str) -> None:
    async with running_provider() as provider:
        settings = Settings(
            gateway_id="gw-routes-test", gateway_port=0, broker_namespace=f"{namespace}-routes"
        )
        broker = make_broker(services.redis_url, namespace=settings.broker_namespace)
        base = provider.url.removesuffix("/v1")
        gateway = Gateway(
            settings, services.redis_url, broker, SimulatedRealtime(base, provider.url, "sk", "m")
        )
        sessions = [f"sess_route_{n}" for n in range(20)]
        try:
            for n, session_id in enumerate(sessions):
                route = "route_a" if n % 2 else "route_b"
                opened = OpenSideband(id=f"open_{n}", call_id=f"rtc_{n}", route_id=route)
                gateway.directives.carry_out(ToGateway(session_id=session_id, generation=1, items=(opened,)))
            await until(lambda: len(provider.open) == 20)
            assert gateway.held.by_route() == {"route_a": 10, "route_b": 10}
            for n, session_id in enumerate(sessions[:10]):
                closing = CloseCall(id=f"close_{n}", call_id=f"rtc_{n}", reason="ended_by_api", hangup=False)
                gateway.directives.carry_out(ToGateway(session_id=session_id, generation=1, items=(closing,)))
            for n in range(10, 20):
                await provider.open[f"rtc_{n}"].close()
            await until(lambda: not gateway.sockets and not provider.open and not gateway._tasks)
            # Looked at before the gauge is read again: reading it must not be what cleans up.
            assert _holding(gateway, set(sessions)) == {}
            assert gateway.held.by_route() == {}
        finally:
            gateway.sink.close()
            await gateway.provider.close()


def test_a_transfer_is_referred_once_however_often_its_batch_arrives(services: Services) -> None:
    """A transfer directive published twice (a worker died after publishing) asks the provider
    to refer the call once; its outcome is numbered into the session's log as a host input."""
    asyncio.run(_refer_once(services))


async def _refer_once(services: Services) -> None:
    async with running(Simulator(quick("three_turn"))) as simulator:
        call_id = simulator.create_call()
        settings = Settings(gateway_id=f"gw-refer-{uuid.uuid4().hex[:6]}", gateway_port=0)
        broker = make_broker(services.redis_url, namespace=f"sbtest-refer-{uuid.uuid4().hex[:6]}")
        gateway = Gateway(
            settings,
            services.redis_url,
            broker,
            SimulatedRealtime(simulator.http_url, simulator.ws_url, "sk", "m"),
        )
        submitted: list[dict[str, Any]] = []
        numbered = gateway.sink.submit_event

        def spy(session_id: str, generation: int, event: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            submitted.append(event)
            numbered(session_id, generation, event, *args, **kwargs)

        gateway.sink.submit_event = spy  # type: ignore[method-assign]
        batch = ToGateway(
            session_id=f"sess_refer_{uuid.uuid4().hex[:6]}",
            generation=1,
            items=(TransferCall(id="ctl_7_d0", call_id=call_id, to="tel:+14155550123"),),
        )
        gateway.directives.carry_out(batch)
        gateway.directives.carry_out(batch)
        for _ in range(300):
            if submitted:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        assert submitted == [{"type": "switchboard.transfer_finished", "to": "tel:+14155550123", "ok": True}]
        assert simulator.calls[call_id].referred_to == "tel:+14155550123"
        gateway.sink.close()
