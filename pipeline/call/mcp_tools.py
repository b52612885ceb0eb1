"""Tools an MCP server serves, as data: the server a version names, what a listing of it keeps,
and the rules that decide which listed tools a call may offer the model.

Rules:
- A server is reached over HTTPS; plain HTTP only on loopback (a server on the developer's own
  machine). A URL carries no credentials: it is named in errors and logs, so credentials go in
  `headers`, which are secret: never logged, never answered (`shown()` masks them).
- A listing keeps the tools `allowed_tools` names (every tool when it names none). An allowed
  name the server does not list is a refusal: a typo would otherwise publish a version without
  the tool the operator asked for.
- A listed tool whose name is not a valid tool name, whose parameters are not an object schema,
  or whose schema uses keywords the runner's validator cannot enforce, is left out, with the
  reason returned beside what was kept (never silently dropped).
- A tool name is one tool: the same name from two places (two servers, a server and a Python
  tool) is a refusal naming both.

Nothing here does I/O; `workers/tools/mcp_tools.py` lists a server and calls its tools.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from pipeline.call.catalog import TOOL_NAME_PATTERN, SideEffect, ToolSpec, digest_of
from pipeline.call.errors import BadInput
from pipeline.call.limits import MAXIMUM_TOOL_MS

# An MCP server that has not answered a listing or a call within this long is down, unless the
# version says otherwise; a caller is on the line in silence while a tool runs.
DEFAULT_MCP_TIMEOUT_MS = 10_000
# Shorter than this cannot cover one HTTPS round trip to a server elsewhere.
MINIMUM_MCP_TIMEOUT_MS = 100

# A header's name is an HTTP token (RFC 9110, section 5.6.2).
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$")
MAXIMUM_MCP_HEADERS = 16
MAXIMUM_MCP_HEADER_VALUE_CHARACTERS = 4_096
# Headers the MCP transport writes itself (the session, the protocol version, the body's
# framing): one set by a version would break the exchange or smuggle a second meaning.
RESERVED_MCP_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "host",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
        "transfer-encoding",
    }
)
# What `shown()` puts in place of a header's value.
MASKED = "********"

_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)
_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})


class McpToolsRefused(BadInput):
    """An MCP tool declaration or listing that cannot be published as it is."""

    code = "mcp_tools_refused"


class ToolNameCollision(BadInput):
    """Two tools of one version share a name; the message names where each comes from."""

    code = "tool_name_collision"


def _is_loopback_host(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def mcp_url_refusal(url: str) -> str | None:
    """Why `url` cannot name an MCP server, or None: HTTPS with a host, or HTTP to loopback
    (a development server on this machine); no credentials, no fragment."""
    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url):
        return "an MCP server's URL has no spaces or control characters"
    try:
        parts = urlsplit(url)
        # Read so that a port out of range is refused here, not at the first call.
        _ = parts.port
    except ValueError as exc:
        return f"an MCP server's URL does not parse: {exc}"
    host = parts.hostname or ""
    if not host:
        return f"{url} names no host"
    if parts.username is not None or parts.password is not None:
        # The URL is named in errors and logs; a secret belongs in the headers, which are not.
        return "an MCP server's URL carries no credentials: put them in its headers"
    if parts.fragment:
        return f"{url}: an MCP server's URL has no fragment"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http":
        if _is_loopback_host(host):
            return None
        return f"{url}: plain http is allowed only to loopback (a development server); use https"
    return f"{url}: an MCP server is reached over https"


class McpServerSpec(BaseModel):
    """An MCP server over streamable HTTP, as an agent version declares it.

    `headers` go with every request to it (an API key, a bearer token): they are secret, held as
    `SecretStr` so that a dump, a repr or a log line of this model shows them masked; only
    `header_values()` gives them in the clear, for the transport and for sealing."""

    # hide_input_in_errors: a refused header must not quote its value in the error's text.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    url: str = Field(min_length=1, max_length=2_000)
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    allowed_tools: tuple[str, ...] | None = None
    timeout_ms: int = Field(default=DEFAULT_MCP_TIMEOUT_MS, ge=MINIMUM_MCP_TIMEOUT_MS, le=MAXIMUM_TOOL_MS)

    @field_validator("url")
    @classmethod
    def _is_reachable_url(cls, url: str) -> str:
        refusal = mcp_url_refusal(url)
        if refusal is not None:
            raise ValueError(refusal)
        return url

    @field_validator("headers")
    @classmethod
    def _are_plain_headers(cls, headers: dict[str, SecretStr]) -> dict[str, SecretStr]:
        # Messages name the header, never its value.
        if len(headers) > MAXIMUM_MCP_HEADERS:
            raise ValueError(f"an MCP server takes at most {MAXIMUM_MCP_HEADERS} headers, got {len(headers)}")
        seen: set[str] = set()
        for name, secret in headers.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"header name {name[:64]!r} is not an HTTP token (letters, digits, -_.)")
            folded = name.lower()
            if folded in RESERVED_MCP_HEADERS:
                raise ValueError(f"header {name} is written by the MCP transport itself")
            if folded in seen:
                raise ValueError(f"header {name} is given twice (header names ignore case)")
            seen.add(folded)
            value = secret.get_secret_value()
            if len(value) > MAXIMUM_MCP_HEADER_VALUE_CHARACTERS:
                raise ValueError(
                    f"header {name}'s value is longer than {MAXIMUM_MCP_HEADER_VALUE_CHARACTERS} characters"
                )
            if any((ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F for char in value):
                raise ValueError(f"header {name}'s value holds a control character")
            if not value.isascii():
                raise ValueError(f"header {name}'s value is not ASCII")
        return headers

    @field_validator("allowed_tools")
    @classmethod
    def _names_each_tool_once(cls, allowed: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if allowed is None:
            return None
        if not allowed:
            raise ValueError("allowed_tools names at least one tool (leave it out to allow every tool)")
        twice = sorted({name for name in allowed if allowed.count(name) > 1})
        if twice:
            raise ValueError(f"allowed_tools names {', '.join(twice)} more than once")
        return allowed

    def header_values(self) -> dict[str, str]:
        """The headers in the clear: for the transport that sends them, and for sealing."""
        return {name: secret.get_secret_value() for name, secret in self.headers.items()}

    def shown(self) -> dict[str, Any]:
        """The server as it may be logged or answered: each header's value masked."""
        return {
            "url": self.url,
            "headers": dict.fromkeys(self.headers, MASKED),
            "allowed_tools": list(self.allowed_tools) if self.allowed_tools is not None else None,
            "timeout_ms": self.timeout_ms,
        }


