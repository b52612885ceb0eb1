"""The metrics, scraped as Prometheus would: the gateway's on its API port, the workers' summed
over the machine's worker processes; the names are there and the values move with a call."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(
        value
        for (found, found_labels), value in samples.items()
        if found == name and wanted <= set(found_labels)
    )


def _scrape_worker(stack: Stack) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    port = stack.workers[0].ready["metrics"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return _samples(response.read().decode())


def _scrape_gateway(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = client.request("GET", "/metrics")
    assert status == 200
    return _samples(body if isinstance(body, str) else body.decode())


def test_the_metrics_move_with_a_call(stack: Stack, client: Client) -> None:
    set_script(stack, SCRIPTS / "spoken_call.json")
    before = _scrape_worker(stack)
    gateway_before = _scrape_gateway(client)

    session = client.create_session("You are the order desk.")
    client.connect(session["id"])
    client.wait_for_status(session["id"], timeout_s=60)
    status, _ = client.request("POST", f"/v1/sessions/{session['id']}/hold")
    assert status == 409  # the call is over: a command refused is counted too

    after = _scrape_worker(stack)
    for name in (
        "switchboard_event_to_control_seconds_count",
        "switchboard_turn_latency_seconds_count",
    ):
        assert _total(after, name) >= _total(before, name) + 3, name
    assert _total(after, "switchboard_events_total", disposition="applied") > _total(
        before, "switchboard_events_total", disposition="applied"
    )
    assert _total(after, "switchboard_tokens_total", kind="output") > _total(
        before, "switchboard_tokens_total", kind="output"
    )
    assert _total(after, "dramatiq_messages_total", actor_name="transcript_event") > _total(
        before, "dramatiq_messages_total", actor_name="transcript_event"
    )
    gateway_after = _scrape_gateway(client)
    assert _total(gateway_after, "switchboard_commands_total", command="hold", status="409") == (
        _total(gateway_before, "switchboard_commands_total", command="hold", status="409") + 1
    )
    for name in (
        "switchboard_live_calls",
        "switchboard_queue_depth",
        "switchboard_queue_lag_seconds",
        "switchboard_dead_letters",
    ):
        assert any(found == name for found, _ in gateway_after), name
