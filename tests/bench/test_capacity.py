"""The capacity benchmark's own arithmetic: what counts as the answer to a caller's turn."""

from __future__ import annotations

from typing import Any

from bench.capacity import answer_latencies_ms, render


def _event(kind: str, t: float) -> dict[str, Any]:
    return {"t": t, "event": {"type": kind}}


def _control(kind: str, t: float) -> dict[str, Any]:
    return {"t": t, "control": {"type": kind}}


def test_a_tool_turns_continuation_is_not_taken_for_the_next_turns_answer() -> None:
    final = "conversation.item.input_audio_transcription.completed"
    call = {
        "events": [_event(final, 1.000), _event(final, 5.000)],
        "controls": [
            _control("session.update", 0.5),
            _control("response.create", 1.006),  # the answer to turn 1 (it calls a tool)
            _control("conversation.item.create", 2.0),
            _control("response.create", 2.010),  # the continuation after the tool's output
            _control("response.create", 5.004),  # the answer to turn 2
        ],
    }
    assert [round(ms, 3) for ms in answer_latencies_ms(call)] == [6.0, 4.0]


def test_render_shows_each_level_and_the_held_calls() -> None:
    level = {
        "calls": 10,
        "p50_ms": 5.1,
        "p95_ms": 8.0,
        "p99_ms": 9.9,
        "durable_events_per_s": 23.4,
        "lost_events": 0,
        "floor_under_load": {
            "redis_round_trip": {"p50_ms": 0.4, "p99_ms": 1.2},
            "postgres_row_lock_txn": {"p50_ms": 0.9, "p99_ms": 3.1},
        },
        "processes": {
            "gateway": {"cpu_ms_per_event": 1.0},
            "worker.1": {"cpu_ms_per_event": 1.2},
            "worker.2": {"cpu_ms_per_event": 0.3},
            "simulator": {"cpu_ms_per_event": 1.1},
        },
    }
    held = {
        "calls": 500,
        "most_live_at_once": 497,
        "p50_ms": 12.0,
        "p99_ms": 80.0,
        "lost_events": 0,
        "gateway_rss_mb_before": 57.7,
        "gateway_rss_mb_held": 86.0,
        "kib_per_call": 58.0,
    }
    text = render({"levels": [level], "held": held})
    # Two worker processes' CPU per event is their sum.
    assert "    10     5.1     8.0     9.9      23.4     0  1.0/1.5/1.1" in text
    assert (
        "the floor meanwhile (p50 / p99 ms): Redis round trip 0.4 / 1.2, row-lock transaction 0.9 / 3.1"
        in text
    )
    assert "one gateway held 497 of 500 talking calls live at once" in text
    assert "lost 0" in text and "58.0 KiB a call" in text


def test_a_turns_time_is_split_at_the_gateway_the_worker_and_the_apply() -> None:
    from bench.capacity import answer_segments_ms
    from pipeline.platform.timestamps import rfc3339

    final = "conversation.item.input_audio_transcription.completed"
    call = {
        "events": [{"t": 10.000, "event": {"type": final, "event_id": "ev_1"}}],
        "controls": [_control("response.create", 10.012)],
    }
    # As the record's log writes them (RFC 3339); the simulator's own times are epoch seconds.
    times = {"received_at": rfc3339(10.001), "taken_at": rfc3339(10.0035), "applied_at": rfc3339(10.005)}
    log = [{"payload": {"event_id": "ev_1"}, **times}]
    [segments] = answer_segments_ms(call, log)
    assert [round(ms, 3) for ms in segments] == [1.0, 2.5, 1.5, 7.0]


def _level(calls: int, p99_ms: float, gateway_ms: float, worker_ms: float, lost: int = 0) -> dict[str, Any]:
    return {
        "calls": calls,
        "p99_ms": p99_ms,
        "lost_events": lost,
        "processes": {
            "gateway": {"cpu_ms_per_event": gateway_ms},
            "worker.1": {"cpu_ms_per_event": worker_ms},
            "simulator": {"cpu_ms_per_event": 9.0},
        },
    }


def test_the_summary_sets_each_target_beside_the_run() -> None:
    """Each target beside what the run measured: CPU per event is the gateway's and the workers'
    (never the simulator's), the most calls within 50 ms is the highest level that held it."""
    from bench.everything import render_summary, summary

    latency = {"idle": {"p50_ms": 4.2, "p99_ms": 12.5}, "ratios": {"idle_vs_floor": 3.1, "tool_vs_peer": 2.4}}
    capacity = {
        "levels": [
            _level(10, 9.0, 1.0, 1.0),
            _level(50, 12.0, 0.5, 0.9),
            _level(100, 18.0, 0.4, 0.6, lost=2),
            _level(200, 49.0, 0.3, 0.6),
            _level(300, 51.0, 0.3, 0.5),
        ],
        "held": {"most_live_at_once": 500, "lost_events": 0},
    }
    rows = summary(latency, capacity)
    assert {name: row["met"] for name, row in rows.items()} == {
        "idle_p50_ms": True,
        "idle_p99_ms": False,
        "calls_100_p99_ms": True,
        "held_calls": True,
        "idle_vs_floor": False,
        "cpu_ms_per_event_200": False,
        "cpu_ms_per_event_50": True,
        "calls_200_p99_ms": True,
        "max_calls_p99_under_50ms": False,
        "tool_vs_peer": True,
        "lost_events": False,
    }
    assert rows["cpu_ms_per_event_200"]["measured"] == 0.9
    assert rows["max_calls_p99_under_50ms"]["measured"] == 200
    assert rows["lost_events"]["measured"] == 2
    assert "idle p99 ms" in render_summary(rows) and "missed" in render_summary(rows)
    empty = summary({}, {"levels": []})
    assert empty["calls_100_p99_ms"]["met"] is None and empty["cpu_ms_per_event_200"]["met"] is None
