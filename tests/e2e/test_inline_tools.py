"""Tools declared to run inline: the body runs on the worker that decided the call, right after
its commit, with a backup message on tool_runs that answers the call only if that worker died."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import psycopg2
import pytest
import redis

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script, simulator_call

TOOL_MODULES = "workers.tools.reference,tests.tools.inline_tools"


def _script(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "inline-tool",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 12,
            "speech_ms": 200,
            "response_wait_ms": 20000,
        },
        "caller": [{"say": "Say it back.", "after_ms": 150}, {"hangup": True, "after_ms": 200}],
        "model": [{"function_call": {"name": name, "arguments": arguments}}, {"say": "Done."}],
    }


@pytest.fixture
def inline_stack(services: Services, namespace: str) -> Iterator[Stack]:
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-inline",
        extra_env={"SWITCHBOARD_TOOL_MODULES": TOOL_MODULES},
    ) as running:
        running.start(workers=1)
        yield running


def _waiting_backups(stack: Stack) -> list[dict[str, Any]]:
    """The run_tool messages waiting in tool_runs' delay queue (stored, or fetched and held
    by a worker until their eta: both are in the queue's hash until acknowledged)."""
    client = redis.Redis.from_url(stack.env["SWITCHBOARD_REDIS_URL"])
    try:
        bodies = client.hvals(f"{stack.namespace}:tool_runs.DQ.msgs")
    finally:
        client.close()
    return [json.loads(body)["kwargs"] for body in bodies]


def _step_status(stack: Stack, session_id: str) -> str:
    """The session's one tool step's status, read from PostgreSQL (no worker is needed)."""
    connection = psycopg2.connect(stack.env["SWITCHBOARD_DATABASE_URL"])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT status FROM tool_steps WHERE session_id = %s", (session_id,))
            [(status,)] = cursor.fetchall()
            return str(status)
    finally:
        connection.close()


def test_an_inline_tool_is_answered_before_its_backup_is_due_and_the_backup_does_nothing(
    inline_stack: Stack,
) -> None:
    """echo runs inline: its step has its outcome while its backup still waits on tool_runs'
    delay queue; when the backup comes due it finds the step finished, and the call has one
    output and one continuation."""
    client = Client(inline_stack.api_url, inline_stack.api_token)
    set_script(inline_stack, _script("echo", {"text": "order 4417"}))
    session = client.create_session("Answer briefly.", tools=["echo"])
    call_id = client.connect(session["id"])["call_id"]

    def answered() -> bool:
        steps = client.session(session["id"])["tool_steps"]
        return bool(steps) and steps[0]["status"] == "succeeded"

    assert wait_until(answered, 30)
    backups = _waiting_backups(inline_stack)
    assert [(b["session_id"], b["name"]) for b in backups] == [(session["id"], "echo")]
    client.wait_for_status(session["id"], timeout_s=60)
    assert wait_until(lambda: _waiting_backups(inline_stack) == [], 30)
    time.sleep(1.0)  # the backup, run, has done nothing
    record = client.session(session["id"], events=True)
    controls = [entry["control"] for entry in simulator_call(inline_stack, call_id)["controls"]]
    outputs = [c for c in controls if c["type"] == "conversation.item.create"]
    assert len(outputs) == 1 and json.loads(outputs[0]["item"]["output"])["status"] == "succeeded"
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("echo", "succeeded")]
    assert [e["kind"] for e in record["log"]].count("switchboard.tool_finished") == 1


def test_a_worker_killed_mid_inline_body_has_the_call_answered_once_by_the_backup(
    inline_stack: Stack,
) -> None:
    """kill -9 of the worker while an inline body runs: the backup message runs the body on the
    worker that replaces it, and the call gets exactly one output and completes."""
    client = Client(inline_stack.api_url, inline_stack.api_token)
    set_script(inline_stack, _script("pause_inline", {"ms": 800}))
    session = client.create_session("Answer briefly.", tools=["pause_inline"])
    call_id = client.connect(session["id"])["call_id"]

    def running() -> bool:
        steps = client.session(session["id"])["tool_steps"]
        return bool(steps) and steps[0]["status"] == "running"

    assert wait_until(running, 30, interval_s=0.02)
    time.sleep(0.2)
    inline_stack.workers[0].kill()
    # The fault really happened: the body had not finished when its worker died.
    assert _step_status(inline_stack, session["id"]) == "running"
    inline_stack.add_worker()
    record = client.wait_for_status(session["id"], timeout_s=90)
    controls = [entry["control"] for entry in simulator_call(inline_stack, call_id)["controls"]]
    outputs = [c for c in controls if c["type"] == "conversation.item.create"]
    assert len(outputs) == 1
    assert json.loads(outputs[0]["item"]["output"])["status"] == "succeeded"
    assert len({c["event_id"] for c in controls}) == len(controls)
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("pause_inline", "succeeded")]
    assert record["status"] == "ended"
