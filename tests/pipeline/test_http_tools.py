"""HTTP tool declarations and the address rule: what a tool URL may be, and which addresses it
may reach."""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.call.catalog import SideEffect
from pipeline.call.errors import BadInput
from pipeline.call.http_tools import AllowedHosts, HttpToolSpec, address_refusal, may_send_again
from pipeline.platform.config import settings_from

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
PARAMETERS = {
    "type": "object",
    "properties": {"order": {"type": "string"}, "card": {"type": "string"}},
    "required": ["order"],
}
NOTHING_ALLOWED = AllowedHosts()


def declared(**changes: Any) -> HttpToolSpec:
    fields: dict[str, Any] = {
        "name": "lookup_order",
        "description": "Look an order up.",
        "parameters": PARAMETERS,
        "url": "https://orders.example.com/tools/lookup",
        "secret": SECRET,
        "side_effect": "read_only",
        **changes,
    }
    return HttpToolSpec.model_validate(fields)


def refusal_of(**changes: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        declared(**changes)
    return str(caught.value)


def test_a_declaration_is_the_tool_spec_the_provider_sees() -> None:
    """as_tool_spec carries the name, description and parameters, with the mapped side effect."""
    spec = declared(side_effect="not_idempotent", sensitive=("card",)).as_tool_spec()
    assert spec.name == "lookup_order"
    assert spec.parameters == PARAMETERS
    assert spec.side_effect is SideEffect.EXTERNAL
    assert spec.sensitive == ("card",)
    assert declared(side_effect="read_only").as_tool_spec().side_effect is SideEffect.READ_ONLY
    assert declared(side_effect="idempotent").as_tool_spec().side_effect is SideEffect.WRITES


def test_only_a_not_idempotent_tool_is_never_sent_again() -> None:
    """After a crash a read_only or idempotent call may be re-sent; a not_idempotent one may not."""
    assert may_send_again("read_only") and may_send_again("idempotent")
    assert not may_send_again("not_idempotent")


def test_the_version_is_the_declaration_without_its_secret() -> None:
    """A changed URL is a new version; a rotated secret is the same one; it fits a tool step."""
    first = declared()
    rotated = declared(secret="whsec_" + base64.b64encode(b"r" * 32).decode())
    moved = declared(url="https://orders.example.com/tools/v2/lookup")
    assert first.version == rotated.version
    assert first.version != moved.version
    assert first.version != declared(timeout_ms=5_000).version
    assert first.as_tool_spec().version == first.version
    assert len(first.version) <= 64  # tool_steps.tool_version


def test_http_is_only_for_loopback_and_says_it_is_for_development() -> None:
    """http to 127.0.0.1, ::1 or localhost is the development case; anything else must be https."""
    for url in ("http://127.0.0.1:8080/tool", "http://[::1]:8080/tool", "http://localhost/tool"):
        assert declared(url=url).scheme == "http"
    message = refusal_of(url="http://orders.example.com/tool")
    assert "https" in message and "development" in message
    assert "development" in refusal_of(url="http://10.0.0.1/tool")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ftp://orders.example.com/x", "must be https"),
        ("https:///x", "names no host"),
        ("https://user:pw@orders.example.com/x", "user name or password"),
        ("https://orders.example.com/x#part", "fragment"),
        ("https://orders.example.com:99999/x", "does not parse"),
        ("https://bad_host!/x", "not a host name"),
    ],
)
def test_a_url_that_is_not_an_endpoint_is_refused(url: str, said: str) -> None:
    """Other schemes, a missing host, credentials, fragments, bad ports and hosts are refused."""
    assert said in refusal_of(url=url)


def test_only_post_is_a_method() -> None:
    """The arguments travel in the signed body: POST is the one method."""
    assert declared(method="POST").method == "POST"
    refusal_of(method="PUT")
    refusal_of(method="GET")


def test_a_secret_must_be_a_standard_webhooks_secret_and_is_never_quoted() -> None:
    """whsec_ and 24 to 64 bytes of base64; the refusal does not show the value it refused."""
    for secret in (
        "plain-secret-value",
        "whsec_!!notbase64!!",
        "whsec_" + base64.b64encode(b"s" * 8).decode(),
    ):
        message = refusal_of(secret=secret)
        assert "secret" in message
        assert secret not in message
    assert SECRET not in refusal_of(parameters={"type": "array"})
    assert SECRET not in repr(declared())


def test_the_time_limit_is_within_the_tool_ceiling() -> None:
    """timeout_ms is 100 ms to the runner's 30 s ceiling; 10 s when not given."""
    assert declared().timeout_ms == 10_000
    assert declared(timeout_ms=30_000).timeout_ms == 30_000
    refusal_of(timeout_ms=30_001)
    refusal_of(timeout_ms=99)


def test_parameters_are_checked_as_every_tool_s_are() -> None:
    """An object schema is required, sensitive names must be top-level strings, and the side
    effect is one of the three an endpoint declares."""
    assert '"type": "object"' in refusal_of(parameters={"type": "array"})
    assert "sensitive parameter 'order_total'" in refusal_of(sensitive=("order_total",))
    assert "side_effect" in refusal_of(side_effect="writes")


