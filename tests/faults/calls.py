"""Many simulated calls at once, and the checks every fault test makes of them afterwards:
no durable event lost, no control sent twice, every call complete — and how long the longest
turn waited for its answer (the stall the fault caused)."""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass
from typing import Any

from pipeline.realtime.events import DURABLE_TYPES
from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call

FINAL = "conversation.item.input_audio_transcription.completed"


def script(turns: int, *, pause_ms: int = 300, wait_ms: int = 60_000) -> dict[str, Any]:
    """A patient caller: `turns` lines, each answered; it waits up to `wait_ms` for an answer,
    so a stalled turn is still answered and counted, not skipped."""
    return {
        "name": "fault-load",
        "timing": {
            "delta_interval_ms": 10,
            "chars_per_delta": 16,
            "speech_ms": 200,
            "response_wait_ms": wait_ms,
        },
        "caller": [
            {"say": f"Caller line {n}, about order {4400 + n}.", "after_ms": pause_ms} for n in range(turns)
        ]
        + [{"hangup": True, "after_ms": 200}],
        "model": [{"say": f"Answer {n}: it ships on day {n + 1}."} for n in range(turns)],
    }


@dataclass
class Call:
    session_id: str
    call_id: str


def place(stack: Stack, client: Client, calls: int, turns: int, *, wait_ms: int = 60_000) -> list[Call]:
    """Start `calls` calls at once (the simulator answers each from the same script)."""
    set_script(stack, script(turns, wait_ms=wait_ms))
    placed: list[Call] = []
    lock = threading.Lock()

    def one() -> None:
        session = client.create_session("Answer briefly.")
        call = client.connect(session["id"])
        with lock:
            placed.append(Call(session["id"], call["call_id"]))

    threads = [threading.Thread(target=one) for _ in range(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(placed) == calls, f"only {len(placed)} of {calls} calls were placed"
    return placed


@dataclass
class Outcome:
    stalls_ms: list[float]

    @property
    def longest_ms(self) -> float:
        return max(self.stalls_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.stalls_ms)


def verify(stack: Stack, client: Client, calls: list[Call], turns: int, timeout_s: float = 180) -> Outcome:
    """Every call ended normally with every turn heard and answered once; every durable event
    the provider sent is in the session's log and applied; no control was sent twice."""
    stalls: list[float] = []
    for call in calls:
        record = client.wait_for_status(call.session_id, timeout_s=timeout_s)
        assert (record["status"], record["end_reason"]) == ("ended", "caller_hung_up"), record
        full = client.session(call.session_id, events=True)
        assert full["applied_seq"] == full["logged_seq"], "a logged event was never applied"
        said = [t for t in full["transcript"] if t["role"] == "user"]
        answered = [t for t in full["transcript"] if t["role"] == "assistant"]
        assert len(said) == turns and len(answered) == turns, (len(said), len(answered))
        sim = simulator_call(stack, call.call_id)
        assert sim["errors"] == []
        sent = [e for e in sim["events"] if e["event"]["type"] in DURABLE_TYPES]
        logged = {e["payload"].get("event_id") for e in full["log"]}
        lost = [e["event"]["type"] for e in sent if e["event"]["event_id"] not in logged]
        assert lost == [], f"{len(lost)} durable events lost: {lost[:5]}"
        ids = [entry["control"]["event_id"] for entry in sim["controls"]]
        assert len(ids) == len(set(ids)), "a control was sent twice"
        kinds = [entry["control"]["type"] for entry in sim["controls"]]
        assert kinds == ["session.update"] + ["response.create"] * turns, kinds
        finals = [e["t"] for e in sim["events"] if e["event"]["type"] == FINAL]
        creates = [entry["t"] for entry in sim["controls"] if entry["control"]["type"] == "response.create"]
        stalls += [(create - final) * 1000 for final, create in zip(finals, creates, strict=True)]
    return Outcome(stalls)
