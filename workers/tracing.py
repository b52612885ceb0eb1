"""The workers' spans of a call: each event applied (a child of the gateway's span of it, whose
`traceparent` the envelope carries) and each tool run (`execute_tool`, a child of the delivery
that decided it). What a span publishes or sends carries its `traceparent` on.

Off unless the entry point hands over a tracer (`use`): every hook starts with `tracer is None`
and the OpenTelemetry API is imported only when one is. The ids are `pipeline.platform.tracing`'s.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING

from pipeline.platform import tracing as names
from pipeline.platform.tracing import SpanIds, call_span, parsed_traceparent

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from pipeline.call.catalog import ToolOutcome
    from pipeline.platform.envelope import EventEnvelope

tracer: Tracer | None = None


def use(chosen: Tracer) -> None:
    """Trace from now on (the entry point, once an exporter is installed)."""
    global tracer
    tracer = chosen


def _context_of(ids: SpanIds) -> Context:
    from opentelemetry import trace

    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if ids.sampled else trace.TraceFlags.DEFAULT)
    parent = trace.SpanContext(ids.trace_id, ids.span_id, is_remote=True, trace_flags=flags)
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def applying(envelopes: Sequence[EventEnvelope]) -> AbstractContextManager[list[Span]]:
    """One span per event of a message, from its arrival to after its transaction committed;
    each under the span its envelope names (else under the call). Off: no spans, and no
    generator set up on the hot path."""
    if tracer is None:
        return nullcontext([])
    return _applying(tracer, envelopes)


@contextmanager
def _applying(tracer: Tracer, envelopes: Sequence[EventEnvelope]) -> Iterator[list[Span]]:
    from opentelemetry import context, trace

    spans = []
    for envelope in envelopes:
        parent = parsed_traceparent(envelope.traceparent) or call_span(envelope.session_id)
        kind = str(envelope.event.get("type", ""))
        spans.append(
            tracer.start_span(
                f"process {kind}",
                context=_context_of(parent),
                kind=trace.SpanKind.CONSUMER,
                attributes=names.call_attributes(envelope.session_id)
                | {names.EVENT_TYPE: kind, names.SEQ: envelope.seq, names.GENERATION: envelope.generation},
            )
        )
    # The last event's span is current while the delivery runs: what it publishes and the tool
    # runs it starts (inline, or on tool_runs by their message) are its children.
    token = context.attach(trace.set_span_in_context(spans[-1])) if spans else None
    try:
        yield spans
    except BaseException as error:
        for span in spans:
            span.set_attribute(names.ERROR_TYPE, type(error).__qualname__)
            span.set_status(trace.StatusCode.ERROR)
        raise
    finally:
        if token is not None:
            context.detach(token)
        for span in spans:
            span.end()


def current_traceparent() -> str | None:
    """The traceparent of the span this thread is in (None when off or outside one): what a
    message it sends carries."""
    if tracer is None:
        return None
    from opentelemetry import trace

    ids = trace.get_current_span().get_span_context()
    if not ids.is_valid:
        return None
    return SpanIds(ids.trace_id, ids.span_id, bool(ids.trace_flags.sampled)).traceparent()


def disposed(spans: Sequence[Span], dispositions: Sequence[str]) -> None:
    """Say what became of each event (applied, pending, duplicate, late)."""
    for span, disposition in zip(spans, dispositions, strict=False):
        span.set_attribute(names.DISPOSITION, disposition)


def tool_run(
    session_id: str, call_id: str, name: str, traceparent: str | None = None
) -> AbstractContextManager[list[ToolOutcome]]:
    """The span of one tool body's run, under the delivery that decided it (`traceparent`, or
    the current span: an inline run), else the call; the caller appends its outcome to what
    this yields."""
    if tracer is None:
        return nullcontext([])
    return _tool_run(tracer, session_id, call_id, name, traceparent)


@contextmanager
def _tool_run(
    tracer: Tracer, session_id: str, call_id: str, name: str, traceparent: str | None
) -> Iterator[list[ToolOutcome]]:
    from opentelemetry import trace

    decided = parsed_traceparent(traceparent)
    if decided is not None:
        parent = _context_of(decided)
    elif trace.get_current_span().get_span_context().is_valid:
        parent = None  # the current span: the delivery running it inline
    else:
        parent = _context_of(call_span(session_id))

    outcomes: list[ToolOutcome] = []
    with tracer.start_as_current_span(
        f"{names.EXECUTE_TOOL} {name}",
        context=parent,
        kind=trace.SpanKind.INTERNAL,
        attributes=names.call_attributes(session_id)
        | {
            names.OPERATION: names.EXECUTE_TOOL,
            names.TOOL_NAME: name,
            names.TOOL_CALL_ID: call_id,
            names.TOOL_TYPE: "function",
        },
    ) as span:
        yield outcomes
        for outcome in outcomes:
            span.set_attribute("switchboard.tool.status", outcome.status)
            if outcome.error is not None:
                span.set_attribute(names.ERROR_TYPE, outcome.error.code)
                span.set_status(trace.StatusCode.ERROR)
