"""A worker killed with kill -9 while a tool's body runs (issue 47): a tool that reaches outside
the deployment (`external`) has started at most once, and the call is told its outcome is
unknown; one whose side effect allows it (`writes`) runs again and succeeds. Counted where the
body runs, in files of the tools' own (tests/tools/counted_tools.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from switchboard.client import Client
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script


def _script(tool: str) -> dict[str, Any]:
    return {
        "name": "counted",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 12,
            "speech_ms": 200,
            "response_wait_ms": 30_000,
        },
        "caller": [{"say": "Please go ahead.", "after_ms": 150}, {"hangup": True, "after_ms": 200}],
        "model": [
            {"function_call": {"name": tool, "arguments": {"hold_ms": 4_000}}},
            {"say": "That is done."},
        ],
    }


@pytest.mark.parametrize(
    ("tool", "starts", "status"), [("charge_once", 1, "failed"), ("reserve", 2, "succeeded")]
)
def test_a_body_killed_mid_run_starts_again_only_where_its_side_effect_allows(
    services: Any, namespace: str, tmp_path: Path, tool: str, starts: int, status: str
) -> None:
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-once-{tool}",
        extra_env={
            "SWITCHBOARD_TOOL_MODULES": "workers.tools.reference,tests.tools.counted_tools",
            "COUNTED_TOOLS_DIR": str(tmp_path),
        },
    ) as stack:
        stack.start(workers=1)
        set_script(stack, _script(tool))
        client = Client(stack.api_url, stack.api_token)
        session = client.create_session("You take payments.", tools=[tool])
        client.connect(session["id"])
        counter = tmp_path / tool
        assert wait_until(counter.exists, 30)
        stack.workers[0].kill()
        stack.add_worker()
        record = client.wait_for_status(session["id"], timeout_s=90)

    assert counter.read_text().count("\n") == starts
    [step] = record["tool_steps"]
    assert step["status"] == status, step
    if status == "failed":
        assert step["error"]["code"] == "outcome_unknown"
    assert record["status"] == "ended"
