"""HTTP tools against real local endpoints, run through the runner: what the endpoint receives
(signed, keyed by the step), and every way a bad endpoint or a refused address ends the call of
the tool — a typed outcome, never an exception."""

from __future__ import annotations

import base64
import datetime
import json
import secrets
import socket
import ssl
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from pipeline.call.catalog import ToolOutcome
from pipeline.call.http_tools import AllowedHosts, HttpToolSpec
from pipeline.call.limits import MAXIMUM_TOOL_MS, MAXIMUM_TOOL_OUTPUT_BYTES
from tests.support.waiting import wait_for
from workers.tools import RegistryError, Tool, run_tool
from workers.tools.http_tools import http_tool

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
PARAMETERS = {
    "type": "object",
    "properties": {"order": {"type": "string"}, "card": {"type": "string"}},
    "required": ["order"],
    "additionalProperties": False,
}
CALL = {
    "session_id": "sess_7c1",
    "call_id": "rtc_91",
    "tool_call_id": "call_4",
    "step_id": "step_sess_7c1_call_4",
    "agent": {"name": "support", "version": 3},
    "caller": "+15550100",
    "internal_only": "not for the endpoint",
}
NOTHING_ALLOWED = AllowedHosts()
# A server that hangs holds its request this long at most, so no test leaves it behind.
HANG_S = 10.0


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    verified: Any = None
    refusal: str | None = None


Answer = Callable[[BaseHTTPRequestHandler, "Endpoint"], None]


@dataclass
class Endpoint:
    """The app's tool endpoint on a real local server: it checks each request's signature with
    the Standard Webhooks reference verifier, keeps what it received, and answers as `answer` says."""

    answer: Answer
    secret: str = SECRET
    tls: ssl.SSLContext | None = None
    requests: list[Received] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    server_names: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received = Received(headers=dict(self.headers), body=body)
                try:
                    received.verified = Webhook(endpoint.secret).verify(body, dict(self.headers))
                except WebhookVerificationError as error:
                    received.refusal = str(error)
                endpoint.requests.append(received)
                endpoint.arrived.set()
                if received.refusal is not None:
                    send(self, 401, b'{"error": "bad signature"}')
                    return
                endpoint.answer(self, endpoint)

            def log_message(self, *_args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if self.tls is not None:
            self.tls.sni_callback = lambda _socket, name, _context: self.server_names.append(name)
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, **headers: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()
    handler.wfile.write(body)


def answering(status: int, body: bytes, **headers: str) -> Answer:
    return lambda handler, _endpoint: send(handler, status, body, **headers)


def hanging(handler: BaseHTTPRequestHandler, endpoint: Endpoint) -> None:
    endpoint.release.wait(HANG_S)


@pytest.fixture
def endpoints() -> Iterator[Callable[..., Endpoint]]:
    started: list[Endpoint] = []

    def start(answer: Answer, **options: Any) -> Endpoint:
        endpoint = Endpoint(answer, **options)
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        endpoint.close()


def declared(url: str, *, name: str = "lookup_order", **changes: Any) -> HttpToolSpec:
    return HttpToolSpec.model_validate(
        {
            "name": name,
            "description": "Look an order up.",
            "parameters": PARAMETERS,
            "url": url,
            "secret": SECRET,
            "side_effect": "idempotent",
            **changes,
        }
    )


def call(
    tool: Tool,
    arguments: dict[str, Any] | None = None,
    *,
    extra: dict[str, Any] | None = None,
    timeout_ms: int = MAXIMUM_TOOL_MS,
    cancelled: Callable[[], bool] = lambda: False,
) -> ToolOutcome:
    return run_tool(
        tool,
        json.dumps(arguments if arguments is not None else {"order": "A-1001"}),
        context_extra=CALL if extra is None else extra,
        timeout_ms=timeout_ms,
        cancelled=cancelled,
    )


def failure(outcome: ToolOutcome) -> tuple[str, str, str]:
    assert outcome.error is not None, outcome
    return outcome.status, outcome.error.code, outcome.error.message


def body_threads(name: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == f"tool-{name}"]


# ── what the endpoint receives ──────────────────────────────────────────────────────────────


def test_the_endpoint_receives_a_signed_call_keyed_by_its_step(endpoints: Callable[..., Endpoint]) -> None:
    """The request verifies with the reference verifier; webhook-id and Idempotency-Key are the
    step id; the body holds the tool, its arguments and the call's context; the JSON answer is
    the tool's result."""
    endpoint = endpoints(answering(200, b'{"status": "shipped", "eta_days": 2}'))
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/tools/lookup?tenant=7"), NOTHING_ALLOWED)

    outcome = call(tool)

    assert outcome.status == "succeeded", outcome
    assert outcome.result == {"status": "shipped", "eta_days": 2}
    [received] = endpoint.requests
    assert received.refusal is None
    assert received.verified == {
        "tool": "lookup_order",
        "arguments": {"order": "A-1001"},
        "call": {
            "session_id": "sess_7c1",
            "call_id": "rtc_91",
            "tool_call_id": "call_4",
            "step_id": "step_sess_7c1_call_4",
            "agent": {"name": "support", "version": 3},
            "caller": "+15550100",
        },
    }
    headers = {name.lower(): value for name, value in received.headers.items()}
    assert headers["idempotency-key"] == "step_sess_7c1_call_4"
    assert headers["webhook-id"] == "step_sess_7c1_call_4"
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 5
    assert headers["content-type"] == "application/json"
    assert headers["host"] == f"127.0.0.1:{endpoint.port}"


def test_a_request_signed_with_another_secret_does_not_verify(endpoints: Callable[..., Endpoint]) -> None:
    """The verifier at the endpoint really checks: a tool holding another secret is refused (401),
    which fails the tool with the endpoint's status."""
    other = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    endpoint = endpoints(answering(200, b"{}"), secret=other)
    outcome = call(http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED))
    assert failure(outcome)[:2] == ("failed", "http_tool_status")
    assert endpoint.requests[0].refusal == "No matching signature found"


