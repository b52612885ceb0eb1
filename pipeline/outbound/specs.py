"""Request bodies of outbound calling: trunks, campaigns, single calls, suppressions.

Each is frozen, forbids fields it does not know, bounds every field, and says in its error
what is wrong (the gateway answers 422 with it). What a body cannot know alone is decided
with the state it needs: whether a campaign's expiry is still ahead is
`campaign_refusal(spec, now)`. A `session` is the body of `POST /v1/sessions`, checked by
`pipeline.api.requests.SessionSpec` where it is stored, not here.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from pipeline.api.requests import SessionSpec, agent_as_session
from pipeline.call.capabilities import Ability, refusal
from pipeline.call.errors import NotSupported
from pipeline.dialects import capabilities_for
from pipeline.outbound.contacts import Contact, zone_refusal
from pipeline.outbound.retry import RetryPolicy
from pipeline.outbound.vars import ContactVars
from pipeline.outbound.window import Window, next_open, utc_instant
from pipeline.phone.numbers import E164Number
from pipeline.phone.sip import KeyAction, checked_keys

# A trunk's name: what a campaign or a call names it by, in a URL path.
TRUNK_NAME = re.compile(r"[a-z0-9_-]{1,64}")
# SIP credentials: RFC 3261 sets no bound; a carrier's are tens of characters.
MAXIMUM_CREDENTIAL_CHARS = 256
# A campaign's contacts in a JSON body; more come as CSV (pipeline.outbound.contacts), read row
# by row instead of held in one request.
MAXIMUM_JSON_CONTACTS = 1_000
# Calls a campaign places at once: a trunk's channels are the real bound, and a hundred
# concurrent calls is already a large contact centre's floor.
MAXIMUM_CONCURRENT_CALLS = 100
# The words left on an answering machine: a minute or so of speech (about 150 words).
MAXIMUM_VOICEMAIL_MESSAGE_CHARS = 1_000
MAXIMUM_CAMPAIGN_NAME_CHARS = 200
MAXIMUM_SUPPRESSION_REASON_CHARS = 200

# sips:host[:port]: a host name of dot-separated labels, an IPv4 address, or an IPv6 one in
# brackets; a port of up to five digits (checked to 1..65535 below).
_SIPS_URL = re.compile(r"sips:(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]+)(?::(?P<port>[0-9]{1,5}))?")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?")
# Names that never leave this machine or its network (RFC 6761 localhost, RFC 6762 mDNS,
# RFC 8375 home networks, and ICANN's reserved private-use ".internal").
_LOCAL_SUFFIXES = ("localhost", "local", "home.arpa", "internal")


def _control_characters(value: str) -> bool:
    return any(ord(char) < 0x20 or ord(char) == 0x7F for char in value)


def trunk_host_refusal(host: str) -> str | None:
    """Why a trunk's host cannot be dialled out through, or None. An IP literal must be a public
    address; a name must be a public one (two or more labels, the last made of letters). What
    the name resolves to is for the dialler to check when it connects."""
    literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(literal)
    except ValueError:
        address = None
    if address is not None:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not address.is_global:
            return f"{host} is not a public address (loopback, private, link-local or reserved)"
        if host.startswith("[") != isinstance(address, ipaddress.IPv6Address):
            return f"{host}: an IPv6 address goes in brackets, an IPv4 one does not"
        return None
    name = host.lower().removesuffix(".")
    labels = name.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels) or not labels[-1].isalpha():
        return f"{host!r} is not a public host name (such as sip.example.com) or IP address"
    if any(name == suffix or name.endswith("." + suffix) for suffix in _LOCAL_SUFFIXES):
        return f"{host} names this machine or a local network"
    return None


class TrunkSpec(BaseModel):
    """`POST /v1/trunks`: a SIP trunk outbound calls go out through, reached over TLS."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    url: str = Field(max_length=300)
    username: str = Field(min_length=1, max_length=MAXIMUM_CREDENTIAL_CHARS)
    # Kept out of reprs and logs; `.get_secret_value()` where it is stored.
    password: SecretStr
    caller_number: E164Number

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TRUNK_NAME.fullmatch(value):
            raise ValueError("name is 1 to 64 of a-z, 0-9, _ and -")
        return value

    @field_validator("url")
    @classmethod
    def _sips(cls, value: str) -> str:
        matched = _SIPS_URL.fullmatch(value)
        if matched is None:
            raise ValueError("url is sips:host or sips:host:port (SIP over TLS; sip: is not taken)")
        if matched["port"] is not None and not 1 <= int(matched["port"]) <= 65_535:
            raise ValueError(f"port {matched['port']} is not 1..65535")
        refusal = trunk_host_refusal(matched["host"])
        if refusal is not None:
            raise ValueError(refusal)
        return value

    @field_validator("username")
    @classmethod
    def _printable(cls, value: str) -> str:
        if _control_characters(value):
            raise ValueError("username has a control character")
        return value

    @field_validator("password")
    @classmethod
    def _printable_secret(cls, value: SecretStr) -> SecretStr:
        # Checked here rather than by Field bounds: on a SecretStr those speak of "items".
        if not 1 <= len(value.get_secret_value()) <= MAXIMUM_CREDENTIAL_CHARS:
            raise ValueError(f"password is 1 to {MAXIMUM_CREDENTIAL_CHARS} characters")
        if _control_characters(value.get_secret_value()):
            raise ValueError("password has a control character")
        return value


