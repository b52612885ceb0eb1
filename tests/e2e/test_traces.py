"""Traces end to end (issue 27): a stack exporting OTLP/HTTP to a real receiver in the test.
One call's gateway and worker spans share one trace, under its call span, each worker span the
child of the gateway span of the event it applied; the GenAI conventions' attributes are there;
no transcript text by default, and only redacted text where content tracing is on."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.platform.tracing import call_span
from pipeline.privacy.detect import is_luhn_valid
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script
from tests.support.live import set_live_script
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.waiting import wait_for


def _card() -> str:
    """A Luhn-valid card number, new for each run (so an earlier run's spans cannot match)."""
    body = "4" + "".join(str(secrets.randbelow(10)) for _ in range(14))
    return body + next(str(d) for d in range(10) if is_luhn_valid(tuple(int(c) for c in body + str(d))))


CARD_DIGITS = _card()
CARD = " ".join(CARD_DIGITS[i : i + 4] for i in range(0, 16, 4))
CARD_MASK = f"•••• •••• •••• {CARD_DIGITS[-4:]}"
SAID = f"My card is {CARD}, what do I owe?"
ANSWERED = "You owe nothing today."

SCRIPT: dict[str, Any] = {
    "name": "traced",
    "timing": {"delta_interval_ms": 10, "chars_per_delta": 20, "speech_ms": 150, "response_wait_ms": 20000},
    "caller": [{"say": SAID, "after_ms": 100}],
    "model": [
        {"function_call": {"name": "echo", "arguments": {"text": "balance"}}},
        {"say": ANSWERED},
    ],
}


# A Live call of two turns: a greeting the model answers itself, then a question it delegates
# (the worker's echo_task answers it with a commentary), then the caller hangs up.
LIVE_ASK = "Could you check where my order 4417 is?"
LIVE_SCRIPT: dict[str, Any] = {
    "caller": [
        {"say": "Hi there.", "after_ms": 100},
        {"say": LIVE_ASK, "after_ms": 1_500, "delegate": True},
        {"hangup": True, "after_ms": 2_000},
    ],
    "model": [{"say": "Hello! How can I help?"}],
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    running = OtlpReceiver()
    yield running
    running.close()


@pytest.fixture(scope="module")
def traced_stack(services: Services, namespace: str, receiver: OtlpReceiver) -> Iterator[Stack]:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
    with Stack(
        services.database_url, services.redis_url, namespace=f"{namespace}-traces", extra_env=env
    ) as running:
        running.start(workers=1)
        yield running


def _call(client: Client, stack: Stack, receiver: OtlpReceiver) -> tuple[str, list[ReceivedSpan]]:
    """One traced call: the caller speaks, the model runs a tool and answers, the API ends it."""
    set_script(stack, SCRIPT)
    session_id = client.create_session("You are the billing desk.", tools=["echo"])["id"]
    client.connect(session_id)
    wait_for(
        lambda: any(entry["text"] == ANSWERED for entry in client.session(session_id)["transcript"]),
        "the answer after the tool",
        timeout_s=30,
    )
    client.end(session_id)
    assert client.wait_for_status(session_id, timeout_s=30)["status"] == "ended"
    # The call span ends when the sideband closes; the worker's spans of the close come after.
    wait_for(
        lambda: {"call", "process switchboard.sideband_closed"} <= {s.name for s in receiver.of(session_id)},
        "the call's spans exported",
        timeout_s=20,
    )
    return session_id, receiver.of(session_id)


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, [span.name for span in spans])
    return found[0]


def test_a_calls_gateway_and_worker_spans_make_one_trace_with_genai_attributes(
    traced_stack: Stack, receiver: OtlpReceiver
) -> None:
    """Every span of the call is in the trace its session id names, the turn holds both
    responses, each worker span is the child of the gateway span of its event, each control the
    child of the worker span that published it, and the tool run, the end verb and the token
    usage are there, named by the GenAI conventions."""
    client = Client(traced_stack.api_url, traced_stack.api_token, traced_stack.live_url)
    session_id, spans = _call(client, traced_stack, receiver)
    by_id = {span.span_id: span for span in spans}
    ids = call_span(session_id)

    assert {span.trace_id for span in spans} == {f"{ids.trace_id:032x}"}
    call = _one(spans, "call")
    assert (call.span_id, call.parent_span_id, call.service) == (
        f"{ids.span_id:016x}",
        "",
        "switchboard-gateway",
    )
    assert call.attributes["gen_ai.provider.name"] == "openai"

    turn = _one(spans, "invoke_agent switchboard")
    assert turn.parent_span_id == call.span_id
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.request.model"] == "gpt-realtime-2.1"
    responses = [span for span in spans if span.name == "chat gpt-realtime-2.1"]
    assert len(responses) == 2
    for response in responses:
        assert response.parent_span_id == turn.span_id
        assert response.attributes["gen_ai.operation.name"] == "chat"
        assert response.attributes["gen_ai.usage.input_tokens"] > 0
        assert response.attributes["gen_ai.usage.output_tokens"] > 0
        assert response.attributes["gen_ai.response.id"].startswith("resp")

    # Each response's done, as numbered by the gateway and as applied by the worker.
    gateway_dones = [span for span in spans if span.name == "sideband response.done"]
    assert sorted(span.parent_span_id for span in gateway_dones) == sorted(r.span_id for r in responses)
    worker_dones = [span for span in spans if span.name == "process response.done"]
    assert len(worker_dones) == 2
    for done in worker_dones:
        assert done.service == "switchboard-worker"
        assert by_id[done.parent_span_id] in gateway_dones
        # Events of one call ride several queues: one may arrive early and wait in the log.
        assert done.attributes["switchboard.disposition"] in {"applied", "pending"}
    transcribed = _one(spans, "process conversation.item.input_audio_transcription.completed")
    assert by_id[by_id[transcribed.parent_span_id].parent_span_id] == turn

    # The tool runs under the worker's delivery that decided it: the function call's, or the
    # response.done's when that delivery filled the gap the call waited in.
    tool = _one(spans, "execute_tool echo")
    assert tool.service == "switchboard-worker"
    assert by_id[tool.parent_span_id].name in {
        "process response.function_call_arguments.done",
        "process response.done",
    }
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "echo"
    assert tool.attributes["gen_ai.tool.call.id"].startswith("call")

    # The controls go back under the worker's span that published them: a delivery's, or the
    # tool run's for what its outcome caused (its output and the answer's response.create).
    asked = [span for span in spans if span.name == "control response.create"]
    assert len(asked) == 2
    configured = _one(spans, "control session.update")
    for control in [*asked, configured]:
        assert control.service == "switchboard-gateway"
        assert by_id[control.parent_span_id].service == "switchboard-worker"
    assert by_id[configured.parent_span_id].name.startswith("process ")
    assert sorted(by_id[span.parent_span_id].name.split()[0] for span in asked) == ["execute_tool", "process"]
    assert by_id[_one(spans, "control conversation.item.create").parent_span_id] == tool

    verb = _one(spans, "verb end_requested")
    assert (verb.service, verb.parent_span_id) == ("switchboard-gateway", call.span_id)
    assert _one(spans, "process switchboard.end_requested").parent_span_id == verb.span_id

    # No words of the call anywhere, by default.
    values = repr([span.attributes for span in spans])
    assert "gen_ai.input.messages" not in values
    for words in ("My card is", CARD_DIGITS[-4:], "You owe nothing"):
        assert words not in values


@pytest.fixture(scope="module")
def content_client(traced_stack: Stack) -> Client:
    """A client of a second gateway of the stack, one with SWITCHBOARD_TRACE_CONTENT=1."""
    traced_stack.env["SWITCHBOARD_TRACE_CONTENT"] = "1"
    try:
        gateway = traced_stack.add_gateway()
    finally:
        del traced_stack.env["SWITCHBOARD_TRACE_CONTENT"]
    base = f"http://127.0.0.1:{gateway.ready['http']}"
    return Client(base, traced_stack.api_token, base.replace("http", "ws"))


def test_content_tracing_puts_the_redacted_words_on_the_turn(
    traced_stack: Stack, receiver: OtlpReceiver, content_client: Client
) -> None:
    """A gateway with SWITCHBOARD_TRACE_CONTENT=1 writes what was said and answered on the
    turn's span, as the session's privacy boundary masked it: the card's digits never."""
    _, spans = _call(content_client, traced_stack, receiver)

    turn = _one(spans, "invoke_agent switchboard")
    said = turn.attributes["gen_ai.input.messages"]
    assert CARD_MASK in said
    assert "My card is" in said
    assert ANSWERED in turn.attributes["gen_ai.output.messages"]
    everything = repr([span.attributes for span in spans])
    assert CARD_DIGITS not in everything.replace(" ", "")
    assert CARD not in everything


def _descendants(spans: list[ReceivedSpan], root: ReceivedSpan) -> list[ReceivedSpan]:
    below: list[ReceivedSpan] = []
    parents = {root.span_id}
    while True:
        found = [span for span in spans if span.parent_span_id in parents and span not in below]
        if not found:
            return below
        below.extend(found)
        parents = {span.span_id for span in found}


def _live_call(
    client: Client, stack: Stack, receiver: OtlpReceiver, script: dict[str, Any]
) -> tuple[str, list[ReceivedSpan]]:
    """One traced Live call, to the caller's hangup."""
    set_live_script(stack, script)
    session = client.create_session(
        "You are the order desk.", provider="live", live={"delegation": "echo_task"}
    )
    session_id = session["id"]
    client.connect(session_id)
    assert client.wait_for_status(session_id, timeout_s=30)["status"] == "ended"
    wait_for(
        lambda: {"call", "process switchboard.sideband_closed"} <= {s.name for s in receiver.of(session_id)},
        "the Live call's spans exported",
        timeout_s=20,
    )
    return session_id, receiver.of(session_id)


def test_a_live_calls_turns_hold_their_gateway_and_worker_spans(
    traced_stack: Stack, receiver: OtlpReceiver
) -> None:
    """Live sends no turn boundary: each turn (the caller's words, then the agent's answer, as
    heard latency reads them) is a turn span under the call, holding the gateway's spans of its
    written-down words and the worker's spans that applied them, the delegation and its tool
    run in the second; no `chat` spans (Live reports no tokens) and no words by default."""
    client = Client(traced_stack.api_url, traced_stack.api_token, traced_stack.live_url)
    session_id, spans = _live_call(client, traced_stack, receiver, LIVE_SCRIPT)
    by_id = {span.span_id: span for span in spans}
    assert {span.trace_id for span in spans} == {f"{call_span(session_id).trace_id:032x}"}
    call = _one(spans, "call")

    # The turns as the call log has them: each agent turn answering the caller's words.
    story = client.call_log(session_id)["entries"]
    kinds = [entry["kind"] for entry in story if entry["kind"] in ("turn.user", "turn.agent")]
    answered = sum(1 for pair in itertools.pairwise(kinds) if pair == ("turn.user", "turn.agent"))
    assert answered == 2, kinds
    turns = sorted(
        (span for span in spans if span.name == "invoke_agent switchboard"), key=lambda span: span.start_ns
    )
    assert len(turns) == answered
    for turn in turns:
        assert turn.parent_span_id == call.span_id
        assert turn.service == "switchboard-gateway"
        assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert turn.attributes["gen_ai.conversation.id"] == session_id
        below = _descendants(spans, turn)
        words = [span for span in below if span.name == "sideband switchboard.live_transcript"]
        assert words and all(by_id[span.parent_span_id] == turn for span in words)
        applied = [span for span in below if span.name == "process switchboard.live_transcript"]
        assert applied and all(span.service == "switchboard-worker" for span in applied)
        assert {span.parent_span_id for span in applied} <= {span.span_id for span in words}
    assert turns[0].end_ns <= turns[1].start_ns

    # The delegation, as numbered and as applied, and its handler's run are the second turn's.
    second = {span.name for span in _descendants(spans, turns[1])}
    assert {
        "sideband session.delegation.created",
        "process session.delegation.created",
        "execute_tool echo_task",
    } <= second
    assert not [span for span in spans if span.name.startswith("chat ")]

    values = repr([span.attributes for span in spans])
    assert "gen_ai.input.messages" not in values
    for words_said in ("Hi there", "4417", "Hello! How"):
        assert words_said not in values


def test_content_tracing_puts_a_live_turns_redacted_words_on_it(
    traced_stack: Stack, receiver: OtlpReceiver, content_client: Client
) -> None:
    """On Live too, a content gateway's turn span carries the turn's written-down words as the
    privacy boundary masked them: the card's last four, never its digits."""
    said = f"My card is {CARD}."
    script = {
        "caller": [{"say": said, "after_ms": 100}, {"hangup": True, "after_ms": 1_500}],
        "model": [{"say": ANSWERED}],
    }
    _, spans = _live_call(content_client, traced_stack, receiver, script)

    turn = _one(spans, "invoke_agent switchboard")
    assert CARD_MASK in turn.attributes["gen_ai.input.messages"]
    assert ANSWERED in turn.attributes["gen_ai.output.messages"]
    everything = repr([span.attributes for span in spans])
    assert CARD_DIGITS not in everything.replace(" ", "")
    assert CARD not in everything