def test_the_same_step_sends_the_same_key_again(endpoints: Callable[..., Endpoint]) -> None:
    """A call sent again (after a crash) carries the key it was first sent with; another step, another."""
    endpoint = endpoints(answering(200, b"{}"))
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED)
    call(tool)
    call(tool)
    call(tool, extra={**CALL, "step_id": "step_sess_7c1_call_5"})
    keys = [received.headers["Idempotency-Key"] for received in endpoint.requests]
    assert keys == ["step_sess_7c1_call_4", "step_sess_7c1_call_4", "step_sess_7c1_call_5"]


def test_a_run_without_a_step_id_sends_nothing(endpoints: Callable[..., Endpoint]) -> None:
    """No step id, no Idempotency-Key: the call fails before anything is sent."""
    endpoint = endpoints(answering(200, b"{}"))
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED)
    for extra in ({"session_id": "sess_7c1"}, {**CALL, "step_id": "step\nInjected: 1"}):
        status, code, message = failure(call(tool, extra=extra))
        assert (status, code) == ("failed", "http_tool_no_step")
        assert "Idempotency-Key" in message
    assert endpoint.requests == []


# ── a bad endpoint fails the tool, not the call ─────────────────────────────────────────────


def test_a_redirect_is_not_followed(endpoints: Callable[..., Endpoint]) -> None:
    """A 3xx fails the tool, naming the host it pointed at; that host receives nothing."""
    elsewhere = endpoints(answering(200, b'{"stolen": true}'))
    endpoint = endpoints(answering(307, b"", Location=f"http://localhost:{elsewhere.port}/collect?x=1"))
    outcome = call(http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED))

    status, code, message = failure(outcome)
    assert (status, code) == ("failed", "http_tool_redirect")
    assert "307" in message and "localhost" in message and "collect" not in message
    assert len(endpoint.requests) == 1  # the redirect was really answered
    assert elsewhere.requests == []


def test_a_server_error_fails_with_a_bounded_excerpt(endpoints: Callable[..., Endpoint]) -> None:
    """A 500 fails the tool with the status and the start of what the endpoint said, bounded."""
    endpoint = endpoints(answering(500, b"database unavailable; " * 2_000))
    outcome = call(http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED))
    status, code, message = failure(outcome)
    assert (status, code) == ("failed", "http_tool_status")
    assert message.startswith("lookup_order: the endpoint answered 500: database unavailable; ")
    assert len(message) < 400


