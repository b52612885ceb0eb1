"""Builders for provider events and sessions in a known phase, for worker tests."""

from __future__ import annotations

import time
import uuid
from typing import Any

from pipeline.platform.envelope import EventEnvelope
from pipeline.session.wire import AdmissionBegun, CallAttached, SessionCreated

GATEWAY = "gw-test"


def new_session_id() -> str:
    return f"sess_test_{uuid.uuid4().hex}"


def envelope(session_id: str, seq: int, event: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return EventEnvelope(
        session_id=session_id,
        seq=seq,
        generation=generation,
        gateway_id=GATEWAY,
        received_at=time.time(),
        event=event,
    ).model_dump(mode="json")


def spoken_turns(turns: int, *, first_seq: int = 1) -> list[dict[str, Any]]:
    """The durable events of a connected call and `turns` spoken turns, in provider order."""
    events: list[dict[str, Any]] = [
        {"type": "switchboard.sideband_connected", "call_id": "rtc_test"},
        {"type": "session.updated", "event_id": "ev_updated", "session": {"type": "realtime"}},
    ]
    for turn in range(turns):
        user, assistant, response = f"item_u{turn}", f"item_a{turn}", f"resp_{turn}"
        events += [
            {
                "type": "input_audio_buffer.speech_started",
                "event_id": f"ev_ss{turn}",
                "item_id": user,
                "audio_start_ms": 100,
            },
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "event_id": f"ev_uf{turn}",
                "item_id": user,
                "content_index": 0,
                "transcript": f"caller line {turn}",
                "usage": {"type": "duration", "seconds": 1.0},
            },
            {
                "type": "response.created",
                "event_id": f"ev_rc{turn}",
                "response": {"id": response, "status": "in_progress"},
            },
            {
                "type": "response.output_audio_transcript.done",
                "event_id": f"ev_af{turn}",
                "response_id": response,
                "item_id": assistant,
                "output_index": 0,
                "content_index": 0,
                "transcript": f"assistant line {turn}",
            },
            {
                "type": "response.done",
                "event_id": f"ev_rd{turn}",
                "response": {
                    "id": response,
                    "status": "completed",
                    "usage": {"input_tokens": 100 + turn, "output_tokens": 10, "total_tokens": 110 + turn},
                },
            },
        ]
    return events


def admit(session_id: str, instructions: str = "Be brief.", *, namespace: str = "") -> None:
    """Create a session (of the deployment `namespace`) and take it through admission to an
    attached call (not yet connected)."""
    from models.sessions import locked_session, new_session

    now = time.time()
    with new_session(session_id, GATEWAY, namespace) as session:
        session.apply_host(SessionCreated(instructions=instructions), now)
    for event in (AdmissionBegun(), CallAttached(call_id="rtc_test")):
        with locked_session(session_id) as session:
            session.apply_host(event, now)


def deliver(session_id: str, seq: int, event: dict[str, Any], generation: int = 1) -> Any:
    """Log and apply one numbered event under the row lock, as a worker does; answers the
    transaction's `Applied`."""
    from models.sessions import locked_session

    with locked_session(session_id) as session:
        return session.deliver(EventEnvelope.model_validate(envelope(session_id, seq, event, generation)))


def refold(session_id: str) -> Any:
    """The session state rebuilt from its log alone, in applied order (DESIGN invariant 4)."""
    from models.records import event_log
    from pipeline.dialects import parse_inbound
    from pipeline.session.state import SessionState
    from pipeline.transitions import apply

    state = SessionState()
    for logged in sorted(event_log(session_id), key=lambda event: event["applied_order"] or 0):
        if logged["disposition"] in ("applied", "late"):
            state = apply(state, parse_inbound(logged["payload"]), logged["generation"]).state
    return state
