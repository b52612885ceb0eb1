"""HTTP tools: the app's own endpoint as a tool body, run by the same runner as any tool.

One call is one signed POST (docs/agents.md, "HTTP tools"):

    {"tool": name, "arguments": {...}, "call": {"session_id", "call_id", "tool_call_id",
                                               "step_id", "agent"?, "caller"?}}

with the Standard Webhooks headers (`webhook-id` = the tool step's id, `webhook-timestamp`,
`webhook-signature`) and `Idempotency-Key` = the step's id, so a call sent again after a crash
carries the key it was first sent with. The JSON answer is the tool's result.

What keeps a tool URL from reaching what it should not, and a bad endpoint from hurting the
call:
- the host is resolved once, every address it resolves to is checked
  (pipeline.call.http_tools.address_refusal), and the connection goes to a checked address with
  the URL's host as the Host header and the TLS server name: no second lookup, so DNS cannot
  answer one address to the check and another to the connection;
- a redirect is never followed (a 3xx fails, naming where it pointed);
- the tool's own limit, and the time left before the runner's deadline, bound the whole
  exchange: a socket timeout bounds each wait, and a timer shuts the socket down when the
  limit passes, so a server that sends a byte a second cannot stretch it. Cancellation shuts
  the socket down too, so the body stops at once, not at the next timeout;
- at most MAXIMUM_TOOL_OUTPUT_BYTES + 1 bytes of an answer are read (none when its
  Content-Length already says it is longer), and compression is not asked for.
Every failure is a `ToolFailed` with an `HttpToolFailure` code: the runner turns it into a
failed (or timed_out) outcome with a bounded message, and the call goes on.

Resolving the host is the one wait nothing can cut short (the system resolver has no timeout
of ours); the runner still answers at its deadline, and the body ends when the resolver does.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from standardwebhooks.webhooks import Webhook

from pipeline.call.http_tools import (
    AllowedHosts,
    HttpToolFailure,
    HttpToolSpec,
    IPAddress,
    address_refusal,
    literal_address,
)
from pipeline.call.limits import MAXIMUM_TOOL_OUTPUT_BYTES
from workers.tools.registry import RegistryError, Tool, ToolContext, ToolFailed
from workers.tools.schema import unsupported_keywords

# What of a refusing answer (a 4xx or 5xx body) the model and the step's row are shown.
MAXIMUM_EXCERPT_BYTES = 300

# The keys of the call's context (ToolContext.extra) an endpoint is told, in this order; a key
# the run does not carry is left out. `step_id` is required: it is the Idempotency-Key.
CALL_CONTEXT_KEYS = ("session_id", "call_id", "tool_call_id", "step_id", "agent", "caller")

USER_AGENT = "Switchboard tools"


def http_tool(spec: HttpToolSpec, allow_hosts: AllowedHosts) -> Tool:
    """The `Tool` that runs `spec` by POSTing to its endpoint; `allow_hosts` is the deployment's
    SWITCHBOARD_TOOL_ALLOW_HOSTS. Parameters the validator could not check are refused here, as
    for every declared tool."""
    problems = unsupported_keywords(spec.parameters)
    if problems:
        raise RegistryError(f"tool {spec.name!r} parameters use what the validator cannot check: {problems}")
    signer = Webhook(spec.secret)
    # One TLS context per tool: loading the trust store costs milliseconds, a handshake does not.
    tls = ssl.create_default_context() if spec.scheme == "https" else None

    def call_endpoint(arguments: dict[str, Any], context: ToolContext) -> Any:
        return _Exchange(spec, signer, tls, allow_hosts, context).send(arguments)

    return Tool(spec=spec.as_tool_spec(), fn=call_endpoint)


def resolve_endpoint(spec: HttpToolSpec, allowed: AllowedHosts) -> tuple[IPAddress, ...]:
    """Every address the tool's host resolves to, each one checked: a `ToolFailed` (refused,
    or unreachable when the name does not resolve) otherwise. What a publish checks, and what
    each call connects to."""
    literal = literal_address(spec.host)
    if literal is not None:
        addresses: tuple[IPAddress, ...] = (literal,)
    else:
        try:
            found = socket.getaddrinfo(
                spec.host, spec.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
        except (OSError, UnicodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ToolFailed(
                HttpToolFailure.UNREACHABLE, f"{spec.name}: {spec.host} does not resolve ({reason})"
            ) from None
        addresses = tuple(dict.fromkeys(ipaddress.ip_address(str(info[4][0])) for info in found))
    for address in addresses:
        refusal = address_refusal(spec.host, address, scheme=spec.scheme, allowed=allowed)
        if refusal is not None:
            raise ToolFailed(HttpToolFailure.REFUSED, f"{spec.name}: {refusal}")
    return addresses


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP or HTTPS connection to an address checked beforehand: the Host header and the
    TLS server name (SNI, and the name the certificate must carry) are the URL's host."""

    def __init__(
        self, host: str, port: int, *, address: IPAddress, tls: ssl.SSLContext | None, timeout: float
    ) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address
        self.tls = tls
        # The Host header leaves the port out when it is the scheme's own.
        self.default_port = 443 if tls is not None else 80
        # The socket, kept after http.client lets go of it (it does once an answer that ends
        # with the connection is under way) so its reads can still be bounded and stopped.
        self.pinned: socket.socket | None = None

    def connect(self) -> None:
        sock = socket.create_connection((str(self.address), self.port), timeout=self.timeout)
        self.pinned = sock if self.tls is None else self.tls.wrap_socket(sock, server_hostname=self.host)
        self.sock = self.pinned

    def close(self) -> None:
        super().close()
        if self.pinned is not None:
            self.pinned.close()