class McpTool(BaseModel):
    """One tool as a listing of its server found it, stored with the version that listed it,
    so that a call never waits on a listing. The name is the server's own, checked when the
    listing is admitted (`admit_listing`), not here: a tool left out is one of these too."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    input_schema: dict[str, Any]
    server_url: str
    listed_at: datetime

    @property
    def origin(self) -> str:
        """Where the tool comes from, for a message naming two tools of one name."""
        return f"MCP server {self.server_url}"

    @property
    def version(self) -> str:
        """The digest of what the model is told and where the call goes: the same tool listed
        again has the same version; a changed description, schema or server has another."""
        return digest_of(
            {
                "name": self.name,
                "description": self.description,
                "input_schema": self.input_schema,
                "server_url": self.server_url,
            }
        )

    def as_tool_spec(self, side_effect: SideEffect) -> ToolSpec:
        """The provider-facing spec; `side_effect` is the version's word for it (an MCP server's
        hints are the server's claims, not the operator's)."""
        return ToolSpec(
            name=self.name,
            version=self.version,
            description=self.description,
            parameters=self.input_schema,
            side_effect=side_effect,
        )


class LeftOut(BaseModel):
    """A listed tool that cannot be offered to the model, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    reason: str


def admit_listing(
    server: McpServerSpec,
    listed: Sequence[McpTool],
    *,
    unsupported_keywords: Callable[[dict[str, Any]], list[str]],
) -> tuple[tuple[McpTool, ...], tuple[LeftOut, ...]]:
    """What a listing of `server` keeps and what it leaves out, each with its reason.

    `unsupported_keywords` is the runner's validator's own check (`workers.tools.schema`),
    passed in because the core of a call imports nothing outside itself: a keyword the runner
    cannot enforce would be a rule the model is told about and nobody checks."""
    names = [tool.name for tool in listed]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise McpToolsRefused(f"MCP server {server.url} lists {', '.join(twice)} more than once")
    if server.allowed_tools is not None:
        missing = [name for name in server.allowed_tools if name not in names]
        if missing:
            raise McpToolsRefused(
                f"MCP server {server.url} does not list {', '.join(missing)}, which allowed_tools names"
            )
        listed = [tool for tool in listed if tool.name in server.allowed_tools]
    kept: list[McpTool] = []
    left_out: list[LeftOut] = []
    for tool in listed:
        reason = _why_left_out(tool, unsupported_keywords)
        if reason is None:
            kept.append(tool)
        else:
            left_out.append(LeftOut(name=tool.name, reason=reason))
    return tuple(kept), tuple(left_out)


def _why_left_out(tool: McpTool, unsupported_keywords: Callable[[dict[str, Any]], list[str]]) -> str | None:
    if not _TOOL_NAME.fullmatch(tool.name):
        return "its name is not a tool name the provider accepts (1 to 64 letters, digits, '_' or '-')"
    if tool.input_schema.get("type") != "object":
        return 'its input schema is not an object schema ("type": "object")'
    problems = unsupported_keywords(tool.input_schema)
    if problems:
        return f"its input schema uses what the argument validator cannot check: {', '.join(problems)}"
    return None


def refuse_name_collisions(declared: Iterable[tuple[str, str]]) -> None:
    """Each `(name, origin)` pair a version declares, the same name at most once; the first
    name found twice is refused, naming both origins."""
    first_origin: dict[str, str] = {}
    for name, origin in declared:
        earlier = first_origin.get(name)
        if earlier is not None:
            raise ToolNameCollision(f"two tools are called {name!r}: one from {earlier}, one from {origin}")
        first_origin[name] = origin