def test_an_answer_that_is_not_json_fails(endpoints: Callable[..., Endpoint]) -> None:
    """A 200 whose body is not JSON (or is NaN) fails as not JSON."""
    for body in (b"<html>it worked</html>", b"NaN", b""):
        endpoint = endpoints(answering(200, body, Content_Type="text/html"))
        outcome = call(http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED))
        assert failure(outcome)[:2] == ("failed", "http_tool_not_json"), body


def test_a_hanging_endpoint_times_out_within_its_limit(endpoints: Callable[..., Endpoint]) -> None:
    """An endpoint that never answers is timed out at the tool's own 300 ms limit."""
    endpoint = endpoints(hanging)
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/", timeout_ms=300), NOTHING_ALLOWED)
    outcome = call(tool)
    status, code, message = failure(outcome)
    assert (status, code) == ("timed_out", "http_tool_timeout")
    assert message == "lookup_order: the endpoint did not answer within 300 ms"
    assert endpoint.arrived.is_set()
    assert 300 <= outcome.elapsed_ms < 1_000


@pytest.mark.parametrize("declares_length", [True, False])
def test_an_endpoint_that_drips_is_timed_out_too(
    endpoints: Callable[..., Endpoint], declares_length: bool
) -> None:
    """An endpoint sending a digit every 100 ms never waits out a socket timeout; the tool's limit
    still ends the exchange, and what it had sent by then (a number, had the connection closed
    there) is not taken for the answer."""

    def dripping(handler: BaseHTTPRequestHandler, endpoint: Endpoint) -> None:
        handler.send_response(200)
        if declares_length:
            handler.send_header("Content-Length", "1000")
        else:
            handler.send_header("Connection", "close")
        handler.end_headers()
        for _ in range(1_000):
            if endpoint.release.wait(0.1):
                return
            handler.wfile.write(b"1")
            handler.wfile.flush()

    endpoint = endpoints(dripping)
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/", timeout_ms=500), NOTHING_ALLOWED)
    outcome = call(tool)
    assert failure(outcome)[:2] == ("timed_out", "http_tool_timeout")
    assert outcome.elapsed_ms < 1_200


def test_the_runner_s_deadline_stops_the_request(endpoints: Callable[..., Endpoint]) -> None:
    """With less time left before the runner's deadline than the tool's limit, the deadline wins,
    and the body stops with it instead of waiting out its own limit."""
    endpoint = endpoints(hanging)
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/", name="deadline_tool"), NOTHING_ALLOWED)
    outcome = call(tool, timeout_ms=300)
    assert failure(outcome)[:2] == ("timed_out", "tool_timeout")
    wait_for(lambda: not body_threads("deadline_tool"), timeout_s=1.0, what="the body to stop")


def test_a_cancelled_call_stops(endpoints: Callable[..., Endpoint]) -> None:
    """Cancelled while the endpoint holds the request, the run answers cancelled and its body
    stops at once (its socket shut down), not when its 10 s limit runs out."""
    endpoint = endpoints(hanging)
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/", name="cancelled_tool"), NOTHING_ALLOWED)
    started = time.monotonic()
    outcome = call(tool, cancelled=endpoint.arrived.is_set)
    assert failure(outcome)[:2] == ("cancelled", "cancelled")
    wait_for(lambda: not body_threads("cancelled_tool"), timeout_s=1.0, what="the body to stop")
    assert time.monotonic() - started < 2.0


def test_an_answer_at_the_bound_is_taken(endpoints: Callable[..., Endpoint]) -> None:
    """An answer of exactly MAXIMUM_TOOL_OUTPUT_BYTES is the result; one byte more is refused."""
    text = "x" * (MAXIMUM_TOOL_OUTPUT_BYTES - 2)
    at_bound = json.dumps(text).encode()
    assert len(at_bound) == MAXIMUM_TOOL_OUTPUT_BYTES
    endpoint = endpoints(answering(200, at_bound))
    outcome = call(http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED))
    assert outcome.status == "succeeded" and outcome.result == text

    over = endpoints(answering(200, at_bound + b" "))
    outcome = call(http_tool(declared(f"http://127.0.0.1:{over.port}/"), NOTHING_ALLOWED))
    assert failure(outcome)[:2] == ("failed", "http_tool_too_large")


