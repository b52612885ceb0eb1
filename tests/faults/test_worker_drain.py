"""A worker sent SIGTERM while it holds a message — a tool body that runs 2 s — is a worker of a
rolling deploy: its readiness probe answers 503 `draining` at once, it finishes the tool it runs
(the tool is neither cancelled nor run again), and it exits 0 once it is done."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from typing import Any

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script, simulator_call

TOOL_MS = 2_000


def _probe(port: str, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_worker_stopped_mid_tool_drains_finishes_it_and_exits(services: Services, namespace: str) -> None:
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-drain",
        extra_env={"SWITCHBOARD_WORKER_HEALTH_PORT": "0"},
    ) as stack:
        stack.start(workers=1)
        [worker] = stack.workers
        port = worker.ready["health"]
        assert _probe(port, "/healthz") == (200, {"status": "ok"})
        assert _probe(port, "/readyz") == (200, {"status": "ready"})
        assert _probe(port, "/nothing")[0] == 404

        set_script(
            stack,
            {
                "name": "drain",
                "timing": {"delta_interval_ms": 10, "chars_per_delta": 12, "speech_ms": 200},
                "caller": [{"say": "Hold on a moment.", "after_ms": 150}, {"hangup": True, "after_ms": 200}],
                "model": [
                    {"function_call": {"name": "wait", "arguments": {"ms": TOOL_MS}}},
                    {"say": "Done."},
                ],
            },
        )
        client = Client(stack.api_url, stack.api_token)
        session = client.create_session("Wait when asked.", tools=["wait"])
        call_id = client.connect(session["id"])["call_id"]

        def tool_running() -> bool:
            steps = client.session(session["id"])["tool_steps"]
            return bool(steps) and steps[0]["status"] == "running"

        assert wait_until(tool_running, 30, interval_s=0.02)
        stopped_at = time.monotonic()
        worker.popen.send_signal(signal.SIGTERM)
        assert wait_until(
            lambda: _probe(port, "/readyz") == (503, {"status": "draining"}), 2, interval_s=0.02
        )
        # The tool's answer and the rest of the call need a worker: its successor starts now, as in
        # a rolling deploy (it may take the call's next messages; the held one stays with the first).
        stack.add_worker()
        assert worker.popen.wait(30) == 0
        exited_s = time.monotonic() - stopped_at
        record = client.wait_for_status(session["id"], timeout_s=60)
        log = simulator_call(stack, call_id)

    assert record["status"] == "ended", record
    [step] = record["tool_steps"]
    assert (step["tool"], step["status"]) == ("wait", "succeeded")
    controls = [entry["control"] for entry in log["controls"]]
    outputs = [json.loads(c["item"]["output"]) for c in controls if c["type"] == "conversation.item.create"]
    # Run once, to its end: not cancelled by the stop, not run again by the successor.
    assert [output["result"] for output in outputs] == [{"waited_ms": TOOL_MS}]
    assert len({c["event_id"] for c in controls}) == len(controls)
    # It exited only once the tool was done (it had been running for a moment when stopped).
    assert exited_s >= TOOL_MS / 1000 / 2, exited_s
    assert any("worker draining" in line for line in worker.lines)
