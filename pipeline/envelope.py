"""What travels on the queues: event envelopes (gateway → workers) and outbound batches
(workers → a gateway's control queue)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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


class Reply(BaseModel):
    """The answer to an API request the gateway is waiting on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["reply"] = "reply"
    id: str
    request_id: str
    status: int
    body: dict[str, Any]


Outbound = Annotated[
    SendControl | OpenSideband | CloseCall | TransferCall | Reply, Field(discriminator="kind")
]


class OutboundBatch(BaseModel):
    """Everything one transaction tells one gateway about one session, in apply order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    generation: int
    items: tuple[Outbound, ...]
    # The session's applied seq when the batch was published: the gateway stops holding the
    # events up to it for retransmission.
    applied_seq: int | None = None