@pytest.mark.parametrize("declares_length", [True, False])
def test_a_ten_megabyte_answer_fails_without_being_read(
    endpoints: Callable[..., Endpoint], declares_length: bool
) -> None:
    """10 MB (its length declared, or streamed until the connection closes) fails as too large,
    and no more than the bound is ever held in memory."""
    piece = b"[" + b"1," * 32_767 + b"1]"  # 64 KB; 160 of them are 10 MB

    def flooding(handler: BaseHTTPRequestHandler, _endpoint: Endpoint) -> None:
        handler.send_response(200)
        if declares_length:
            handler.send_header("Content-Length", str(len(piece) * 160))
        else:
            handler.send_header("Connection", "close")
        handler.end_headers()
        try:
            for _ in range(160):
                handler.wfile.write(piece)
        except OSError:
            pass  # the tool hung up, as it should

    endpoint = endpoints(flooding)
    tool = http_tool(declared(f"http://127.0.0.1:{endpoint.port}/"), NOTHING_ALLOWED)
    tracemalloc.start()
    try:
        outcome = call(tool)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    status, code, message = failure(outcome)
    assert (status, code) == ("failed", "http_tool_too_large")
    assert f"longer than {MAXIMUM_TOOL_OUTPUT_BYTES} bytes" in message
    assert peak < 1_000_000


def test_an_endpoint_that_is_not_listening_is_unreachable() -> None:
    """A refused connection fails the tool as unreachable."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = call(http_tool(declared(f"http://127.0.0.1:{port}/"), NOTHING_ALLOWED))
    status, code, message = failure(outcome)
    assert (status, code) == ("failed", "http_tool_unreachable")
    assert "refused the connection" in message


# ── where a tool may point ──────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("https://10.0.0.1/tools", "10.0.0.1, a private address"),
        ("https://169.254.169.254/latest/meta-data/", "the cloud metadata address"),
        ("https://[::ffff:10.0.0.1]/tools", "which carries 10.0.0.1, a private address"),
        ("https://[fe80::1]/tools", "a link-local address"),
    ],
)
def test_a_private_address_is_refused(url: str, said: str) -> None:
    """An address off the public internet fails the tool before any connection is tried."""
    status, code, message = failure(call(http_tool(declared(url), NOTHING_ALLOWED)))
    assert (status, code) == ("failed", "http_tool_refused")
    assert said in message and "SWITCHBOARD_TOOL_ALLOW_HOSTS" in message


def test_a_name_resolving_to_loopback_is_refused_over_https(endpoints: Callable[..., Endpoint]) -> None:
    """https://localhost resolves to loopback, which only http's development case may reach:
    refused, and the endpoint there receives nothing."""
    endpoint = endpoints(answering(200, b"{}"))
    status, code, message = failure(
        call(http_tool(declared(f"https://localhost:{endpoint.port}/"), NOTHING_ALLOWED))
    )
    assert (status, code) == ("failed", "http_tool_refused")
    assert "localhost resolves to" in message and "a loopback address" in message
    assert endpoint.requests == []


def test_loopback_over_http_is_the_development_case(endpoints: Callable[..., Endpoint]) -> None:
    """http://localhost reaches the endpoint on this machine without any host allowed."""
    endpoint = endpoints(answering(200, b'{"ok": true}'))
    outcome = call(http_tool(declared(f"http://localhost:{endpoint.port}/"), NOTHING_ALLOWED))
    assert outcome.status == "succeeded" and outcome.result == {"ok": True}


