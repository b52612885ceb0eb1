"""What real sidebands say beyond the `openai` types Switchboard is checked against: fields added
later (`obfuscation` on every streamed delta, `phase` on the items of newer models) and the beta
names of 2025. The gateway sorts each frame as it sorts the plain one, and the session decides
exactly as it does on the plain stream: unknown fields are ignored, beta names read as GA."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from pipeline.realtime.events import BETA_TO_GA
from pipeline.realtime.frames import FrameKind, classify_frame
from pipeline.session.step import PersistTranscript
from tests.pipeline import events as ev

GA_TO_BETA = {ga: beta for beta, ga in BETA_TO_GA.items()}


def _item(item_id: str, role: str, text: str) -> dict[str, Any]:
    part = {"type": "input_audio" if role == "user" else "output_audio", "transcript": text}
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": role,
        "content": [part],
    }


def _turn() -> list[dict[str, Any]]:
    """One spoken turn as the GA sideband says it, deltas and ignored events included."""
    response = "resp_1"
    user, assistant = "item_U1", "item_A1"
    return [
        ev.speech_started(user),
        {
            "type": "input_audio_buffer.speech_stopped",
            "event_id": "ev_ss",
            "item_id": user,
            "audio_end_ms": 1800,
        },
        {
            "type": "conversation.item.added",
            "event_id": "ev_ia",
            "previous_item_id": None,
            "item": _item(user, "user", ""),
        },
        {
            "type": "conversation.item.input_audio_transcription.delta",
            "event_id": "ev_td",
            "item_id": user,
            "content_index": 0,
            "delta": "Where is 4417?",
        },
        ev.user_final(user, "Where is 4417?"),
        ev.response_created(response),
        {
            "type": "response.output_item.added",
            "event_id": "ev_oa",
            "response_id": response,
            "output_index": 0,
            "item": _item(assistant, "assistant", ""),
        },
        {
            "type": "response.output_audio_transcript.delta",
            "event_id": "ev_ad",
            "response_id": response,
            "item_id": assistant,
            "output_index": 0,
            "content_index": 0,
            "delta": "It ships Friday.",
        },
        ev.assistant_final(response, assistant, "It ships Friday."),
        {
            "type": "response.output_item.done",
            "event_id": "ev_od",
            "response_id": response,
            "output_index": 0,
            "item": _item(assistant, "assistant", "It ships Friday."),
        },
        ev.response_done(response),
    ]


def _newer(event: dict[str, Any]) -> dict[str, Any]:
    """The event as a 2026 sideband says it: `obfuscation` padding on every delta, `phase` on
    every item (also in a response's output)."""
    event = copy.deepcopy(event)
    if "delta" in event:
        event["obfuscation"] = "Xq3"
    if isinstance(event.get("item"), dict):
        event["item"]["phase"] = "final_answer"
    response = event.get("response")
    if isinstance(response, dict):
        response["output"] = [{**_item("item_A1", "assistant", "It ships Friday."), "phase": "final_answer"}]
    return event


def _beta(event: dict[str, Any]) -> dict[str, Any]:
    """The event under its 2025 beta name, where it had another."""
    return {**event, "type": GA_TO_BETA.get(event["type"], event["type"])}


def _decided(stream: list[dict[str, Any]]) -> tuple[list[FrameKind], list[Any], Any]:
    """What the gateway and the session make of a stream: each frame's kind, the controls sent,
    and the transcript kept."""
    kinds, durable = [], []
    for event in stream:
        classified = classify_frame(json.dumps(event))
        kinds.append(classified.kind)
        if classified.kind is FrameKind.DURABLE:
            durable.append(classified.event)
    _state, steps = ev.fold([*ev.listening(), *durable])
    controls = [c.model_dump(mode="json", exclude={"event_id"}) for c in ev.controls_of(steps)]
    return kinds, controls, [e.model_dump() for e in ev.effects_of(steps, PersistTranscript)]


@pytest.mark.parametrize(
    "variant", [_newer, _beta, lambda e: _beta(_newer(e))], ids=["newer", "beta", "both"]
)
def test_newer_fields_and_beta_names_change_nothing_decided(variant: Any) -> None:
    plain = _turn()
    assert any(event["type"] in GA_TO_BETA for event in plain)  # the beta variant renames some
    expected = _decided(plain)
    assert FrameKind.STREAMED in expected[0] and FrameKind.IGNORED in expected[0]
    assert expected[1] and expected[2]  # the turn was answered and kept
    assert _decided([variant(event) for event in plain]) == expected