class _Exchange:
    """One call's request and answer, bounded by its deadline and stopped by cancellation."""

    def __init__(
        self,
        spec: HttpToolSpec,
        signer: Webhook,
        tls: ssl.SSLContext | None,
        allowed: AllowedHosts,
        context: ToolContext,
    ) -> None:
        self.spec = spec
        self.signer = signer
        self.tls = tls
        self.allowed = allowed
        self.context = context
        self.started = time.monotonic()
        self.deadline = min(context.deadline, self.started + spec.timeout_ms / 1_000)
        self.connection: _PinnedConnection | None = None
        # Why the socket was shut down under the exchange ("deadline" or "cancelled"), if it was.
        self.stopped: str | None = None
        self._stopping = threading.Lock()

    def send(self, arguments: dict[str, Any]) -> Any:
        """POST the call and answer what the endpoint answered (its JSON), or raise `ToolFailed`."""
        spec = self.spec
        if spec.sensitive and spec.scheme != "https":
            raise ToolFailed(
                HttpToolFailure.REFUSED, f"{spec.name}: sensitive parameters are only sent over https"
            )
        call = _call_context(spec.name, self.context.extra)
        step_id = call["step_id"]
        body = json.dumps(
            {"tool": spec.name, "arguments": arguments, "call": call},
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
        ).encode()
        self._go_on()
        addresses = resolve_endpoint(spec, self.allowed)
        timer = threading.Timer(self._left(), self._stop, args=("deadline",))
        timer.daemon = True
        forget = self.context.on_cancel(lambda: self._stop("cancelled"))
        timer.start()
        try:
            return self._exchange(addresses, body, step_id)
        except ToolFailed:
            raise
        except TimeoutError:
            raise self._timed_out() from None
        except (OSError, http.client.HTTPException) as exc:
            if self.stopped == "deadline":
                raise self._timed_out() from None
            self._go_on()
            raise ToolFailed(HttpToolFailure.UNREACHABLE, f"{spec.name}: {_why_unreachable(exc)}") from None
        finally:
            timer.cancel()
            forget()
            if self.connection is not None:
                self.connection.close()

    def _exchange(self, addresses: tuple[IPAddress, ...], body: bytes, step_id: str) -> Any:
        spec = self.spec
        self.connection = self._connect(addresses)
        self._go_on()
        timestamp = datetime.now(UTC).replace(microsecond=0)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
            "Connection": "close",
            "Idempotency-Key": step_id,
            "webhook-id": step_id,
            "webhook-timestamp": str(int(timestamp.timestamp())),
            "webhook-signature": self.signer.sign(step_id, timestamp, body),
        }
        self._set_timeout()
        self.connection.request(spec.method, spec.target, body=body, headers=headers)
        self._go_on()
        self._set_timeout()
        response = self.connection.getresponse()
        self._go_on()
        if 300 <= response.status < 400:
            location = response.getheader("Location") or ""
            # A relative Location points at the same host; the path is not shown (it may carry
            # what the endpoint meant only for the caller it redirects).
            where = (urlsplit(location).hostname or spec.host) if location else "nowhere it named"
            raise ToolFailed(
                HttpToolFailure.REDIRECT,
                f"{spec.name}: the endpoint answered {response.status}, a redirect to {where};"
                " redirects are not followed",
            )
        if not 200 <= response.status < 300:
            excerpt = self._read_at_most(response, MAXIMUM_EXCERPT_BYTES).decode(errors="replace")
            raise ToolFailed(
                HttpToolFailure.STATUS, f"{spec.name}: the endpoint answered {response.status}: {excerpt}"
            )
        too_large = ToolFailed(
            HttpToolFailure.TOO_LARGE,
            f"{spec.name}: the endpoint's answer is longer than {MAXIMUM_TOOL_OUTPUT_BYTES} bytes",
        )
        if response.length is not None and response.length > MAXIMUM_TOOL_OUTPUT_BYTES:
            raise too_large  # its Content-Length says so: nothing of it is read
        answer = self._read_at_most(response, MAXIMUM_TOOL_OUTPUT_BYTES + 1)
        if len(answer) > MAXIMUM_TOOL_OUTPUT_BYTES:
            raise too_large
        try:
            return json.loads(answer, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise ToolFailed(
                HttpToolFailure.NOT_JSON, f"{spec.name}: the endpoint's answer is not JSON ({exc})"
            ) from None

    def _read_at_most(self, response: http.client.HTTPResponse, limit: int) -> bytes:
        """The answer's body up to `limit` bytes (fewer when it ends first), whatever its framing."""
        chunks: list[bytes] = []
        size = 0
        # http.client closes the answer (and with it the socket) once it has read all of it.
        while size < limit and not response.isclosed():
            self._go_on()
            self._set_timeout()
            chunk = response.read(limit - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        # A socket shut down under a read ends an answer that runs until the connection closes
        # as if it were complete: what was read then is not the answer.
        self._go_on()
        return b"".join(chunks)

    def _connect(self, addresses: tuple[IPAddress, ...]) -> _PinnedConnection:
        """A connection to the first checked address that takes one (IPv6 and IPv4 alike)."""
        failure: OSError | None = None
        for address in addresses:
            self._go_on()
            connection = _PinnedConnection(
                self.spec.host, self.spec.port, address=address, tls=self.tls, timeout=self._left()
            )
            self.connection = connection
            try:
                connection.connect()
            except ssl.SSLError:
                raise  # the host answered, and would not prove it is who the URL names
            except OSError as exc:
                connection.close()
                if isinstance(exc, TimeoutError) or self.stopped is not None:
                    raise
                failure = exc
                continue
            if self.stopped is not None:
                self._shut(connection)  # stopped while the socket was being made
            return connection
        assert failure is not None  # resolve_endpoint answers at least one address
        raise failure

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        return left

    def _set_timeout(self) -> None:
        assert self.connection is not None and self.connection.pinned is not None
        self.connection.pinned.settimeout(self._left())

    def _go_on(self) -> None:
        """Raise if the run was cancelled or its time is up: checked between the steps."""
        if self.context.is_cancelled() or self.stopped == "cancelled":
            raise ToolFailed("cancelled", f"{self.spec.name} was cancelled")
        if self.stopped == "deadline":
            raise self._timed_out()
        self._left()

    def _timed_out(self) -> ToolFailed:
        limit_ms = round((self.deadline - self.started) * 1_000)
        return ToolFailed(
            HttpToolFailure.TIMEOUT,
            f"{self.spec.name}: the endpoint did not answer within {limit_ms} ms",
            timed_out=True,
        )

    def _stop(self, why: str) -> None:
        """Shut the socket down under whatever is blocked on it (from the timer or the runner)."""
        with self._stopping:
            if self.stopped is None:
                self.stopped = why
        if self.connection is not None:
            self._shut(self.connection)

    @staticmethod
    def _shut(connection: _PinnedConnection) -> None:
        sock = connection.pinned
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed already, or never connected


def _call_context(tool_name: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The `call` member of the request: what the run's context carries of CALL_CONTEXT_KEYS."""
    step_id = extra.get("step_id")
    if not _is_idempotency_key(step_id):
        raise ToolFailed(
            HttpToolFailure.NO_STEP,
            f"{tool_name}: this run has no tool step id (1 to 255 printable ASCII characters)"
            " to send as its Idempotency-Key",
        )
    return {key: extra[key] for key in CALL_CONTEXT_KEYS if extra.get(key) is not None}


def _is_idempotency_key(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= 255 and all(" " <= c <= "~" for c in value)


def _why_unreachable(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the endpoint's certificate was refused ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        return f"the TLS handshake failed ({exc.reason or type(exc).__name__})"
    if isinstance(exc, ConnectionRefusedError):
        return "the endpoint refused the connection"
    if isinstance(exc, http.client.IncompleteRead):
        return "the endpoint closed the connection before its answer was complete"
    if isinstance(exc, http.client.HTTPException):
        return f"the endpoint did not answer HTTP ({type(exc).__name__})"
    if isinstance(exc, OSError) and exc.strerror:
        return f"the endpoint could not be reached ({exc.strerror})"
    return f"the endpoint could not be reached ({type(exc).__name__})"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")
