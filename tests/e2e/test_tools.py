"""Function calls end to end: the model calls a registered tool, it runs on tool_runs, and its
output goes back before the response that speaks it."""

from __future__ import annotations

import json
import time
from typing import Any

from simulator.oracle import wire_errors
from switchboard.client import Client
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script, simulator_call


def _script(calls: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    return {
        "name": "tool-call",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 12,
            "speech_ms": 200,
            "response_wait_ms": 20000,
        },
        "caller": [{"say": "Where is my order 4417?", "after_ms": 150}, {"hangup": True, "after_ms": 200}],
        "model": [{"function_call": call} for call in calls] + [{"say": answer}],
    }


def _call(client: Client, stack: Stack, tools: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    session = client.create_session("You are the order desk.", tools=tools)
    call_id = client.connect(session["id"])["call_id"]
    client.wait_for_status(session["id"], timeout_s=60)
    record = client.session(session["id"], events=True)
    log = simulator_call(stack, call_id)
    assert log["errors"] == []
    controls = [entry["control"] for entry in log["controls"]]
    for control in controls:
        assert wire_errors(control, direction="client") == [], control
    return record, controls


def test_one_tool_call_is_run_answered_and_continued(stack: Stack, client: Client) -> None:
    """lookup_order runs once; its output, then response.create, follow the function call, and
    the durable step succeeded."""
    set_script(
        stack, _script([{"name": "lookup_order", "arguments": {"order_id": "4417"}}], "It ships Friday.")
    )
    record, controls = _call(client, stack, ["lookup_order"])

    assert [c["type"] for c in controls] == [
        "session.update",
        "response.create",
        "conversation.item.create",
        "response.create",
    ]
    assert [tool["name"] for tool in controls[0]["session"]["tools"]] == ["lookup_order"]
    output = json.loads(controls[2]["item"]["output"])
    assert (output["status"], output["result"]["found"], output["result"]["order_id"]) == (
        "succeeded",
        True,
        "4417",
    )
    assert controls[3]["response"] == controls[1]["response"]
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("lookup_order", "succeeded")]
    assert record["status"] == "ended"
    assert [item["text"] for item in record["transcript"] if item["role"] == "assistant"] == [
        "It ships Friday."
    ]


def test_a_chain_of_three_calls_each_answered_once(stack: Stack, client: Client) -> None:
    """Three calls in a row each get exactly one output, then the spoken answer."""
    calls = [
        {"name": "lookup_order", "arguments": {"order_id": "4417"}},
        {"name": "echo", "arguments": {"text": "checking"}},
        {"name": "lookup_order", "arguments": {"order_id": "9999"}},
    ]
    set_script(stack, _script(calls, "Here is what I found."))
    record, controls = _call(client, stack, ["lookup_order", "echo"])

    outputs = [c for c in controls if c["type"] == "conversation.item.create"]
    assert len(outputs) == 3
    assert len({o["item"]["call_id"] for o in outputs}) == 3
    assert [c["type"] for c in controls].count("response.create") == 4
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [
        ("lookup_order", "succeeded"),
        ("echo", "succeeded"),
        ("lookup_order", "succeeded"),
    ]
    assert json.loads(outputs[2]["item"]["output"])["result"]["found"] is False


def test_a_call_to_a_tool_the_session_lacks_is_answered_unavailable(stack: Stack, client: Client) -> None:
    """A function the session was not created with is answered as unavailable, and the model
    is asked to go on without it."""
    set_script(stack, _script([{"name": "lookup_order", "arguments": {"order_id": "4417"}}], "Sorry."))
    record, controls = _call(client, stack, [])
    assert [c["type"] for c in controls] == [
        "session.update",
        "response.create",
        "conversation.item.create",
        "response.create",
    ]
    assert json.loads(controls[2]["item"]["output"])["error"]["code"] == "tool_unavailable"
    assert [item["text"] for item in record["transcript"] if item["role"] == "assistant"] == ["Sorry."]
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("lookup_order", "unavailable")]


