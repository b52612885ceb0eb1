"""Outbound SIP calls on the simulated Live API: the dial plan, the create's rules, the dial record.

A `POST /v1/live/sessions` whose transport is `{type: "sip", destination, trunk}` places a
phone call through the caller's own trunk (LIVE_PROTOCOL.md §2.2). The body's shape is the
oracle's (`live_oracle.SipCreateParams`); what the provider checks beyond it is here
(`outbound_refusal`): E.164 numbers, a `sips:` trunk on a public host, digest credentials.

What happens at a number is the dial plan's business (`DialPlan`): a person who follows a Live
call script, a voicemail machine, or a call that fails (busy, no answer, refused by the
provider). The session that carries the call is `simulator.live_outbound.OutboundSession`;
every call placed is kept in a `DialLedger` (`GET /_sim/live/dials`) for tests and benchmarks.
"""

from __future__ import annotations

import ipaddress
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    RootModel,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from simulator.live_script import LiveScript, load_live_script

# Ringing is limited to about 3 minutes (§2.2, §4): a call still ringing then fails, no_answer.
RINGING_LIMIT_MS = 180_000
# How long a number rings before it is answered, unless its plan entry says otherwise.
DEFAULT_RING_MS = 1_000
# The silence between a voicemail greeting's last word and the start of the recording.
DEFAULT_BEEP_MS = 500
# A voicemail machine records this long after the beep, then hangs up.
MACHINE_RECORDS_MS = 30_000
# A call dials when its first sideband attaches, or this long after the create if none does
# (a real provider replays nothing to a late sideband, so the tests need a fixed point).
DIAL_WITHOUT_SIDEBAND_MS = 2_000
# The `transport.failed` code of a plan's "failed" entry that names none.
DEFAULT_FAILURE_CODE = "provider_invite_failed"
# OpenAPI 2.3.0's bounds on the trunk's digest credentials, in UTF-8 bytes.
MAXIMUM_USERNAME_BYTES = 256
MAXIMUM_PASSWORD_BYTES = 4_096
# The port of a `sips:` URI that names none (SIP over TLS).
DEFAULT_SIPS_PORT = 5061

# E.164: a plus, then 2 to 15 digits, the first of them not 0.
E164 = re.compile(r"\+[1-9][0-9]{1,14}")
# A dial plan key: an exact number, a prefix of one ending in `*`, or `*` alone (the catch-all).
PLAN_PREFIX = re.compile(r"\+[1-9][0-9]{0,14}\*")
CATCH_ALL = "*"
# `sips:host[:port][;transport=tcp]`: no userinfo, path, headers or other parameters; an IPv6
# host in brackets.
PROVIDER_URL = re.compile(
    r"sips:(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r"(?::(?P<port>[0-9]{1,5}))?(?:;transport=tcp)?"
)
# Names that resolve inside the caller's own network, never on the public internet.
LOCAL_NAME_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".lan")
CREDENTIAL_FORBIDDEN = ("\r", "\n", "\0")

DialResult = Literal["human", "voicemail", "busy", "no_answer", "failed", "canceled"]
"""What became of a dial: answered by a person or a machine, failed with that code, or
`canceled` (the session ended while the number was still ringing, or before it was dialled)."""


class _Strict(BaseModel):
    # A misspelt field in a hand-written plan must fail loudly, not be ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnsweredByPerson(_Strict):
    """A person answers after `ring_ms` and follows the Live call script `script` (a packaged
    name such as "live_callee", or a file): its `caller` lines are what the callee says, its
    `model` lines the model's answers, its timing and switches the session's."""

    outcome: Literal["human"]
    script: str = Field(min_length=1)
    ring_ms: int = Field(default=DEFAULT_RING_MS, ge=0)
    # The create's answer is sent this long after the call was placed (a slow provider, or what
    # a gateway killed meanwhile never hears); a repeat under the same Idempotency-Key is
    # answered at once.
    answer_after_ms: int = Field(default=0, ge=0)


class AnsweredByMachine(_Strict):
    """A voicemail machine answers after `ring_ms`, says `greeting` (a transcript fragment a
    word, at the session script's `fragment_ms`), is silent for `beep_ms`, then records what
    the model says for `record_ms` and hangs up (`session.closed` with `remote_hangup`)."""

    outcome: Literal["voicemail"]
    greeting: str = Field(min_length=1, pattern=r"\S")
    beep_ms: int = Field(default=DEFAULT_BEEP_MS, ge=0)
    ring_ms: int = Field(default=DEFAULT_RING_MS, ge=0)
    record_ms: int = Field(default=MACHINE_RECORDS_MS, ge=0)


class NotAnswered(_Strict):
    """The call fails `after_ms` after ringing starts: `transport.failed` with the code `busy`,
    `no_answer`, or, for `failed`, `code` (default `provider_invite_failed`); the session then
    closes with `remote_hangup`."""

    outcome: Literal["busy", "no_answer", "failed"]
    after_ms: int = Field(ge=0)
    code: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _code_only_when_failed(self) -> NotAnswered:
        if self.code is not None and self.outcome != "failed":
            raise ValueError(f'"code" belongs to a "failed" entry; a {self.outcome} call fails with its own')
        return self

    @property
    def failure_code(self) -> str:
        """The `transport.failed` error code this entry ends with."""
        if self.outcome == "failed":
            return self.code or DEFAULT_FAILURE_CODE
        return self.outcome