def test_sensitive_parameters_are_never_declared_over_http() -> None:
    """A tool with sensitive parameters must be https, even to loopback."""
    message = refusal_of(url="http://127.0.0.1:8080/pay", sensitive=("card",))
    assert "only sent over https" in message
    assert declared(url="https://127.0.0.1:8443/pay", sensitive=("card",)).sensitive == ("card",)


def test_the_target_and_port_come_from_the_url() -> None:
    """The request target is the path and query; the port is the URL's or the scheme's."""
    spec = declared(url="https://orders.example.com/tools/lookup?tenant=7")
    assert (spec.host, spec.port, spec.target) == ("orders.example.com", 443, "/tools/lookup?tenant=7")
    local = declared(url="http://[::1]:8080")
    assert (local.host, local.port, local.target) == ("::1", 8080, "/")


def refused(
    address: str, *, scheme: str = "https", host: str = "tools.example.com", allowed: str = ""
) -> str | None:
    return address_refusal(
        host, ipaddress.ip_address(address), scheme=scheme, allowed=AllowedHosts.parse(allowed)
    )


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.1.2.3", "a private address"),
        ("192.168.0.10", "a private address"),
        ("172.16.5.4", "a private address"),
        ("fd12::1", "a private address"),
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("169.254.169.254", "the cloud metadata address"),
        ("fd00:ec2::254", "the cloud metadata address"),
        ("169.254.10.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("240.0.0.1", "a private address"),  # reserved; Python files 240/4 among the private
        ("100.64.0.1", "not globally routable"),
        ("::ffff:10.0.0.1", "which carries 10.0.0.1, a private address"),
        ("::ffff:169.254.169.254", "which carries 169.254.169.254, the cloud metadata address"),
        ("2002:a00:1::", "which carries 10.0.0.1, a private address"),
        ("64:ff9b::7f00:1", "which carries 127.0.0.1, a loopback address"),
    ],
)
def test_an_address_off_the_public_internet_is_refused(address: str, kind: str) -> None:
    """Private, loopback, link-local, metadata, multicast, unspecified, reserved and IPv6 wrappings
    of them are refused, the refusal naming the address, what it is and the setting."""
    message = refused(address)
    assert message is not None
    assert kind in message
    assert "SWITCHBOARD_TOOL_ALLOW_HOSTS" in message


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "::ffff:8.8.8.8"]
)
def test_a_public_address_is_reached(address: str) -> None:
    """A globally routable address (IPv4-mapped too) is not refused."""
    assert refused(address) is None


def test_http_reaches_loopback_only() -> None:
    """Over http loopback is the development case; a public or private address is refused."""
    assert refused("127.0.0.1", scheme="http", host="localhost") is None
    assert refused("::1", scheme="http", host="localhost") is None
    message = refused("93.184.215.14", scheme="http", host="localhost")
    assert message is not None and "http is only for loopback (development)" in message
    assert refused("10.0.0.1", scheme="http", host="localhost", allowed="10.0.0.0/8") is not None


def test_the_deployment_allows_hosts_by_name_and_by_network() -> None:
    """An allowed name reaches whatever it resolves to; an allowed network the addresses in it
    (IPv4-mapped ones too); nothing else is let through."""
    allowed = "CRM.internal., 10.20.0.0/16, 127.0.0.1"
    assert refused("10.9.9.9", host="crm.internal", allowed=allowed) is None
    assert refused("10.20.1.1", allowed=allowed) is None
    assert refused("::ffff:10.20.1.1", allowed=allowed) is None
    assert refused("127.0.0.1", host="localhost", allowed=allowed) is None
    assert refused("10.21.0.1", allowed=allowed) is not None
    assert refused("169.254.169.254", allowed=allowed) is not None


def test_the_setting_is_read_into_allowed_hosts() -> None:
    """SWITCHBOARD_TOOL_ALLOW_HOSTS is parsed once; a bad entry stops the process, named."""
    settings = settings_from({"SWITCHBOARD_TOOL_ALLOW_HOSTS": "crm.internal, 10.0.0.0/8,fd00::/8"})
    assert settings.tool_allow_hosts.names == ("crm.internal",)
    assert [str(n) for n in settings.tool_allow_hosts.networks] == ["10.0.0.0/8", "fd00::/8"]
    assert settings_from({}).tool_allow_hosts == AllowedHosts()
    with pytest.raises(BadInput) as caught:
        settings_from({"SWITCHBOARD_TOOL_ALLOW_HOSTS": "crm.internal, not a host"})
    assert "SWITCHBOARD_TOOL_ALLOW_HOSTS" in str(caught.value) and "'not a host'" in str(caught.value)


def test_a_literal_address_is_judged_at_declaration() -> None:
    """literal_refusal judges a URL that spells an address; a name waits for its resolution."""
    assert declared(url="https://10.0.0.1/x").literal_refusal(NOTHING_ALLOWED) is not None
    assert declared(url="https://[::ffff:10.0.0.1]/x").literal_refusal(NOTHING_ALLOWED) is not None
    assert declared(url="https://10.0.0.1/x").literal_refusal(AllowedHosts.parse("10.0.0.0/8")) is None
    assert declared(url="http://127.0.0.1:8080/x").literal_refusal(NOTHING_ALLOWED) is None
    assert declared().literal_refusal(NOTHING_ALLOWED) is None