def test_invalid_arguments_and_a_large_result_are_answered_not_crashed(stack: Stack, client: Client) -> None:
    """Arguments failing the schema become a failed step answered to the model; a 1 MB result
    succeeds in PostgreSQL and reaches the provider bounded to 16,000 bytes."""
    calls = [
        {"name": "lookup_order", "arguments": {"order_id": 4417}},
        {"name": "generate", "arguments": {"bytes": 1_000_000}},
    ]
    set_script(stack, _script(calls, "Done."))
    record, controls = _call(client, stack, ["lookup_order", "generate"])

    invalid, large = (
        json.loads(c["item"]["output"]) for c in controls if c["type"] == "conversation.item.create"
    )
    assert (invalid["status"], invalid["error"]["code"]) == ("failed", "invalid_arguments")
    assert large["status"] == "succeeded" and large["result"]["truncated"] is True
    outputs = [c["item"]["output"] for c in controls if c["type"] == "conversation.item.create"]
    assert all(len(output.encode()) <= 16_000 for output in outputs)
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [
        ("lookup_order", "failed"),
        ("generate", "succeeded"),
    ]
    assert record["status"] == "ended"


def test_a_tool_that_runs_too_long_is_answered_timed_out(services: Any, namespace: str) -> None:
    """A body past the tool time limit is cancelled, its step timed_out, its call answered,
    and the turn goes on."""
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-timeout",
        extra_env={"SWITCHBOARD_TOOL_TIMEOUT_MS": "300"},
    ) as slow_stack:
        slow_stack.start(workers=1)
        set_script(slow_stack, _script([{"name": "wait", "arguments": {"ms": 5000}}], "That took too long."))
        slow_client = Client(slow_stack.api_url, slow_stack.api_token)
        record, controls = _call(slow_client, slow_stack, ["wait"])

    (output,) = (json.loads(c["item"]["output"]) for c in controls if c["type"] == "conversation.item.create")
    assert (output["status"], output["error"]["code"]) == ("timed_out", "tool_timeout")
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("wait", "timed_out")]
    assert [c["type"] for c in controls][-1] == "response.create"


def test_a_worker_killed_mid_tool_loses_nothing_and_answers_the_call_once(
    services: Any, namespace: str
) -> None:
    """kill -9 of the worker while a tool body runs: the run comes back to a new worker, the
    call is answered exactly once, and the turn completes."""
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-toolkill") as kill_stack:
        kill_stack.start(workers=1)
        set_script(kill_stack, _script([{"name": "wait", "arguments": {"ms": 2000}}], "All done."))
        kill_client = Client(kill_stack.api_url, kill_stack.api_token)
        session = kill_client.create_session("Answer briefly.", tools=["wait"])
        call_id = kill_client.connect(session["id"])["call_id"]

        def tool_running() -> bool:
            steps = kill_client.session(session["id"])["tool_steps"]
            return bool(steps) and steps[0]["status"] == "running"

        assert wait_until(tool_running, 30, interval_s=0.05)
        time.sleep(0.3)
        kill_stack.workers[0].kill()
        kill_stack.add_worker()
        record = kill_client.wait_for_status(session["id"], timeout_s=90)
        log = simulator_call(kill_stack, call_id)

    controls = [entry["control"] for entry in log["controls"]]
    outputs = [c for c in controls if c["type"] == "conversation.item.create"]
    assert len(outputs) == 1
    assert json.loads(outputs[0]["item"]["output"])["status"] == "succeeded"
    assert len({c["event_id"] for c in controls}) == len(controls)
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("wait", "succeeded")]
    assert record["status"] == "ended"
    assert [item["text"] for item in record["transcript"] if item["role"] == "assistant"] == ["All done."]


def test_the_ninth_call_of_a_turn_is_refused_and_the_model_reports(stack: Stack, client: Client) -> None:
    """Eight calls run; the ninth is refused as a recorded step, and one tool-free response
    (tool_choice none) follows so the model reports what it has."""
    calls = [{"name": "echo", "arguments": {"text": f"step {index}"}} for index in range(9)]
    set_script(stack, _script(calls, "Here is everything so far."))
    record, controls = _call(client, stack, ["echo"])

    outputs = [json.loads(c["item"]["output"]) for c in controls if c["type"] == "conversation.item.create"]
    assert [o["status"] for o in outputs] == ["succeeded"] * 8 + ["refused"]
    assert outputs[-1]["error"]["code"] == "tool_call_limit_reached"
    creates = [c["response"] for c in controls if c["type"] == "response.create"]
    assert len(creates) == 10
    assert creates[-1]["tool_choice"] == "none"
    assert [s["status"] for s in record["tool_steps"]] == ["succeeded"] * 8 + ["refused"]
    assert [item["text"] for item in record["transcript"] if item["role"] == "assistant"] == [
        "Here is everything so far."
    ]


