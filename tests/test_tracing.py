"""Traces are off unless an OTLP endpoint is set: then nothing of OpenTelemetry is imported and
nothing is exported; with one, the same code exports to it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard.tracing import init_tracing, is_tracing_configured
from tests.support.otlp import OtlpReceiver
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent

# A process's start as the entry points do it, then the gateway's and the workers' hooks of one
# event; it prints which OpenTelemetry modules are loaded.
PROCESS = """
import sys
from gateway import tracing as gateway_tracing
from pipeline.platform.envelope import EventEnvelope
from switchboard.tracing import init_tracing
from workers import tracing as worker_tracing

provider = init_tracing("gateway")
if provider is not None:
    gateway_tracing.use(provider.get_tracer("test"), with_content=False)
    worker_tracing.use(provider.get_tracer("test"))
call = gateway_tracing.call_opened("sess-off", 1, "gpt-realtime")
traceparent = None if call is None else call.event({"type": "response.created"})
envelope = EventEnvelope(session_id="sess-off", seq=1, generation=1, gateway_id="gw", received_at=0.0,
                         event={"type": "response.created"}, traceparent=traceparent)
with worker_tracing.applying([envelope]):
    pass
with gateway_tracing.verb("sess-off", "agent_say"):
    pass
if call is not None:
    call.close()
    provider.shutdown()
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    running = OtlpReceiver()
    yield running
    running.close()


def _process(env: dict[str, str]) -> str:
    clean = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROCESS],
        check=False,
        cwd=ROOT,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_without_an_endpoint_nothing_is_imported_or_exported(receiver: OtlpReceiver) -> None:
    """No OTLP endpoint: the hooks run, no OpenTelemetry module is loaded, the receiver hears
    nothing; the same process given the receiver's endpoint exports its spans there."""
    assert _process({"SWITCHBOARD_TRACE_CONTENT": "1"}) == "[]"
    assert receiver.requests == 0

    loaded = _process({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
    assert "opentelemetry.sdk.trace" in loaded
    wait_for(lambda: len(receiver.of("sess-off")) == 5, "the positive control's five spans", timeout_s=10)
    assert {span.name for span in receiver.of("sess-off")} == {
        "call",
        "chat gpt-realtime",
        "sideband response.created",
        "process response.created",
        "verb agent_say",
    }


def test_an_endpoint_turns_traces_on_unless_the_sdk_is_disabled() -> None:
    """Either endpoint variable turns traces on; OTEL_SDK_DISABLED=true keeps them off."""
    assert not is_tracing_configured({})
    assert not is_tracing_configured({"OTEL_EXPORTER_OTLP_ENDPOINT": " "})
    assert is_tracing_configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert is_tracing_configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}
    assert not is_tracing_configured(disabled)
    assert init_tracing("worker", disabled) is None
