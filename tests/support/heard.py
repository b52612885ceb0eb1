"""Checking a call's heard latency end to end: the call log's agent turns, the record's summary,
and the gateway's histogram, against the simulated model's first-audio delay."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from switchboard.client import Client

HEARD_METRIC = "switchboard_turn_heard_latency_seconds"


def heard_counted(client: Client, provider: str) -> float:
    """How many waits the gateway's histogram has counted for `provider`'s calls."""
    status, body = client.request("GET", "/metrics")
    assert status == 200
    text = body if isinstance(body, str) else body.decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == f"{HEARD_METRIC}_count" and sample.labels.get("provider") == provider
    )


def assert_heard(entries: list[dict[str, Any]], record: dict[str, Any], first_audio_ms: int) -> list[int]:
    """Every agent turn that answered the caller's speech says what the caller waited, split so
    that Switchboard's hop is within the wait and the provider's share is at least the model's
    configured delay; the record's p50/p95 are over those turns. Answers the waits."""
    agents = [entry["data"] for entry in entries if entry["kind"] == "turn.agent"]
    heard = [data for data in agents if data["heard_ms"] is not None]
    assert heard, "no agent turn was measured"
    for data in heard:
        split = data["heard"]
        assert data["heard_ms"] >= split["switchboard_ms"] >= 0
        assert split["switchboard_ms"] + split["provider_ms"] == data["heard_ms"]
        assert split["provider_ms"] >= first_audio_ms
    waits = sorted(data["heard_ms"] for data in heard)
    summary = record["heard_latency"]
    assert summary["turns"] == len(waits)
    assert waits[0] <= summary["p50_ms"] <= summary["p95_ms"] <= waits[-1]
    return waits