Answerer = AnsweredByPerson | AnsweredByMachine | NotAnswered
"""Who (or what) is at a number: a dial plan's entry."""
DialOutcome = Annotated[Answerer, Field(discriminator="outcome")]


class DialPlan(RootModel[dict[str, DialOutcome]]):
    """What happens at each number: keys are an exact E.164 number, a prefix ending in `*`
    (`"+1555*"`) or `*` alone, the catch-all; an exact key beats a prefix, a longer prefix a
    shorter one. A person's script is loaded when the plan is (a plan naming a missing or
    invalid script is refused), relative to the plan file's folder first, then as the
    simulator's `--live-script` is."""

    model_config = ConfigDict(frozen=True)
    _scripts: dict[str, LiveScript] = PrivateAttr(default_factory=dict)

    @field_validator("root")
    @classmethod
    def _keys_are_numbers_or_prefixes(cls, plan: dict[str, Any]) -> dict[str, Any]:
        for key in plan:
            if key != CATCH_ALL and not E164.fullmatch(key) and not PLAN_PREFIX.fullmatch(key):
                raise ValueError(
                    f"key {key!r} is not an E.164 number (+14155550123), a prefix ending in * "
                    '("+1555*") or "*"'
                )
        return plan

    @model_validator(mode="after")
    def _load_scripts(self, info: ValidationInfo) -> DialPlan:
        base = (info.context or {}).get("base")
        for key, entry in self.root.items():
            if isinstance(entry, AnsweredByPerson) and entry.script not in self._scripts:
                try:
                    self._scripts[entry.script] = _load_script(entry.script, base)
                except (OSError, ValidationError) as exc:
                    raise ValueError(f"entry {key!r}: script {entry.script!r}: {exc}") from None
        return self

    def resolve(self, destination: str) -> Answerer | None:
        """The entry for a number: exact, else the longest matching prefix, else the catch-all;
        None when the plan does not cover it."""
        if destination in self.root:
            return self.root[destination]
        prefixes = [key for key in self.root if key.endswith("*") and key != CATCH_ALL]
        matching = [key for key in prefixes if destination.startswith(key[:-1])]
        if matching:
            return self.root[max(matching, key=len)]
        return self.root.get(CATCH_ALL)

    def script(self, entry: AnsweredByPerson) -> LiveScript:
        """The Live call script a person of this plan follows (loaded with the plan)."""
        return self._scripts[entry.script]


def _load_script(name: str, base: Path | None) -> LiveScript:
    if base is not None:
        for candidate in (base / name, base / f"{name}.json"):
            if candidate.is_file():
                return load_live_script(candidate)
    return load_live_script(name)


def parse_dial_plan(text: str | bytes, *, base: Path | None = None) -> DialPlan:
    """A dial plan from its JSON text (raises pydantic.ValidationError when it is not one);
    `base` is where a script named by a relative path is looked for first."""
    return DialPlan.model_validate_json(text, context={"base": base})


def load_dial_plan(path: str | Path) -> DialPlan:
    """A dial plan from a JSON file; its scripts are looked for beside it first."""
    path = Path(path)
    return parse_dial_plan(path.read_bytes(), base=path.parent)


# ── the create's rules ──────────────────────────────────────────────────────────


class OutboundRefusal(NamedTuple):
    """Why an outbound create is refused: 400 `invalid_value` naming `param`."""

    param: str
    message: str


def outbound_refusal(transport: dict[str, Any]) -> OutboundRefusal | None:
    """What the provider refuses in a SIP transport the oracle has passed (§2.2), or None."""
    destination: str = transport["destination"]
    if destination.lower().startswith(("sip:", "sips:", "tel:")) or "@" in destination:
        return OutboundRefusal("transport.destination", "SIP URI destinations are not supported.")
    if not E164.fullmatch(destination):
        return _not_e164("transport.destination")
    trunk = transport["trunk"]
    address = PROVIDER_URL.fullmatch(trunk["provider_url"])
    if address is None:
        return OutboundRefusal(
            "transport.trunk.provider_url",
            "Invalid value for 'transport.trunk.provider_url': expected sips:host[:port][;transport=tcp] "
            "(TLS signaling is required; no userinfo, path, headers or other parameters).",
        )
    port = address.group("port")
    if port is not None and not 1 <= int(port) <= 65_535:
        return OutboundRefusal(
            "transport.trunk.provider_url", "Invalid value for 'transport.trunk.provider_url': bad port."
        )
    if _is_local(address.group("host")):
        return OutboundRefusal(
            "transport.trunk.provider_url", "Private or loopback trunk hosts are rejected."
        )
    auth = trunk["auth"]
    username, password = auth["username"], auth["password"]
    if not username.strip() or len(username.encode()) > MAXIMUM_USERNAME_BYTES or _has_control(username):
        return OutboundRefusal(
            "transport.trunk.auth.username",
            "Invalid value for 'transport.trunk.auth.username': it must contain a non-whitespace "
            f"character, be at most {MAXIMUM_USERNAME_BYTES} bytes, and contain no CR, LF or NUL.",
        )
    if not password or len(password.encode()) > MAXIMUM_PASSWORD_BYTES or _has_control(password):
        return OutboundRefusal(
            "transport.trunk.auth.password",
            "Invalid value for 'transport.trunk.auth.password': it must not be empty, be at most "
            f"{MAXIMUM_PASSWORD_BYTES} bytes, and contain no CR, LF or NUL.",
        )
    if not E164.fullmatch(trunk["caller_number"]):
        return _not_e164("transport.trunk.caller_number")
    return None


