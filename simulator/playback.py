"""Playing a recording back as the provider, for a Realtime call and a Live session alike.

Closed loop (the default): an event that, in the recording, came after a host's control waits
until the host has sent its own, and one after a request made of the host (an app's say, an
end) until `switchboard replay` has made it again (`simulator.recording.closed_loop_gates`);
then the recorded pace resumes from there. A control or request that never comes within the gate
timeout fails the playback, naming it. Open loop: every event goes on its recorded clock,
whatever the host does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from simulator.recording import DEFAULT_CLOSE_CODE, Gate, Recording, closed_loop_gates

# How long closed-loop playback waits for the host's control before it fails the call: longer
# than a tool may run (30 s and its grace) before the host answers it.
GATE_TIMEOUT_S = 60.0
# The code a stalled playback closes the sideband with.
STALLED_CODE = 1011


class HostControls:
    """How many controls of each type the host has sent, and how many requests of each type
    were made of it again (`switchboard replay` says so): what closed-loop playback waits on."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}
        self.requested: dict[str, int] = {}

    def count(self, control: dict[str, Any]) -> None:
        kind = str(control.get("type"))
        self.sent[kind] = self.sent.get(kind, 0) + 1

    def count_request(self, kind: str) -> None:
        self.requested[kind] = self.requested.get(kind, 0) + 1

    def has_sent(self, gate: Gate) -> bool:
        made = self.requested if gate.is_request else self.sent
        return made.get(gate.control_type, 0) >= gate.count


async def play(
    recording: Recording,
    *,
    speed: float,
    closed_loop: bool,
    gate_timeout_s: float,
    host: HostControls,
    emit: Callable[[dict[str, Any]], None],
    wait_until: Callable[[Callable[[], bool], float], Awaitable[bool]],
    stalled: Callable[[str], None],
) -> int:
    """Send the recording's events; answers the code to close with (the recording's, or
    `STALLED_CODE` after `stalled` was told what the host never sent)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    held = 0.0  # how long the host kept playback waiting: later events move on by as much

    async def until(t_ms: float) -> None:
        if speed > 0:
            await asyncio.sleep(max(0.0, started + held + t_ms / 1000 / speed - loop.time()))

    async def caught_up(waits: tuple[Gate, ...], before: str) -> bool:
        nonlocal held
        if all(map(host.has_sent, waits)):
            return True
        waiting_since = loop.time()
        if await wait_until(lambda: all(map(host.has_sent, waits)), gate_timeout_s * 1000):
            held += loop.time() - waiting_since
            return True
        never = ", ".join(gate.describe() for gate in waits if not host.has_sent(gate))
        stalled(
            f"closed-loop playback: the host never sent {never}, which the recording has before "
            f"{before} (waited {gate_timeout_s:g} s)"
        )
        return False

    events = recording.events
    gates, closing = closed_loop_gates(recording) if closed_loop else ([()] * len(events), ())
    for recorded, waits in zip(events, gates, strict=True):
        await until(recorded.t_ms)
        if not await caught_up(waits, f"{recorded.event.get('type')} at {recorded.t_ms} ms"):
            return STALLED_CODE
        emit(recorded.event)
    close = recording.close
    if close is not None:
        await until(close.t_ms)
    if not await caught_up(closing, "the close"):
        return STALLED_CODE
    return close.close.code if close is not None else DEFAULT_CLOSE_CODE
