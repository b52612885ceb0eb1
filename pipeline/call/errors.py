"""The one error tree of Switchboard.

SwitchboardError
├── Refusal                  a request that is wrong for the state it found; never retried
│   ├── NotFound             what it names does not exist (404)
│   │   ├── SessionNotFound
│   │   ├── RouteNotFound
│   │   ├── PhoneCallNotFound
│   │   ├── KeyNotFound
│   │   ├── DeadLetterNotFound
│   │   ├── TrunkNotFound        no SIP trunk of that name (or none at all)
│   │   ├── CallNotFound         no call going out of that id
│   │   ├── CampaignNotFound
│   │   └── SuppressionNotFound  the number is not on the do-not-call list
│   ├── SessionExists
│   ├── SessionEnded         the session is over (`status`, `end_reason` in the answer)
│   ├── SessionNotConnected  no call yet: created, or its connect under way
│   ├── CallReconnected      the call's sideband was opened again before the request's turn
│   ├── AdmissionRefused
│   ├── ProviderCallIdConflict  the same call id requested with a different identity
│   ├── ToolStepTerminal        a finished tool step cannot start again
│   ├── ToolOutcomeConflict     a finished tool step cannot take a different outcome
│   ├── UnreplayableDeadLetter  a dead letter whose body is not a message
│   ├── NotSupported            the session's provider cannot (its code names the provider)
│   ├── NumberSuppressed        a call to a number on the do-not-call list
│   ├── OutboundCapacity        the deployment places no more calls now
│   ├── LiveModelAtCapacity     a Live model has its cap of sessions in a call (answered 503)
│   ├── CampaignOver            a completed or cancelled campaign takes no more contacts
│   └── SessionKeyDestroyed     the session's data key was destroyed (pipeline.privacy.sealing;
│                               also a SealedValueUnreadable)
├── BadInput                 input that can never become valid; recorded, never retried
│   ├── MalformedFrame       a provider frame that is not JSON or not a known shape
│   ├── OversizedFrame
│   ├── MalformedRequest     an API request body that does not validate
│   ├── TrunkRequired        a call names no trunk, and the deployment has several
│   ├── TooManyContacts      a campaign past its 100,000 contacts
│   ├── UnknownTool          a session asks for a tool nobody registered
│   ├── UnknownDelegationHandler  a Live session names a handler nobody registered
│   ├── MalformedEnvelope    a queue message that is not a Switchboard envelope
│   └── MalformedIdempotencyKey  an Idempotency-Key that is not 1 to 255 printable ASCII characters
└── Fault                    something outside the request failed; may be retried
    ├── ProviderUnavailable
    └── ReplyTimeout
"""

from __future__ import annotations

from typing import Any


class SwitchboardError(Exception):
    """Base of every error Switchboard raises on purpose."""

    code = "switchboard_error"

    @property
    def details(self) -> dict[str, Any]:
        """Fields an error answer carries beside its code and message (none by default)."""
        return {}

    def body(self) -> dict[str, Any]:
        """The error as the API answers it: `{"error": {"code", "message", ...details}}`."""
        return {"error": {"code": self.code, "message": str(self), **self.details}}


class Refusal(SwitchboardError):
    """The request is refused for the state it found; retrying cannot help."""

    code = "refused"


class NotFound(Refusal):
    """What the request names does not exist."""

    code = "not_found"


class SessionNotFound(NotFound):
    code = "session_not_found"


class RouteNotFound(NotFound):
    code = "route_not_found"


class PhoneCallNotFound(NotFound):
    code = "call_not_found"


class KeyNotFound(NotFound):
    code = "key_not_found"


class DeadLetterNotFound(NotFound):
    code = "dead_letter_not_found"


class TrunkNotFound(NotFound):
    code = "trunk_not_found"


class CallNotFound(NotFound):
    code = "call_not_found"


class SuppressionNotFound(NotFound):
    code = "suppression_not_found"


class CampaignNotFound(NotFound):
    code = "campaign_not_found"


class AgentNotFound(NotFound):
    code = "agent_not_found"


class AgentVersionNotFound(NotFound):
    code = "agent_version_not_found"


class AgentExists(Refusal):
    code = "agent_exists"


class AgentArchived(Refusal):
    """New calls may not name an archived agent (its versions stay readable)."""

    code = "agent_archived"


class AgentNotPublished(Refusal):
    """An agent named without a version has none published yet."""

    code = "agent_not_published"


