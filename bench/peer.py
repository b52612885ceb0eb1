"""The peer: the OpenAI Agents SDK's `RealtimeSession` on the same simulator, in process and
without durability, running the same tool-call scenario as Switchboard — attached to the call's
sideband by call id, as Switchboard is. Its tool turnaround (the function call's arguments
done → the `response.create` after its output) is what Switchboard's is compared with.

Needs `openai-agents` (`pip install -e '.[bench]'`); `available()` says whether it is here.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
import urllib.request
from typing import Any

from bench.common import call_log_at, call_status_at, put_script_at, tool_turnaround_ms

PEER_TIMEOUT_S = 120.0


def available() -> bool:
    return importlib.util.find_spec("agents") is not None


def measure_peer(simulator_url: str, simulator_ws_url: str, script: dict[str, Any]) -> list[float]:
    """One call of `script` driven by the Agents SDK; answers its tool turnarounds in ms."""
    from agents import function_tool
    from agents.realtime import RealtimeAgent, RealtimeRunner

    @function_tool
    def echo(text: str) -> dict[str, str]:
        """Say the given text back, unchanged."""
        return {"text": text}

    base = simulator_url.removesuffix("/v1")
    put_script_at(base, script)
    request = urllib.request.Request(
        f"{simulator_url}/realtime/calls",
        data=b"v=0\r\n",
        method="POST",
        headers={"Content-Type": "application/sdp", "Authorization": "Bearer sk-simulated"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        call_id = response.headers["Location"].rsplit("/", 1)[-1]

    async def run() -> None:
        agent = RealtimeAgent(name="bench", instructions="You are a benchmark agent.", tools=[echo])
        session = await RealtimeRunner(agent).run(
            model_config={
                "api_key": "sk-simulated",
                "call_id": call_id,
                "url": f"{simulator_ws_url}/realtime?call_id={call_id}",
            }
        )
        deadline = time.monotonic() + PEER_TIMEOUT_S
        async with session:
            async for _event in session:
                if (
                    time.monotonic() > deadline
                    or await asyncio.to_thread(call_status_at, base, call_id) == "ended"
                ):
                    break

    asyncio.run(run())
    log = call_log_at(base, call_id)
    return tool_turnaround_ms(log, {"tool_steps": []})
