"""The gateway's spans of a call: the call itself (a sideband's life), each turn and provider
response as the socket sees them happen, each provider event it numbers, each API verb, and each
control it hands to a socket (under the worker span that published it).

Off unless the entry point hands over a tracer (`use`): every hook starts with `tracer is None`
and the OpenTelemetry API is imported only when one is. What the ids are and why is
`pipeline.platform.tracing`'s docstring.

Turns and responses are the gateway's because the gateway is where they happen in time: a turn
opens with the caller's final transcript and closes with the `response.done` that asks for no
function call (its tool's answers are responses of the same turn); a provider response spans
`response.created` → `response.done`. Both are Realtime's frames, read by `CallTrace`; a Live
call's turns are read off its written-down transcript by `gateway.providers.live.LiveCallTrace`
(Live has no responses and reports no tokens).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.platform import tracing as names
from pipeline.platform.tracing import SpanIds, call_span, parsed_traceparent

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

tracer: Tracer | None = None
# Transcript text (as the privacy boundary redacted it) on the turn spans: SWITCHBOARD_TRACE_CONTENT.
content = False


def use(chosen: Tracer, *, with_content: bool) -> None:
    """Trace from now on (the entry point, once an exporter is installed)."""
    global tracer, content
    tracer, content = chosen, with_content


def _context_of(ids: SpanIds) -> Context:
    from opentelemetry import trace

    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if ids.sampled else trace.TraceFlags.DEFAULT)
    parent = trace.SpanContext(ids.trace_id, ids.span_id, is_remote=True, trace_flags=flags)
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def _traceparent(span: Span) -> str:
    ids = span.get_span_context()
    return SpanIds(ids.trace_id, ids.span_id, bool(ids.trace_flags.sampled)).traceparent()


@dataclass
class CallTrace:
    """The spans of one sideband of one call, open while it is."""

    session_id: str
    generation: int
    model: str
    call: Span
    turn: Span | None = None
    response: Span | None = None
    said: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)

    def event(self, event: dict[str, Any]) -> str:
        """Open and close the span of one durable provider event under what it belongs to (the
        turn and response it is part of); its `traceparent` travels with it to the worker."""
        assert tracer is not None
        from opentelemetry import trace

        kind = str(event.get("type", ""))
        self._before(kind, event)
        parent = self.response or self.turn or self.call
        attributes = names.call_attributes(self.session_id) | {names.EVENT_TYPE: kind}
        span = tracer.start_span(
            f"sideband {kind}",
            context=trace.set_span_in_context(parent),
            kind=trace.SpanKind.PRODUCER,
            attributes=attributes,
        )
        span.end()
        self._after(kind, event)
        return _traceparent(span)

    def _before(self, kind: str, event: dict[str, Any]) -> None:
        assert tracer is not None
        from opentelemetry import trace

        if kind == "conversation.item.input_audio_transcription.completed" and self.turn is None:
            self._open_turn()
        elif kind == "response.created" and self.response is None:
            self.response = tracer.start_span(
                f"{names.CHAT} {self.model}",
                context=trace.set_span_in_context(self.turn or self.call),
                kind=trace.SpanKind.CLIENT,
                attributes=names.call_attributes(self.session_id)
                | {names.OPERATION: names.CHAT, names.REQUEST_MODEL: self.model},
            )
        if not content:
            return
        if kind == "conversation.item.input_audio_transcription.completed":
            self.said.append(str(event.get("transcript", "")))
        elif kind in ("response.output_audio_transcript.done", "response.output_text.done"):
            self.answered.append(str(event.get("transcript", event.get("text", ""))))

    def _open_turn(self) -> None:
        assert tracer is not None
        from opentelemetry import trace

        self.turn = tracer.start_span(
            f"{names.INVOKE_AGENT} {names.AGENT}",
            context=trace.set_span_in_context(self.call),
            attributes=names.call_attributes(self.session_id)
            | {
                names.OPERATION: names.INVOKE_AGENT,
                names.AGENT_NAME: names.AGENT,
                names.REQUEST_MODEL: self.model,
            },
        )

    def _after(self, kind: str, event: dict[str, Any]) -> None:
        if kind != "response.done":
            return
        if self.response is not None:
            self.response.set_attributes(names.response_attributes(event))
            self.response.end()
            self.response = None
        if self.turn is not None and not names.calls_a_function(event):
            self._end_turn()

    def _end_turn(self, end_time: int | None = None) -> None:
        """End the open turn (at `end_time`, ns since the epoch, when it ended before now)."""
        assert self.turn is not None
        if content:
            self.turn.set_attribute(names.INPUT_MESSAGES, names.messages("user", self.said))
            self.turn.set_attribute(names.OUTPUT_MESSAGES, names.messages("assistant", self.answered))
        self.turn.end(end_time=end_time)
        self.turn, self.said, self.answered = None, [], []

    def close(self) -> None:
        """The sideband closed: what is open ends with it."""
        if self.response is not None:
            self.response.end()
            self.response = None
        if self.turn is not None:
            self._end_turn()
        self.call.end()

    def host_event(self) -> str:
        """The traceparent of the gateway's own event (connected, closed): the call span's."""
        return _traceparent(self.call)


def control_sent(session_id: str, traceparent: str, control: dict[str, Any]) -> None:
    """A control handed to its socket, under the worker's span that decided it (once per id:
    a control the socket sent before makes no span)."""
    if tracer is None:
        return
    from opentelemetry import trace

    decided = parsed_traceparent(traceparent)
    kind = str(control.get("type", ""))
    tracer.start_span(
        f"control {kind}",
        context=_context_of(decided or call_span(session_id)),
        kind=trace.SpanKind.CONSUMER,
        attributes=names.call_attributes(session_id) | {names.EVENT_TYPE: kind},
    ).end()


def call_opened(
    session_id: str, generation: int, model: str, kind: type[CallTrace] = CallTrace
) -> CallTrace | None:
    """Start the span of a sideband: the first one's is the call span itself, with the ids the
    session derives; a later generation's (a reconnect, a takeover) is its child. `kind`: the
    wing's reading of turns and responses (`CallTrace` reads Realtime's frames; the gateway's
    Live glue has its own, `gateway.providers.live.LiveCallTrace`)."""
    if tracer is None:
        return None
    from opentelemetry import context, trace

    ids = call_span(session_id)
    attributes = names.call_attributes(session_id) | {
        names.GENERATION: generation,
        names.REQUEST_MODEL: model,
    }
    if generation == 1:
        token = context.attach(
            context.set_value(
                names.CALL_SPAN_ID_KEY, ids.span_id, context.set_value(names.CALL_TRACE_ID_KEY, ids.trace_id)
            )
        )
        try:
            span = tracer.start_span(
                "call", context=context.Context(), kind=trace.SpanKind.SERVER, attributes=attributes
            )
        finally:
            context.detach(token)
    else:
        span = tracer.start_span(
            "sideband", context=_context_of(ids), kind=trace.SpanKind.SERVER, attributes=attributes
        )
    return kind(session_id, generation, model, span)


def verb(session_id: str, command: str) -> AbstractContextManager[str | None]:
    """The span of one API verb on a call (say, whisper, take over, end, transfer …), from the
    request to the worker's answer; yields the traceparent its event carries (None when off)."""
    if tracer is None:
        return nullcontext(None)
    return _verb(tracer, session_id, command)


@contextmanager
def _verb(tracer: Tracer, session_id: str, command: str) -> Iterator[str | None]:
    from opentelemetry import trace

    with tracer.start_as_current_span(
        f"verb {command}",
        context=_context_of(call_span(session_id)),
        kind=trace.SpanKind.SERVER,
        attributes=names.call_attributes(session_id) | {names.VERB: command},
    ) as span:
        yield _traceparent(span)
