"""The Live benchmark's own arithmetic: which control answers which delegation, on one clock."""

from __future__ import annotations

from bench.latency import ratios, render
from bench.live_latency import delegation_latencies_ms, live_script


def _delegated(delegation_id: str, t: float) -> dict[str, object]:
    event = {"type": "session.delegation.created", "delegation": {"id": delegation_id}}
    return {"t": t, "event": event}


def _control(kind: str, delegation_id: str | None, t: float) -> dict[str, object]:
    return {"t": t, "control": {"type": kind, "delegation_id": delegation_id}}


def test_each_delegation_is_timed_to_its_own_thinking_and_commentary() -> None:
    log = {
        "events": [_delegated("D1", 1.000), _delegated("D2", 2.000)],
        "controls": [
            _control("session.update", None, 0.5),
            _control("session.thinking.append", "D1", 1.010),
            _control("session.thinking.append", "D2", 2.012),
            _control("session.commentary.append", "D1", 1.030),
            # General commentary (a supervisor's say) answers no delegation.
            _control("session.commentary.append", None, 1.500),
            _control("session.commentary.append", "D2", 2.025),
        ],
    }
    thinking, commentary = delegation_latencies_ms(log)
    assert [round(ms, 3) for ms in thinking] == [10.0, 12.0]
    assert [round(ms, 3) for ms in commentary] == [30.0, 25.0]


def test_the_script_delegates_every_ask_and_the_report_shows_both_live_rows() -> None:
    script = live_script(3)
    assert [step.get("delegate") for step in script["caller"]] == [True, True, True, None]
    row = {"n": 30, "p50_ms": 11.6, "p95_ms": 15.0, "p99_ms": 16.1}
    figures = {"idle": {"n": 60, "p50_ms": 4.0, "p95_ms": 5.0, "p99_ms": 6.0}, "live_thinking_idle": row}
    figures["live_commentary_idle"] = {**row, "p50_ms": 20.7}
    figures["ratios"] = ratios(figures)
    text = render(figures)
    assert "Live delegation → thinking, idle" in text and "Live delegation → commentary, idle" in text
    assert figures["ratios"]["live_thinking_vs_idle"] == 2.9
