"""A seeded mutation fuzzer for provider frames and API requests.

Frames start from real provider events (the recorded spoken call) and are broken the ways a
faulty or hostile provider breaks them: cut short, a field removed or given another type, a
string holding NUL, not JSON, not an object, a host event type spoofed, an unknown type, too
large. Only frames Switchboard must not act on are kept: those it refuses (each one an
incident) and unknown types (each logged, never acted on); a mutation that happens to stay a
valid, known event would change the call, so it is dropped.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.call.errors import BadInput
from pipeline.call.limits import MAXIMUM_PROVIDER_FRAME_BYTES
from pipeline.realtime.frames import classify_frame
from pipeline.session.wire import FrameKind

RECORDING = Path(__file__).resolve().parents[2] / "recordings" / "spoken_call.jsonl"


def seed_events() -> list[dict[str, Any]]:
    lines = RECORDING.read_text().splitlines()[1:]
    records = [json.loads(line) for line in lines if line.strip()]
    return [record["event"] for record in records if "event" in record]


@dataclass
class FrameCorpus:
    frames: list[str | dict[str, Any]]  # a dict is an oversized frame for the simulator to pad
    refused: int
    unknown_types: Counter[str]


def bad_frames(seed: int, count: int, oversized: int = 3) -> FrameCorpus:
    chance = random.Random(seed)
    events = seed_events()
    frames: list[str | dict[str, Any]] = []
    refused = 0
    unknown_types: Counter[str] = Counter()
    for _ in range(oversized):
        event = copy.deepcopy(chance.choice(events))
        frames.append(
            {"event": event, "pad_to_bytes": MAXIMUM_PROVIDER_FRAME_BYTES + 1 + chance.randrange(1000)}
        )
        refused += 1
    while len(frames) < count:
        frame = _mutate(chance, chance.choice(events))
        try:
            classified = classify_frame(frame)
        except BadInput:
            refused += 1
            frames.append(frame)
            continue
        if classified.kind is FrameKind.UNKNOWN:
            unknown_types[classified.type] += 1
            frames.append(frame)
    chance.shuffle(frames)
    return FrameCorpus(frames, refused, unknown_types)


def _mutate(chance: random.Random, original: dict[str, Any]) -> str:
    event = copy.deepcopy(original)
    # Provider event ids are unique; a copy keeping a real one would be (rightly) taken for a
    # repeat of that event, and the real one dropped as its duplicate.
    event["event_id"] = f"fuzz_{chance.randrange(10**12)}"
    how = chance.randrange(10)
    if how == 0:  # cut short
        text = json.dumps(event)
        return text[: chance.randrange(1, max(2, len(text) - 1))]
    if how == 1:  # not JSON at all
        return "".join(chr(chance.randrange(32, 0x2FFF)) for _ in range(chance.randrange(1, 80)))
    if how == 2:  # JSON, but not an object
        return json.dumps(chance.choice([[event], "text", 42, None, True, [1, 2, 3]]))
    if how == 3:  # a field removed
        keys = [key for key in event if key != "type"]
        if keys:
            del event[chance.choice(keys)]
        return json.dumps(event)
    if how == 4:  # a field of another type
        keys = list(event)
        event[chance.choice(keys)] = chance.choice([None, 7, -1, 3.5, [], {}, "x", True, {"a": [1]}])
        return json.dumps(event)
    if how == 5:  # a NUL character in a string
        event["event_id"] = f"fuzz_{chance.randrange(10**12)}\x00"
        return json.dumps(event)
    if how == 6:  # a host event spoofed by the provider
        event["type"] = chance.choice(
            ["switchboard.end_requested", "switchboard.tool_finished", "switchboard.x"]
        )
        return json.dumps(event)
    if how == 7:  # an unknown type
        event["type"] = f"{chance.choice(['response', 'session', 'fuzz'])}.mystery_{chance.randrange(50)}"
        return json.dumps(event)
    if how == 8:  # no type, or a type of another kind
        event["type"] = chance.choice([None, 5, ["response.done"], {"t": 1}])
        return json.dumps(event)
    # deep nesting and odd unicode in every string
    return json.dumps(_scramble(chance, event))


def _scramble(chance: random.Random, value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _scramble(chance, item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scramble(chance, item) for item in value]
    if isinstance(value, str) and chance.random() < 0.3:
        return chance.choice([[value], {"s": value}, len(value), value + "\ufffd\u202e\U0001f600"])
    return value


# ── API requests ─────────────────────────────────────────────────────────────────────────


@dataclass
class BadRequest:
    method: str
    path: str
    body: bytes | None
    headers: dict[str, str]


def bad_requests(seed: int, count: int, token: str, session_id: str) -> Iterator[BadRequest]:
    """Requests the API must refuse with a typed 4xx: wrong or missing token, unknown routes,
    wrong methods, bodies that are not JSON, of the wrong shape, holding NUL, too large."""
    chance = random.Random(seed)
    good = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    shapes: list[Any] = [
        {},
        [],
        "text",
        {"instructions": ""},
        {"instructions": 5},
        {"instructions": "x", "tools": ["no such tool!"]},
        {"instructions": "x", "limits": {"max_output_tokens": 0}},
        {"instructions": "x", "limits": {"usage_budget_tokens": -1}},
        {"instructions": "x", "extra": True},
        {"instructions": "nul\x00inside"},
        {"text": ""},
        {"sdp": ""},
    ]
    for _ in range(count):
        how = chance.randrange(8)
        if how == 0:
            headers = chance.choice([{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}])
            yield BadRequest("POST", "/v1/sessions", b'{"instructions": "x"}', headers)
        elif how == 1:
            path = chance.choice(
                ["/", "/v2/sessions", "/v1/session", f"/v1/sessions/{session_id}/nope", "/v1/sessions/%20x"]
            )
            yield BadRequest(chance.choice(["GET", "POST", "PUT"]), path, None, good)
        elif how == 2:
            yield BadRequest(chance.choice(["PUT", "DELETE", "PATCH"]), "/v1/sessions", b"{}", good)
        elif how == 3:
            garbage = bytes(chance.randrange(256) for _ in range(chance.randrange(1, 200)))
            yield BadRequest("POST", "/v1/sessions", garbage, good)
        elif how == 4:
            yield BadRequest("POST", "/v1/sessions", json.dumps(chance.choice(shapes)).encode(), good)
        elif how == 5:
            action = chance.choice(["caller/text", "agent/say", "agent/reply", "end", "interrupt", "connect"])
            body = json.dumps(chance.choice(shapes)).encode()
            yield BadRequest("POST", f"/v1/sessions/{session_id}/{action}", body, good)
        elif how == 6:
            yield BadRequest("POST", "/v1/sessions", b"{" * chance.randrange(1, 5000), good)
        else:
            yield BadRequest("GET", f"/v1/sessions/sess_{chance.randrange(10**9)}", None, good)
