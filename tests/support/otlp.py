"""A real OTLP/HTTP trace receiver on 127.0.0.1: it takes `POST /v1/traces`, decodes each
`ExportTraceServiceRequest` with opentelemetry-proto and keeps the spans, with the service
that sent them. `python -m tests.support.otlp [PORT]` runs one alone (for the benchmarks), printing
what it took every 5 s."""

from __future__ import annotations

import gzip
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived: its ids as hex, its parent's ('' for a root), its attributes."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    # When it started and ended, ns since the epoch.
    start_ns: int = 0
    end_ns: int = 0


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    return getattr(value, which) if which else None


class OtlpReceiver:
    """Keeps every span POSTed to it; `endpoint` is what OTEL_EXPORTER_OTLP_ENDPOINT takes."""

    def __init__(self, port: int = 0) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver.take(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def take(self, request: ExportTraceServiceRequest) -> None:
        taken = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    taken.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(taken)

    def of(self, session_id: str) -> list[ReceivedSpan]:
        """The spans that say they are of this conversation."""
        with self._lock:
            return [
                span for span in self.spans if span.attributes.get("gen_ai.conversation.id") == session_id
            ]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


if __name__ == "__main__":
    running = OtlpReceiver(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(running.endpoint, flush=True)
    while True:
        time.sleep(5)
        print(f"{running.requests} requests, {len(running.spans)} spans", flush=True)