class VoicemailPolicy(BaseModel):
    """What a call does when a machine answers: hang up, or leave `message` after its greeting."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Literal["hangup", "leave_message"] = "hangup"
    message: str | None = Field(default=None, max_length=MAXIMUM_VOICEMAIL_MESSAGE_CHARS)

    @model_validator(mode="after")
    def _message_when_left(self) -> VoicemailPolicy:
        if self.action == "leave_message" and (self.message is None or not self.message.strip()):
            raise ValueError("leave_message needs the message to leave")
        if self.action == "hangup" and self.message is not None:
            raise ValueError("a message is left only with action leave_message")
        return self


def _trunk_name(value: str | None) -> str | None:
    if value is not None and not TRUNK_NAME.fullmatch(value):
        raise ValueError(f"{value[:70]!r} is not a trunk's name (1 to 64 of a-z, 0-9, _ and -)")
    return value


class CampaignSettings(BaseModel):
    """What a campaign dials with: a session to call its contacts with, through a trunk, in a
    window, retried by a policy, until it expires (a campaign's row keeps these; its contacts are
    rows of their own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=MAXIMUM_CAMPAIGN_NAME_CHARS)
    session: dict[str, Any]
    # None: the deployment's default trunk.
    trunk: str | None = None
    max_concurrent: int = Field(default=1, ge=1, le=MAXIMUM_CONCURRENT_CALLS, strict=True)
    window: Window | None = None
    retry: RetryPolicy = RetryPolicy()
    voicemail: VoicemailPolicy = VoicemailPolicy()
    expires_at: AwareDatetime | None = None
    # Keypad presses on its calls and what they do ("opt_out": never call this number again).
    keys: dict[str, KeyAction] = Field(default_factory=dict)
    # Created held: it dials once resumed (so a long list can be added a page at a time first).
    paused: bool = False

    _trunk = field_validator("trunk")(classmethod(lambda cls, value: _trunk_name(value)))
    _keys = field_validator("keys")(classmethod(lambda cls, value: checked_keys(value)))

    @model_validator(mode="before")
    @classmethod
    def _agent_names_the_session(cls, data: Any) -> Any:
        # A campaign's calls each fill the agent's version with their contact's vars.
        return agent_as_session(data)

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name is empty")
        return value


def _each_once(contacts: tuple[Contact, ...]) -> tuple[Contact, ...]:
    first: dict[str, int] = {}
    for index, contact in enumerate(contacts):
        if contact.to in first:
            raise ValueError(f"{contact.to} is contacts[{first[contact.to]}] and contacts[{index}]")
        first[contact.to] = index
    return contacts


class CampaignSpec(CampaignSettings):
    """`POST /v1/campaigns`: the campaign's settings and its first contacts (at most 1,000 in a
    JSON body; more are added a page at a time, `ContactsPage` or CSV)."""

    contacts: tuple[Contact, ...] = Field(min_length=1, max_length=MAXIMUM_JSON_CONTACTS)

    _once = field_validator("contacts")(classmethod(lambda cls, value: _each_once(value)))

    @model_validator(mode="after")
    def _every_contact_has_a_zone(self) -> CampaignSpec:
        for index, contact in enumerate(self.contacts):
            refusal = zone_refusal(contact, self.window)
            if refusal is not None:
                raise ValueError(f"contacts[{index}]: {refusal}")
        return self

    @property
    def settings(self) -> CampaignSettings:
        """What the campaign's row keeps."""
        return CampaignSettings.model_validate(self.model_dump(exclude={"contacts"}))


class ContactsPage(BaseModel):
    """`POST /v1/campaigns/{id}/contacts`: more contacts for a campaign, a page at a time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    contacts: tuple[Contact, ...] = Field(min_length=1, max_length=MAXIMUM_JSON_CONTACTS)

    _once = field_validator("contacts")(classmethod(lambda cls, value: _each_once(value)))


def campaign_refusal(spec: CampaignSpec, now: datetime) -> str | None:
    """Why a campaign cannot start at `now`, or None: it has expired, or its window does not
    open for any of its contacts before it expires."""
    if spec.expires_at is None:
        return None
    now = utc_instant(now)
    if spec.expires_at <= now:
        return f"expires_at {spec.expires_at.isoformat()} is not after now ({now.isoformat()})"
    if spec.window is not None:
        zones = {contact.zone for contact in spec.contacts}
        if all(next_open(spec.window, zone, now) >= spec.expires_at for zone in zones):
            return f"the window does not open for any contact before expires_at {spec.expires_at.isoformat()}"
    return None


def outbound_refusal(session: SessionSpec) -> NotSupported | None:
    """Why a session of this spec cannot call out (its provider places no calls), or None."""
    cannot = refusal(capabilities_for(session.provider), Ability.OUTBOUND_CALLS)
    return None if cannot is None else NotSupported(cannot.code, cannot.message)


class CallSpec(BaseModel):
    """`POST /v1/calls`: one outbound call, to `to`, with a session filled with `vars`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    to: E164Number
    trunk: str | None = None
    session: dict[str, Any]
    vars: ContactVars = {}
    # Keypad presses on the call and what they do ("opt_out": never call this number again).
    keys: dict[str, KeyAction] = Field(default_factory=dict)

    _trunk = field_validator("trunk")(classmethod(lambda cls, value: _trunk_name(value)))
    _keys = field_validator("keys")(classmethod(lambda cls, value: checked_keys(value)))


class SuppressionSpec(BaseModel):
    """`POST /v1/suppressions`: a number no campaign calls again, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: E164Number
    reason: str | None = Field(default=None, max_length=MAXIMUM_SUPPRESSION_REASON_CHARS)
