"""A call's trace ids, the traceparent and the GenAI attributes, without OpenTelemetry."""

from __future__ import annotations

from pipeline.platform.tracing import (
    SpanIds,
    call_span,
    calls_a_function,
    messages,
    parsed_traceparent,
    response_attributes,
)

SESSION_ID = "3f2a9c0e7b1d4e6f8a5b2c9d0e1f3a4b"


def test_a_session_names_the_same_call_span_everywhere() -> None:
    """The call span's ids come from the session id alone; a 32-hex session id is its trace id."""
    assert call_span(SESSION_ID) == call_span(SESSION_ID)
    assert f"{call_span(SESSION_ID).trace_id:032x}" == SESSION_ID
    assert call_span("sess-other").trace_id != call_span(SESSION_ID).trace_id
    assert call_span("sess-other").span_id != 0


def test_a_traceparent_reads_back_as_it_was_written() -> None:
    """A span's W3C traceparent carries its trace, its id and whether it is sampled."""
    ids = SpanIds(trace_id=0xABC, span_id=0x123, sampled=False)
    assert ids.traceparent() == f"00-{0xABC:032x}-{0x123:016x}-00"
    assert parsed_traceparent(ids.traceparent()) == ids
    assert parsed_traceparent(SpanIds(7, 9).traceparent()) == SpanIds(7, 9, sampled=True)


def test_a_missing_or_malformed_traceparent_names_no_parent() -> None:
    """Nothing, a wrong version, a short id or an all-zero id is read as no parent."""
    for value in (
        None,
        "",
        "01-" + "a" * 32 + "-" + "b" * 16 + "-01",
        "00-abc-def-01",
        "00-" + "0" * 32 + "-" + "b" * 16 + "-01",
    ):
        assert parsed_traceparent(value) is None


def test_a_response_done_gives_its_id_outcome_and_token_usage() -> None:
    """gen_ai.response.id, finish reasons and usage come from response.done's response."""
    done = {
        "type": "response.done",
        "response": {
            "id": "resp_7",
            "status": "completed",
            "output": [{"type": "function_call", "name": "echo"}],
            "usage": {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52},
        },
    }
    assert response_attributes(done) == {
        "gen_ai.response.id": "resp_7",
        "gen_ai.response.finish_reasons": ("completed",),
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 12,
    }
    assert calls_a_function(done)
    assert not calls_a_function({"type": "response.done", "response": {"output": [{"type": "message"}]}})
    assert response_attributes({"type": "response.done"}) == {}


def test_messages_are_the_conventions_json() -> None:
    """One role's lines become gen_ai.*.messages' parts, words kept as given."""
    assert (
        messages("user", ["Hola, señor"])
        == '[{"role": "user", "parts": [{"type": "text", "content": "Hola, señor"}]}]'
    )
