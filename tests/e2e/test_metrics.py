"""The metrics, scraped as Prometheus would: the gateway's on its API port, the workers' summed
over the machine's worker processes; the names are there and the values move with a call; they
pass promtool; workers given one port share it, and a killed worker's series go."""

from __future__ import annotations

import shutil
import socket
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from switchboard.client import Client
from switchboard.stack import Process, Stack
from tests.e2e.conftest import SCRIPTS, set_script
from tests.support.exposition import parsed_problems, promtool_problems
from tests.support.waiting import wait_for


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


def _worker_text(port: int | str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _scrape_worker(stack: Stack) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return _samples(_worker_text(stack.workers[0].ready["metrics"]))


def _gateway_text(client: Client) -> str:
    status, body = client.request("GET", "/metrics")
    assert status == 200
    return body if isinstance(body, str) else body.decode()


def _scrape_gateway(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return _samples(_gateway_text(client))


def _pids(text: str) -> set[int]:
    """The worker processes whose CPU the exposition shows."""
    return {
        int(sample.labels["pid"])
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "process_cpu_seconds_total"
    }


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


def test_the_metrics_pass_promtool(stack: Stack, client: Client) -> None:
    """The gateway's and a worker's /metrics are clean by promtool's rules, checked on
    prometheus-client's parse and, where it is installed, by `promtool check metrics` itself."""
    client.create_session("You are the order desk.")  # a message taken: the duration histogram
    port = stack.workers[0].ready["metrics"]

    def measured() -> str | None:
        text = _worker_text(port)
        return text if "dramatiq_message_duration_seconds_bucket" in text else None

    worker = wait_for(measured, "a worker's first message measured")
    gateway = _gateway_text(client)
    for where, text in (("worker", worker), ("gateway", gateway)):
        assert "process_resident_memory_bytes" in text, where
        assert "process_cpu_seconds_total" in text, where
        assert parsed_problems(text) == [], where
        if shutil.which("promtool"):
            assert promtool_problems(text) == [], where
    assert "milliseconds" not in worker
    assert _pids(worker) == {stack.workers[0].popen.pid}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serves(port: int) -> str | None:
    try:
        return _worker_text(port)
    except (urllib.error.URLError, ConnectionError):
        return None


def test_workers_given_one_port_share_it(stack: Stack) -> None:
    """A second worker given the machine's busy metrics port runs on, its metrics served by the
    first; when the first is killed, the second takes the port over and the dead one's series
    and files go."""
    port = _free_port()
    env = {"SWITCHBOARD_WORKER_METRICS_PORT": str(port)}
    added: list[Process] = []
    try:
        added.append(first := stack.add_worker(env=env))
        added.append(second := stack.add_worker(env=env))
        assert first.ready["metrics"] == str(port)
        assert second.ready["metrics"] == "elsewhere"
        assert second.popen.poll() is None
        assert any(f"metrics port 127.0.0.1:{port} is taken" in line for line in second.lines)
        both = _pids(_worker_text(port))
        assert {first.popen.pid, second.popen.pid, stack.workers[0].popen.pid} <= both

        directory = Path(stack.env["SWITCHBOARD_METRICS_DIR"])
        assert (directory / "members" / f"{first.popen.pid}.lock").exists()
        first.kill()
        text = wait_for(lambda: _serves(port), "the second worker serving the port", timeout_s=30)
        assert any(f"metrics now served on 127.0.0.1:{port}" in line for line in second.lines)
        assert first.popen.pid not in _pids(text)
        assert second.popen.pid in _pids(text)
        assert not (directory / "members" / f"{first.popen.pid}.lock").exists()
        assert not list(directory.glob(f"gauge_live*_{first.popen.pid}.db"))
    finally:
        for process in added:
            process.stop()
            stack.workers.remove(process)
