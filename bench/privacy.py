"""What the privacy boundary costs per provider frame: one Realtime call turn's frames driven
through the wing alone and through the wing behind `PrivateSideband`, unwatched and watched,
with ordinary words and with a card number, an SSN and an e-mail address said in them. Pure
CPU, no services. Prints one JSON line.

    python -m bench.privacy [turns]
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from pipeline.call.sideband import Sideband
from pipeline.privacy.boundary import PrivateSideband, Redactor
from pipeline.privacy.detect import ALL_KINDS
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.realtime.sideband import RealtimeSideband

INSTRUCTIONS = "You are the order desk of a kitchenware shop. " * 60
ORDINARY = "Hello, this is Sam calling about my order 4417, the kettle from your spring catalogue."
SENSITIVE = "My card is 4532 0151 1283 0366, my social is 219-09-9999, write to rosa.planted@example.org."
REPEATS = 5


def turn_frames(turn: int, said: str) -> list[str]:
    """The frames of one call turn, as the provider sends them (transcripts in 12-character
    deltas, audio frames left out: they are classified and dropped before the boundary). Each
    turn's words are its own ("Turn 7."), as in a call: only a turn's repeats are remembered."""
    caller, agent, response = f"item_c{turn}", f"item_a{turn}", f"resp_{turn}"
    said = f"Turn {turn}. {said}"
    frames: list[dict[str, Any]] = [
        {
            "type": "input_audio_buffer.speech_started",
            "event_id": f"e{turn}_1",
            "item_id": caller,
            "audio_start_ms": 0,
        },
        {
            "type": "input_audio_buffer.speech_stopped",
            "event_id": f"e{turn}_2",
            "item_id": caller,
            "audio_end_ms": 900,
        },
    ]
    for index in range(0, len(said), 12):
        frames.append(
            {
                "type": "conversation.item.input_audio_transcription.delta",
                "event_id": f"e{turn}_d{index}",
                "item_id": caller,
                "content_index": 0,
                "delta": said[index : index + 12],
            }
        )
    frames.append(
        {
            "type": "conversation.item.input_audio_transcription.completed",
            "event_id": f"e{turn}_3",
            "item_id": caller,
            "content_index": 0,
            "transcript": said,
        }
    )
    frames.append(
        {
            "type": "response.created",
            "event_id": f"e{turn}_4",
            "response": {"id": response, "object": "realtime.response", "status": "in_progress"},
        }
    )
    reply = f"Thank you. {said}"
    for index in range(0, len(reply), 12):
        frames.append(
            {
                "type": "response.output_audio_transcript.delta",
                "event_id": f"e{turn}_r{index}",
                "response_id": response,
                "item_id": agent,
                "output_index": 0,
                "content_index": 0,
                "delta": reply[index : index + 12],
            }
        )
    frames.append(
        {
            "type": "response.output_audio_transcript.done",
            "event_id": f"e{turn}_5",
            "response_id": response,
            "item_id": agent,
            "output_index": 0,
            "content_index": 0,
            "transcript": reply,
        }
    )
    frames.append(
        {
            "type": "response.done",
            "event_id": f"e{turn}_6",
            "response": {
                "id": response,
                "object": "realtime.response",
                "status": "completed",
                "output": [
                    {
                        "id": agent,
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_audio", "transcript": reply}],
                    }
                ],
                "usage": {"total_tokens": 900, "input_tokens": 700, "output_tokens": 200},
            },
        }
    )
    frames.append(
        {
            "type": "session.updated",
            "event_id": f"e{turn}_7",
            "session": {"type": "realtime", "instructions": INSTRUCTIONS},
        }
    )
    return [json.dumps(frame) for frame in frames]


def _per_frame_us(make: Callable[[], Sideband], frames: list[str]) -> float:
    """The best of REPEATS runs' mean microseconds per frame (the least disturbed run)."""
    runs = []
    for _ in range(REPEATS):
        sideband = make()
        started = time.perf_counter()
        for frame in frames:
            sideband.receive(frame, 1_700_000_000.0, 0.0)
        runs.append((time.perf_counter() - started) / len(frames) * 1e6)
    return min(runs)


def measure(turns: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"turns": turns, "repeats": REPEATS}
    default = PrivacyPolicy().kinds
    for words, said in (("ordinary", ORDINARY), ("sensitive", SENSITIVE)):
        frames = [frame for turn in range(turns) for frame in turn_frames(turn, said)]
        wing = _per_frame_us(RealtimeSideband, frames)
        cases: dict[str, Callable[[], Sideband]] = {
            "unwatched": lambda: PrivateSideband(RealtimeSideband(), Redactor(default), lambda: False),
            "watched": lambda: PrivateSideband(RealtimeSideband(), Redactor(default), lambda: True),
            "watched_every_kind": lambda: PrivateSideband(
                RealtimeSideband(), Redactor(ALL_KINDS), lambda: True
            ),
        }
        row: dict[str, Any] = {"frames": len(frames), "wing_us_per_frame": round(wing, 1)}
        for name, make in cases.items():
            cost = _per_frame_us(make, frames)
            row[f"{name}_us_per_frame"] = round(cost, 1)
            row[f"{name}_ratio"] = round(cost / wing, 2)
        figures[words] = row
    return figures


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(json.dumps(measure(turns)))


if __name__ == "__main__":
    main()