def test_a_parallel_call_is_refused_and_answered_while_the_first_runs(stack: Stack, client: Client) -> None:
    """Two function calls in one response: the first runs, the second is answered at once with
    parallel_tool_calls_not_supported; each gets exactly one output."""
    parallel = {
        "function_calls": [
            {"name": "lookup_order", "arguments": {"order_id": "4417"}},
            {"name": "lookup_order", "arguments": {"order_id": "4418"}},
        ]
    }
    script = _script([], "One at a time, then.")
    script["model"] = [parallel, *script["model"]]
    set_script(stack, script)
    record, controls = _call(client, stack, ["lookup_order"])

    outputs = [json.loads(c["item"]["output"]) for c in controls if c["type"] == "conversation.item.create"]
    assert sorted(o["status"] for o in outputs) == ["refused", "succeeded"]
    (refused,) = [o for o in outputs if o["status"] == "refused"]
    assert refused["error"]["code"] == "parallel_tool_calls_not_supported"
    assert len({o["call_id"] for o in outputs}) == 2
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("lookup_order", "succeeded")]
    assert [item["text"] for item in record["transcript"] if item["role"] == "assistant"] == [
        "One at a time, then."
    ]


def test_the_caller_speaking_during_a_tool_cancels_it_and_is_answered_after_its_output(
    stack: Stack, client: Client
) -> None:
    """New input while a tool runs: the tool is cancelled, its call still gets one (cancelled)
    output, and then the caller's new input is answered."""
    script = {
        "name": "speaks-during-tool",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 12,
            "speech_ms": 150,
            "response_wait_ms": 20000,
        },
        "caller": [
            {"say": "Check order 4417, please.", "after_ms": 150},
            {"say": "Actually, never mind that.", "after_ms": 100, "during_tool": True},
            {"hangup": True, "after_ms": 200},
        ],
        "model": [{"function_call": {"name": "wait", "arguments": {"ms": 10000}}}, {"say": "No problem."}],
    }
    set_script(stack, script)
    record, controls = _call(client, stack, ["wait"])

    assert [c["type"] for c in controls] == [
        "session.update",
        "response.create",
        "conversation.item.create",
        "response.create",
    ]
    output = json.loads(controls[2]["item"]["output"])
    assert (output["status"], output["error"]["code"]) == ("cancelled", "cancelled")
    assert [(s["tool"], s["status"]) for s in record["tool_steps"]] == [("wait", "cancelled")]
    assert [item["text"] for item in record["transcript"] if item["role"] == "assistant"] == ["No problem."]


def test_parallel_calls_on_a_model_that_makes_them_each_run_and_one_response_follows(
    stack: Stack, client: Client
) -> None:
    """A session on gpt-realtime-2.1 with tools_in_parallel: the model's three calls in one
    response each run (a durable step each), each gets exactly one output, and one
    response.create follows the three outputs."""
    parallel = {
        "function_calls": [
            {"name": "lookup_order", "arguments": {"order_id": "4417"}},
            {"name": "lookup_order", "arguments": {"order_id": "4418"}},
            {"name": "echo", "arguments": {"text": "checking"}},
        ]
    }
    script = _script([], "Both are on their way.")
    script["model"] = [parallel, *script["model"]]
    set_script(stack, script)
    session = client.create_session(
        "You are the order desk.",
        tools=["lookup_order", "echo"],
        model="gpt-realtime-2.1",
        tools_in_parallel=True,
    )
    call_id = client.connect(session["id"])["call_id"]
    client.wait_for_status(session["id"], timeout_s=60)
    record = client.session(session["id"], events=True)
    log = simulator_call(stack, call_id)
    assert log["errors"] == []
    controls = [entry["control"] for entry in log["controls"]]
    for control in controls:
        assert wire_errors(control, direction="client") == [], control

    assert controls[0]["session"]["parallel_tool_calls"] is True
    assert [c["type"] for c in controls] == [
        "session.update",
        "response.create",
        *["conversation.item.create"] * 3,
        "response.create",
    ]
    outputs = [json.loads(c["item"]["output"]) for c in controls[2:5]]
    assert [o["status"] for o in outputs] == ["succeeded"] * 3
    assert len({o["call_id"] for o in outputs}) == 3
    assert sorted(o["result"].get("order_id", "") for o in outputs) == ["", "4417", "4418"]
    assert controls[5]["response"] == controls[1]["response"]
    assert sorted((s["tool"], s["status"]) for s in record["tool_steps"]) == [
        ("echo", "succeeded"),
        ("lookup_order", "succeeded"),
        ("lookup_order", "succeeded"),
    ]
    assert record["status"] == "ended"
    assert [item["text"] for item in record["transcript"] if item["role"] == "assistant"] == [
        "Both are on their way."
    ]