class AgentVersionInUse(Refusal):
    """A version a call in progress runs cannot be deleted."""

    code = "version_in_use"


class AgentVersionPublished(Refusal):
    """The published version cannot be deleted: publish another first."""

    code = "version_published"


class NothingToRollBack(Refusal):
    code = "nothing_to_roll_back"


class SessionExists(Refusal):
    code = "session_exists"


class SessionEnded(Refusal):
    """The session is over (ended or failed): its answer names the status and the end reason
    (docs/api.md, "Endings"), whatever the verb; the code is always `session_ended`."""

    code = "session_ended"

    def __init__(self, message: str, *, status: str | None = None, end_reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.end_reason = end_reason

    @property
    def details(self) -> dict[str, Any]:
        return {"status": self.status, "end_reason": self.end_reason}


class SessionNotConnected(Refusal):
    """The session has no call yet (created, or its connect under way): a verb that needs the
    call in progress waits for it. Its answer names the status."""

    code = "session_not_connected"

    def __init__(self, message: str, *, status: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def details(self) -> dict[str, Any]:
        return {"status": self.status}


class CallReconnected(Refusal):
    """The call's sideband was opened again (a reconnect, a takeover) between the request's
    check and its turn: it was for the call as it was. Asking again reaches the call as it is."""

    code = "call_reconnected"


class SessionLive(Refusal):
    """An erasure of a session whose call is still running (its content is still being made)."""

    code = "session_live"


class AdmissionRefused(Refusal):
    code = "admission_refused"


class ProviderCallIdConflict(Refusal):
    code = "provider_call_id_conflict"


class ToolStepTerminal(Refusal):
    code = "tool_step_is_terminal"


class ToolOutcomeConflict(Refusal):
    code = "tool_outcome_conflict"


class UnreplayableDeadLetter(Refusal):
    """A dead letter whose body is not a message: there is nothing to enqueue again."""

    code = "dead_letter_corrupt"


class NotSupported(Refusal):
    """The session's provider cannot do what was asked (`pipeline.call.capabilities.refusal`): the code
    names the provider (`not_supported_on_realtime`), the message says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class NumberSuppressed(Refusal):
    code = "suppressed"


class OutboundCapacity(Refusal):
    code = "outbound_capacity"


class LiveModelAtCapacity(Refusal):
    """A Live model has as many sessions in a call as its cap allows (`SWITCHBOARD_LIVE_MAX_SESSIONS`):
    the next is refused at admission, not by the provider mid-dial. Answered 503, as the other
    refusals for the deployment's capacity are (`overloaded`, `draining`): the request is right,
    the deployment is full, and asking again once a call ends succeeds. Names the model and its cap."""

    code = "live_model_at_capacity"

    def __init__(self, message: str, *, model: str, cap: int) -> None:
        super().__init__(message)
        self.model = model
        self.cap = cap

    @property
    def details(self) -> dict[str, Any]:
        return {"model": self.model, "cap": self.cap}


class CampaignOver(Refusal):
    code = "campaign_over"


class BadInput(SwitchboardError):
    """Input that can never become valid: answered with a typed error and dropped."""

    code = "bad_input"


class MalformedFrame(BadInput):
    code = "malformed_provider_frame"


class OversizedFrame(BadInput):
    code = "oversized_provider_frame"


class MalformedRequest(BadInput):
    code = "malformed_request"


class TrunkRequired(BadInput):
    code = "trunk_required"


class TooManyContacts(BadInput):
    code = "too_many_contacts"


class MalformedNumber(BadInput):
    """A caller's number that is not an E.164 number (`+` and 2 to 15 digits)."""

    code = "malformed_number"


class UnknownTool(BadInput):
    code = "unknown_tool"


class ModelRetired(BadInput):
    """A session asked for a model past its shutdown date (the message names its replacement)."""

    code = "model_retired"


class UnknownDelegationHandler(BadInput):
    code = "unknown_delegation_handler"


class MalformedEnvelope(BadInput):
    code = "malformed_envelope"


class MalformedIdempotencyKey(BadInput):
    code = "malformed_idempotency_key"


class Fault(SwitchboardError):
    """Something outside the request failed; the operation may be retried."""

    code = "fault"


class ProviderUnavailable(Fault):
    code = "provider_unavailable"


class ReplyTimeout(Fault):
    code = "reply_timeout"