@pytest.fixture
def tls_endpoint(
    endpoints: Callable[..., Endpoint], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Endpoint:
    """An https endpoint on 127.0.0.1 whose certificate names localhost, signed by a key this
    process trusts (SSL_CERT_FILE, read when a tool's TLS context is made)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certificate_path = tmp_path / "endpoint.pem"
    key_path = tmp_path / "endpoint.key"
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate_path))
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(certificate_path, key_path)

    def echoing(handler: BaseHTTPRequestHandler, endpoint: Endpoint) -> None:
        send(handler, 200, json.dumps({"arguments": endpoint.requests[-1].verified["arguments"]}).encode())

    return endpoints(echoing, tls=server_tls)


def test_an_allowed_host_is_reached_over_https_at_its_checked_address(tls_endpoint: Endpoint) -> None:
    """With localhost allowed, https://localhost is reached: TLS names localhost (SNI, the
    certificate, the Host header) while the connection goes to the address checked; sensitive
    arguments arrive in the clear there, and only there."""
    spec = declared(f"https://localhost:{tls_endpoint.port}/pay", sensitive=("card",))
    tool = http_tool(spec, AllowedHosts.parse("localhost"))
    outcome = call(tool, {"order": "A-1001", "card": "4111111111111111"})

    assert outcome.status == "succeeded", outcome
    assert outcome.result == {"arguments": {"order": "A-1001", "card": "4111111111111111"}}
    assert tls_endpoint.server_names == ["localhost"]
    assert tls_endpoint.requests[0].headers["Host"] == f"localhost:{tls_endpoint.port}"


def test_a_certificate_for_another_name_is_refused(tls_endpoint: Endpoint) -> None:
    """The checked address is connected to, but TLS still proves the URL's host: a certificate
    for localhost does not serve 127.0.0.1 (allowed, over https)."""
    tool = http_tool(declared(f"https://127.0.0.1:{tls_endpoint.port}/"), AllowedHosts.parse("127.0.0.1"))
    status, code, message = failure(call(tool))
    assert (status, code) == ("failed", "http_tool_unreachable")
    assert "certificate was refused" in message
    assert tls_endpoint.requests == []


def test_a_parameter_the_validator_cannot_check_is_refused() -> None:
    """Built into a tool, parameters with unsupported keywords are refused like any tool's."""
    spec = declared("https://tools.example.com/x", parameters={"type": "object", "patternProperties": {}})
    with pytest.raises(RegistryError, match="patternProperties"):
        http_tool(spec, NOTHING_ALLOWED)


# ── docs/agents.md ──────────────────────────────────────────────────────────────────────────

AGENTS_DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def doc_block(language: str, holding: str) -> str:
    """The fenced block of `language` holding `holding` in docs/agents.md's "HTTP tools" section."""
    section = AGENTS_DOC.read_text().split("## HTTP tools", 1)[1]
    blocks = [part.split("```", 1)[0] for part in section.split(f"```{language}\n")[1:]]
    [block] = [block for block in blocks if holding in block]
    return block


def test_the_documented_declaration_is_one() -> None:
    """The declaration docs/agents.md shows validates as an HTTP tool."""
    spec = HttpToolSpec.model_validate_json(doc_block("json", '"kind": "http"'))
    assert (spec.kind, spec.name, spec.side_effect) == ("http", "lookup_order", "read_only")


def test_the_documented_endpoint_verifies_and_answers_a_repeat_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example endpoint of docs/agents.md, run as written, verifies a real call, and answers
    the same step sent again with its first answer without running it twice."""
    monkeypatch.setenv("ORDERS_TOOL_SECRET", SECRET)
    example: dict[str, Any] = {"__name__": "agents_doc_example"}
    exec(compile(doc_block("python", "class ToolEndpoint"), str(AGENTS_DOC), "exec"), example)
    server = ThreadingHTTPServer(("127.0.0.1", 0), example["ToolEndpoint"])
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        spec = declared(f"http://127.0.0.1:{server.server_address[1]}/", name="hold_order")
        tool = http_tool(spec, NOTHING_ALLOWED)
        first = call(tool, {"order": "A-1001"})
        again = call(tool, {"order": "A-1001"})
    finally:
        server.shutdown()
        server.server_close()
    assert first.status == "succeeded", first
    assert first.result == {"order": "A-1001", "held": True, "for_session": "sess_7c1"}
    assert again.result == first.result
    assert list(example["answered"]) == ["step_sess_7c1_call_4"]