def trunk_host(provider_url: str) -> str:
    """The host of a `sips:` trunk URI that `outbound_refusal` has passed, lower-cased."""
    address = PROVIDER_URL.fullmatch(provider_url)
    assert address is not None  # checked by outbound_refusal
    return address.group("host").lower()


def _not_e164(param: str) -> OutboundRefusal:
    return OutboundRefusal(
        param, f"Invalid value for '{param}': expected an E.164 phone number such as +14155550123."
    )


def _has_control(text: str) -> bool:
    return any(character in text for character in CREDENTIAL_FORBIDDEN)


def _is_local(host: str) -> bool:
    """Whether a trunk host is a local name or a literal address the public cannot reach:
    private, loopback, link-local, unspecified, multicast, broadcast or otherwise reserved."""
    literal = host[1:-1] if host.startswith("[") else host
    try:
        address = ipaddress.ip_address(literal)
    except ValueError:
        name = host.lower().rstrip(".")
        # A name of one label is resolved by the caller's search domains: local too.
        return name == "localhost" or name.endswith(LOCAL_NAME_SUFFIXES) or "." not in name
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


# ── the dial record ─────────────────────────────────────────────────────────────


@dataclass
class DialRecord:
    """One outbound call, from its create to its end. Times are UNIX seconds."""

    session_id: str
    destination: str
    caller_number: str
    trunk_host: str
    planned: str
    """What the plan says happens at the number (an unplanned number: "human")."""
    idempotency_key: str | None
    created_at: float
    repeats: int = 0
    """Creates that came again with the same `Idempotency-Key` and dialled nothing."""
    dialed_at: float | None = None
    outcome: DialResult | None = None
    failure_code: str | None = None
    answered_at: float | None = None
    ended_at: float | None = None
    close_reason: str | None = None
    message: str | None = None
    """On a voicemail: what the model said after the greeting (its output transcript)."""

    def as_json(self) -> dict[str, Any]:
        """The record as one entry of `GET /_sim/live/dials`."""
        return {
            "session_id": self.session_id,
            "destination": self.destination,
            "caller_number": self.caller_number,
            "trunk_host": self.trunk_host,
            "planned": self.planned,
            "idempotency_key": self.idempotency_key,
            "repeats": self.repeats,
            "created_at": self.created_at,
            "dialed_at": self.dialed_at,
            "outcome": self.outcome,
            "failure_code": self.failure_code,
            "answered_at": self.answered_at,
            "ended_at": self.ended_at,
            "close_reason": self.close_reason,
            "message": self.message,
        }


@dataclass
class RememberedCreate:
    """A create made with an `Idempotency-Key`: its body, and the answer a repeat gets."""

    body: dict[str, Any]
    answer: dict[str, Any]
    record: DialRecord


@dataclass
class DialLedger:
    """Every outbound call placed in the simulator's life, the creates refused, and how many
    calls were between create and end at once (`concurrency`: `[t, n]` at every change)."""

    dials: list[DialRecord] = field(default_factory=list)
    refused: int = 0
    max_concurrent: int = 0
    concurrency: list[tuple[float, int]] = field(default_factory=list)
    _open: int = 0
    _by_key: dict[str, RememberedCreate] = field(default_factory=dict)

    def opened(self, record: DialRecord) -> None:
        """A call was placed."""
        self.dials.append(record)
        self._count(+1)

    def ended(self, record: DialRecord) -> None:
        """A call's session ended (`record.ended_at` is set)."""
        self._count(-1)

    def _count(self, change: int) -> None:
        self._open += change
        self.max_concurrent = max(self.max_concurrent, self._open)
        self.concurrency.append((time.time(), self._open))

    def recall(self, key: str) -> RememberedCreate | None:
        """The create first made with this `Idempotency-Key`, if any."""
        return self._by_key.get(key)

    def remember(self, key: str, body: dict[str, Any], answer: dict[str, Any], record: DialRecord) -> None:
        """Keep a create's answer for a repeat with the same key."""
        self._by_key[key] = RememberedCreate(body=body, answer=answer, record=record)

    def as_json(self) -> dict[str, Any]:
        """The ledger as the `GET /_sim/live/dials` body."""
        return {
            "dials": [record.as_json() for record in self.dials],
            "max_concurrent": self.max_concurrent,
            "concurrency": [[t, n] for t, n in self.concurrency],
            "refused": self.refused,
        }
