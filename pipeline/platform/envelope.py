"""What travels on the queues: event envelopes (gateway → workers) and `ToGateway` batches
(workers → a gateway's control queue)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.privacy.policy import ALWAYS_REDACTED, Kind


class EventEnvelope(BaseModel):
    """One durable event of one session, numbered by the gateway that received it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    seq: int = Field(ge=1)
    generation: int = Field(ge=1)
    gateway_id: str
    # Wall-clock seconds at the gateway when the frame arrived: the transitions' `now`.
    received_at: float
    event: dict[str, Any]
    # The W3C trace context of the gateway's span of this event (only when tracing is on): the
    # worker's span that applies it is that span's child (pipeline.platform.tracing).
    traceparent: str | None = None


class SendControl(BaseModel):
    """Write this control on the session's sideband (once per id, same generation only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["control"] = "control"
    id: str
    control: dict[str, Any]


class OpenSideband(BaseModel):
    """Open (or re-open) the sideband of the session's provider call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["open_sideband"] = "open_sideband"
    id: str
    call_id: str
    # Which provider's sideband: a Live session's is attached by its session id.
    provider: Literal["realtime", "live"] = "realtime"
    # The kinds the gateway's boundary redacts on this sideband (the session's policy); a
    # directive without them gets what every policy redacts.
    redact: tuple[Kind, ...] = tuple(sorted(ALWAYS_REDACTED))
    # The keypad keys the call maps to an action: the only digits the boundary keeps pressed.
    keys: tuple[str, ...] = ()
    # The tools' sensitive parameters, and the session's public key they are sealed with
    # (urlsafe base64; None when the session has no key pair: they are then masked whole).
    sealed: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    sealing_key: str | None = None
    # The route a phone call came in on ("" for any other call): the gateway's live-call gauge
    # counts the call under it for as long as it holds the sideband, and no longer.
    route_id: str = ""
    # The model that serves the call, which its traces name ("" from a worker of a release
    # before models were chosen per session: the gateway's default for the provider).
    model: str = ""


class CloseCall(BaseModel):
    """Close the sideband; hang up the provider call when asked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["close_call"] = "close_call"
    id: str
    call_id: str | None
    reason: str
    hangup: bool
    provider: Literal["realtime", "live"] = "realtime"


class TransferCall(BaseModel):
    """Transfer the session's phone call to `to` (the provider's `refer`), once per id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["transfer_call"] = "transfer_call"
    id: str
    call_id: str
    to: str
    provider: Literal["realtime", "live"] = "realtime"


class CollectDigits(BaseModel):
    """Keep the caller's key presses for keypad collection `number` in the boundary's memory,
    until the end key or `max` digits, and submit them as one sealed event (`stop`: forget the
    collection and any presses it holds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["collect_digits"] = "collect_digits"
    id: str
    number: int
    max: int = 0
    end: str | None = None
    stop: bool = False


class DialTrunk(BaseModel):
    """The SIP trunk a call goes out through, as a dial directive names it: never its password,
    which the gateway that dials asks for sealed to a key of its own (`Trunk`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    url: str
    username: str
    caller_number: str


class Trunk(DialTrunk):
    """A trunk as the provider is given it: its password in the clear only here, in the memory
    of the gateway that dials, opened from what a worker sealed to that gateway's key (it is
    stored encrypted, and crosses Redis sealed)."""

    password: str = Field(repr=False)


class PlaceCall(BaseModel):
    """Dial the session's call going out, once: the gateway claims `call` (the call's id, also
    the provider's idempotency key) before it asks the provider, so a directive published twice
    dials once. `trunk` is None when the call's trunk is gone: the dial fails, saying so.

    The provider dials at once and replays nothing to a sideband that attaches late, so the
    gateway that dialled opens the call's sideband itself, as `sideband` says (its `call_id` is
    the provider's answer), rather than wait for a worker to apply the attach: a worker killed
    holding that attach would hold the sideband back until its message came round again, and
    the call's ringing, answer or failure would be gone by then."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["place_call"] = "place_call"
    id: str
    call: str
    to: str
    trunk: DialTrunk | None
    # What the provider session is created with (its startup configuration; the gateway adds
    # the model), and which provider.
    session: dict[str, Any]
    provider: Literal["realtime", "live"] = "live"
    sideband: OpenSideband | None = None


class Reply(BaseModel):
    """The answer to an API request the gateway is waiting on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["reply"] = "reply"
    id: str
    request_id: str
    status: int
    body: dict[str, Any]


ToGatewayItem = Annotated[
    SendControl | OpenSideband | CloseCall | TransferCall | CollectDigits | PlaceCall | Reply,
    Field(discriminator="kind"),
]


class ToGateway(BaseModel):
    """Everything one transaction tells one gateway about one session, in apply order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    generation: int
    items: tuple[ToGatewayItem, ...]
    # The session's applied seq when the batch was published: the gateway stops holding the
    # events up to it for retransmission.
    applied_seq: int | None = None
    # The W3C trace context of the worker's span that published it (only when tracing is on):
    # the gateway's spans of its controls are that span's children (pipeline.platform.tracing).
    traceparent: str | None = None


# ── a message as the queues store it ────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class NumberedMessage:
    """A Dramatiq message as the gateway enqueues it: its body is `parts` joined by the seqs
    its counter `seq_key` gives (one seq between each two parts, consecutive), numbered and
    stored in the same round trip; a message with one part is not numbered. `floor`: the
    seqs are above it even if the counter is not."""

    queue_name: str
    message_id: str
    parts: tuple[bytes, ...]
    seq_key: str = ""
    floor: int = 0

    @property
    def seqs_asked(self) -> int:
        return len(self.parts) - 1


def numbered_body(
    queue_name: str, actor_name: str, rests: list[dict[str, Any]], message_id: str, timestamp_ms: int
) -> tuple[bytes, ...]:
    """Dramatiq's encoding of a message for one or more events of one session, each an
    `EventEnvelope` that starts with its `seq` and goes on with its `rest`: the body's parts
    around the seqs. One event is the keyword argument `envelope`; several, `envelopes` (a list,
    in seq order)."""
    outer = _outer(queue_name, actor_name, message_id, timestamp_ms)[:-1]
    rests_encoded = [json.dumps(rest, separators=(",", ":"))[1:] for rest in rests]
    if len(rests) == 1:
        return (f'{outer},"kwargs":{{"envelope":{{"seq":'.encode(), f",{rests_encoded[0]}}}}}".encode())
    parts = [f'{outer},"kwargs":{{"envelopes":[{{"seq":']
    parts += [f',{rest},{{"seq":' for rest in rests_encoded[:-1]]
    parts.append(f",{rests_encoded[-1]}]}}}}")
    return tuple(part.encode() for part in parts)


def plain_body(
    queue_name: str, actor_name: str, kwargs: dict[str, Any], message_id: str, timestamp_ms: int
) -> bytes:
    """Dramatiq's encoding of a message with these keyword arguments."""
    outer = _outer(queue_name, actor_name, message_id, timestamp_ms)
    return f'{outer[:-1]},"kwargs":{json.dumps(kwargs, separators=(",", ":"))}}}'.encode()


def _outer(queue_name: str, actor_name: str, message_id: str, timestamp_ms: int) -> str:
    # The first enqueue of a message may use its id as the broker's storage id too (Dramatiq
    # gives a retried copy a storage id of its own).
    return json.dumps(
        {
            "queue_name": queue_name,
            "actor_name": actor_name,
            "args": [],
            "options": {"redis_message_id": message_id},
            "message_id": message_id,
            "message_timestamp": timestamp_ms,
        },
        separators=(",", ":"),
    )
