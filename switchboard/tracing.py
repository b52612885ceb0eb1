"""OpenTelemetry traces, started only by entry points (like Sentry), and only when an OTLP
endpoint is set.

Configured by the standard variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
`OTEL_EXPORTER_OTLP_ENDPOINT` (either turns traces on; OTLP over HTTP/protobuf),
`OTEL_SERVICE_NAME` (default `switchboard-<process>`), `OTEL_TRACES_SAMPLER[_ARG]`,
`OTEL_BSP_*` (the batch processor's delays and sizes), `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_SDK_DISABLED`. With no endpoint nothing of the SDK is imported, and the gateway's and
the workers' span hooks cost one `is None` check each (`gateway.tracing`, `workers.tracing`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipeline.platform.tracing import CALL_SPAN_ID_KEY, CALL_TRACE_ID_KEY

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider


def is_tracing_configured(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )


def init_tracing(process: str, environ: Mapping[str, str] = os.environ) -> TracerProvider | None:
    """Install a tracer provider that exports in batches over OTLP/HTTP, or nothing (None)."""
    if not is_tracing_configured(environ):
        return None
    from opentelemetry import context, trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class CallIds(RandomIdGenerator):
        """Random ids, but for a call's own span: the ids its session derives
        (`pipeline.platform.tracing.call_span`), set in the context while that span starts."""

        def generate_trace_id(self) -> int:
            chosen = context.get_value(CALL_TRACE_ID_KEY)
            return chosen if isinstance(chosen, int) else super().generate_trace_id()

        def generate_span_id(self) -> int:
            chosen = context.get_value(CALL_SPAN_ID_KEY)
            return chosen if isinstance(chosen, int) else super().generate_span_id()

        def is_trace_id_random(self) -> bool:
            # A call's trace id is its session's, not drawn at random.
            return False

    attributes = {"switchboard.process": process}
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; what it is given
    # wins, so the default name is given only when the operator named none.
    if not environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = f"switchboard-{process}"
    provider = TracerProvider(resource=Resource.create(attributes), id_generator=CallIds())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider
