"""HTTP tools as declared: the app's own endpoint as a tool, and the rules of where it may point.

An `HttpToolSpec` is one `http` tool of an agent version: a name, a description and JSON Schema
parameters as any tool has, plus the endpoint (`url`), the Standard Webhooks `secret` that
signs each request, a time limit and the declared side effect. `as_tool_spec()` is the tool as
the provider and the tool steps see it; its version is a digest of the declaration without the
secret, so a changed URL is a new version and a rotated secret is not.

Two rules keep a tool URL from reaching the deployment's own services:

- the scheme: `https`, or `http` to a loopback host only (`localhost`, 127.0.0.0/8, `::1`),
  which is the development case: an endpoint on the developer's own machine. Sensitive
  parameters are never sent over `http`, not even there.
- the address (`address_refusal`): every address the host resolves to must be globally
  routable; private, loopback (except the development case), link-local, multicast,
  unspecified and reserved addresses, the cloud metadata addresses, and IPv6 addresses that
  carry one of those as an IPv4 address inside (IPv4-mapped, 6to4, NAT64) are refused, unless
  the deployment allows the host by name or its address by network
  (`SWITCHBOARD_TOOL_ALLOW_HOSTS`, read into `AllowedHosts`).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline.call.catalog import TOOL_NAME_PATTERN, SideEffect, ToolSpec, digest_of
from pipeline.call.limits import MAXIMUM_TOOL_MS

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# A caller waits in silence while a tool runs: an endpoint that needs longer than this says so
# in its declaration (at most MAXIMUM_TOOL_MS, the runner's own ceiling).
DEFAULT_HTTP_TOOL_MS = 10_000
# Below this no TLS handshake over a real network finishes; a smaller limit is a typo.
MINIMUM_HTTP_TOOL_MS = 100

# The addresses clouds serve instance metadata (and credentials) on. All of them are refused by
# the address rules anyway; they are named so the refusal says what the URL was reaching for.
CLOUD_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)

# IPv6 prefixes that carry an IPv4 address in their last 32 bits (RFC 6052 NAT64: the
# well-known and the local-use prefix): a connection there reaches that IPv4 address.
_NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))

# A host name as DNS spells it (letters, digits, hyphens, dots); compared in lower case.
_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)

_SECRET_PREFIX = "whsec_"
# Standard Webhooks asks for a key of 24 to 64 bytes.
_MINIMUM_SECRET_BYTES = 24

LOCALHOST = "localhost"


class HttpToolFailure(StrEnum):
    """Why an HTTP tool call did not succeed: the `code` of its failed outcome.

    REFUSED      the URL's scheme or address is not one a tool may reach
    UNREACHABLE  the host did not resolve, or the connection or TLS handshake failed
    TIMEOUT      no complete answer within the tool's time limit (a timed_out outcome)
    REDIRECT     the endpoint answered 3xx; redirects are never followed
    STATUS       the endpoint answered neither 2xx nor 3xx
    TOO_LARGE    the answer is longer than the tool output bound
    NOT_JSON     the answer is not JSON
    NO_STEP      the run carries no tool step id, so it has no Idempotency-Key to send
    """

    REFUSED = "http_tool_refused"
    UNREACHABLE = "http_tool_unreachable"
    TIMEOUT = "http_tool_timeout"
    REDIRECT = "http_tool_redirect"
    STATUS = "http_tool_status"
    TOO_LARGE = "http_tool_too_large"
    NOT_JSON = "http_tool_not_json"
    NO_STEP = "http_tool_no_step"


HttpSideEffect = Literal["read_only", "idempotent", "not_idempotent"]

# An endpoint's declared side effect as the tool steps and the crash recovery know it:
#   read_only       reads; sent again freely                       → SideEffect.READ_ONLY
#   idempotent      writes, and a repeat with the same Idempotency-Key changes nothing more
#                   (the app keys its write on it)                 → SideEffect.WRITES
#   not_idempotent  acts on the world each time it is received      → SideEffect.EXTERNAL
SIDE_EFFECTS: dict[HttpSideEffect, SideEffect] = {
    "read_only": SideEffect.READ_ONLY,
    "idempotent": SideEffect.WRITES,
    "not_idempotent": SideEffect.EXTERNAL,
}


def may_send_again(side_effect: HttpSideEffect) -> bool:
    """Whether a call whose first sending has an unknown outcome (its worker died with the
    request in flight) may be sent again with the same Idempotency-Key; a `not_idempotent` one
    is answered to the model as unknown instead, so the endpoint receives it at most once."""
    return side_effect != "not_idempotent"


class AllowedHosts(BaseModel):
    """The hosts a tool URL may reach although their addresses are not globally routable:
    exact host names (any address they resolve to) and networks (the addresses in them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    names: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, setting: str) -> AllowedHosts:
        """`SWITCHBOARD_TOOL_ALLOW_HOSTS`: comma-separated host names, addresses and CIDR
        networks (`crm.internal, 10.20.0.0/16, fd00::/8`); a bad entry is a ValueError naming it."""
        names: list[str] = []
        networks: list[IPNetwork] = []
        for raw in setting.split(","):
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            name = _host_key(entry)
            if not _HOST_NAME.fullmatch(name):
                raise ValueError(f"{entry!r} is neither a host name nor an address or CIDR network")
            names.append(name)
        return cls(names=tuple(names), networks=tuple(networks))

    def allows(self, host: str, address: IPAddress) -> bool:
        """Whether the deployment lets a tool reach `address`, which `host` resolved to."""
        if _host_key(host) in self.names:
            return True
        return any(candidate in network for candidate in _with_carried(address) for network in self.networks)


def address_refusal(host: str, address: IPAddress, *, scheme: str, allowed: AllowedHosts) -> str | None:
    """Why a tool may not connect to `address` (what `host` resolved to) over `scheme`, or None
    when it may."""
    if scheme == "http":
        # The development case, the only one http is for: the endpoint is on this machine.
        if any(candidate.is_loopback for candidate in _with_carried(address)):
            return None
        return f"{host} resolves to {address}, and http is only for loopback (development); use https"
    if allowed.allows(host, address):
        return None
    kind = _kind_of_refused(address)
    if kind is None:
        return None
    return (
        f"{host} resolves to {address}, {kind}: a tool may not reach it unless"
        " SWITCHBOARD_TOOL_ALLOW_HOSTS allows the host"
    )


def _kind_of_refused(address: IPAddress) -> str | None:
    carried = _carried_ipv4(address)
    if carried is not None:
        # The connection reaches the IPv4 address inside: it is judged, not its wrapping.
        inside = _kind_of_refused(carried)
        return None if inside is None else f"which carries {carried}, {inside}"
    if address in CLOUD_METADATA_ADDRESSES:
        return "the cloud metadata address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "an address that is not globally routable"
    return None


def _carried_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches (IPv4-mapped, 6to4, NAT64), if it carries one."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in prefix for prefix in _NAT64_PREFIXES):
        return ipaddress.IPv4Address(address.packed[-4:])
    return None


def _with_carried(address: IPAddress) -> tuple[IPAddress, ...]:
    carried = _carried_ipv4(address)
    return (address,) if carried is None else (address, carried)


def _host_key(host: str) -> str:
    return host.strip().lower().rstrip(".")


def literal_address(host: str) -> IPAddress | None:
    """The address a URL's host spells literally (`10.0.0.1`, `::1`), or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def is_loopback_host(host: str) -> bool:
    """Whether a URL's host names this machine: `localhost`, or a loopback address."""
    address = literal_address(host)
    if address is None:
        return _host_key(host) == LOCALHOST
    return any(candidate.is_loopback for candidate in _with_carried(address))


class HttpToolSpec(BaseModel):
    """One `http` tool as an agent version declares it."""

    # A refusal's message must not quote the declaration: it holds the secret.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    # The tool's kind, the tag an agent version's tools are told apart by.
    kind: Literal["http"] = "http"
    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str
    # A JSON schema whose top level is an object, as every tool's (ToolSpec checks it).
    parameters: dict[str, Any]
    url: str = Field(min_length=1, max_length=2_048)
    # POST only: the arguments and the call's context travel in the signed body, and whether a
    # repeat is safe is what `side_effect` and the Idempotency-Key say, not the verb. A PUT
    # would add a second way to send the same body and promise an idempotency the endpoint may
    # not keep.
    method: Literal["POST"] = "POST"
    # Standard Webhooks: `whsec_` and the base64 of a 24 to 64 byte key.
    secret: str = Field(repr=False)
    timeout_ms: int = Field(default=DEFAULT_HTTP_TOOL_MS, ge=MINIMUM_HTTP_TOOL_MS, le=MAXIMUM_TOOL_MS)
    side_effect: HttpSideEffect
    # Top-level string parameters sealed everywhere but in the request (ToolSpec.sensitive).
    sensitive: tuple[str, ...] = ()

    @field_validator("secret")
    @classmethod
    def _a_standard_webhooks_secret(cls, secret: str) -> str:
        # The message never quotes the secret.
        if not secret.startswith(_SECRET_PREFIX):
            raise ValueError("secret must be a Standard Webhooks secret: whsec_ and the base64 of its key")
        try:
            key = base64.b64decode(secret[len(_SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("secret: what follows whsec_ is not base64") from None
        if not _MINIMUM_SECRET_BYTES <= len(key) <= 64:
            raise ValueError(f"secret: the key is {len(key)} bytes; Standard Webhooks asks for 24 to 64")
        return secret

    @field_validator("url")
    @classmethod
    def _an_endpoint_a_tool_may_reach(cls, url: str) -> str:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"url {url!r} does not parse: {exc}") from None
        if parts.scheme not in ("https", "http"):
            raise ValueError(
                f"url must be https (http only to loopback, for development), got {parts.scheme!r}"
            )
        host = parts.hostname
        if not host:
            raise ValueError(f"url {url!r} names no host")
        if parts.username is not None or parts.password is not None:
            # A credential in the URL would be stored, shown and logged with it; the signature
            # is what authenticates Switchboard to the endpoint.
            raise ValueError("url must not carry a user name or password")
        if parts.fragment:
            raise ValueError("url must not have a #fragment")
        if port == 0:
            raise ValueError("url names port 0")
        if literal_address(host) is None and not _HOST_NAME.fullmatch(_host_key(host)):
            raise ValueError(f"url host {host!r} is not a host name or an address")
        if parts.scheme == "http" and not is_loopback_host(host):
            raise ValueError(
                f"url must be https: http is only for loopback (localhost, 127.0.0.1, ::1), for"
                f" development, and {host!r} is not loopback"
            )
        return url

    @model_validator(mode="after")
    def _a_tool_spec_and_sensitive_only_over_https(self) -> HttpToolSpec:
        try:
            self.as_tool_spec()  # the parameters and sensitive names, checked as every tool's are
        except ValidationError as exc:
            raise ValueError(
                "; ".join(error["msg"].removeprefix("Value error, ") for error in exc.errors())
            ) from None
        if self.sensitive and self.scheme != "https":
            raise ValueError(
                f"sensitive parameters ({', '.join(self.sensitive)}) are only sent over https;"
                " this url is http"
            )
        return self

    @property
    def scheme(self) -> Literal["https", "http"]:
        return "https" if urlsplit(self.url).scheme == "https" else "http"

    @property
    def host(self) -> str:
        """The URL's host as written (a name, or an address without brackets)."""
        host = urlsplit(self.url).hostname
        assert host is not None  # the url validator saw to it
        return host

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or (443 if self.scheme == "https" else 80)

    @property
    def target(self) -> str:
        """The request target: the URL's path and query (`/` when it has no path)."""
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    @property
    def version(self) -> str:
        """A digest of the declaration without its secret: a changed URL, limit, side effect or
        schema is a new version; a rotated secret is the same one. Short enough for a tool
        step's tool_version (64 characters)."""
        declared = self.model_dump(mode="json", exclude={"secret"})
        return "http-" + digest_of(declared).removeprefix("sha256:")[:32]

    def as_tool_spec(self) -> ToolSpec:
        """The tool as the provider is offered it and the tool steps record it."""
        return ToolSpec(
            name=self.name,
            version=self.version,
            description=self.description,
            parameters=self.parameters,
            side_effect=SIDE_EFFECTS[self.side_effect],
            sensitive=self.sensitive,
        )

    def literal_refusal(self, allowed: AllowedHosts) -> str | None:
        """Why the URL's host, when it is an address, may not be reached (None for a name,
        which is judged by what it resolves to when the tool runs)."""
        address = literal_address(self.host)
        if address is None:
            return None
        return address_refusal(self.host, address, scheme=self.scheme, allowed=allowed)
