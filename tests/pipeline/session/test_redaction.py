"""What an operator or an app types into a call is redacted before it is numbered into the
session's log, as a caller's words are; what configures the call is kept as given."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.privacy.boundary import Redactor
from pipeline.privacy.policy import Kind, PrivacyPolicy
from pipeline.session.redaction import redacted_creation, redacted_input
from pipeline.session.state import Greeting
from pipeline.session.wire import (
    AgentReplyRequested,
    AgentSayRequested,
    AttentionRequested,
    CollectRequested,
    EndRequested,
    HostInput,
    PromptSetRequested,
    SessionCreated,
    SupervisorRequested,
    TextInjected,
    ToolsSetRequested,
    host_event,
)

CARD = "4111 1111 1111 1111"
CARD_MASK = "•••• •••• •••• 1111"
SSN = "123-45-6789"
EMAIL = "rosa.mendes@example.org"
REDACTOR = Redactor([Kind.CARD, Kind.SSN, Kind.EMAIL])
BY = {"id": "sup-1", "name": "Dana"}


def _supervisor(verb: dict[str, Any]) -> SupervisorRequested:
    return SupervisorRequested.model_validate({"by": BY, "verb": verb})


TYPED: list[HostInput] = [
    AgentSayRequested(text=f"Your card {CARD} is on file."),
    AgentReplyRequested(instructions=f"Confirm the SSN {SSN} back to the caller."),
    PromptSetRequested(name="notes", text=f"Write to {EMAIL}."),
    AttentionRequested(reason=f"card {CARD} declined", wait_s=30),
    EndRequested(reason=f"paid with {CARD}"),
    TextInjected(item_id="item_typed_1", text=f"typed: {CARD}"),
    _supervisor({"type": "whisper", "text": f"their SSN is {SSN}"}),
    _supervisor({"type": "say", "text": f"I have your card {CARD}."}),
    _supervisor({"type": "end", "reason": f"card {CARD}"}),
    CollectRequested(tool="take_payment", prompt=f"Key in {CARD}", arguments={"card_number": CARD}),
]


@pytest.mark.parametrize("event", TYPED, ids=lambda event: event.type)
def test_every_text_an_operator_or_app_types_is_redacted(event: HostInput) -> None:
    """No value of the session's kinds is left in any of them, and each keeps its type."""
    redacted = redacted_input(event, REDACTOR)
    kept = str(host_event(redacted))
    assert type(redacted) is type(event)
    assert "1111 1111 1111" not in kept and "123-45" not in kept and "rosa.mendes" not in kept
    assert kept != str(host_event(event))


def test_a_refused_collections_card_is_masked_but_its_parameter_kept() -> None:
    """The refusal of a card given in a collection's arguments still sees the parameter named."""
    asked = CollectRequested(tool="take_payment", prompt="Key it in.", arguments={"card_number": CARD})
    redacted = redacted_input(asked, REDACTOR)
    assert isinstance(redacted, CollectRequested)
    assert redacted.arguments == {"card_number": CARD_MASK}


def test_a_transfer_target_and_the_tools_offered_are_kept_as_given() -> None:
    """A transfer's target is the contact centre's own number: masked, it could not be dialled."""
    transfer = _supervisor({"type": "transfer", "to": "tel:+14155550100"})
    phones = Redactor([Kind.CARD, Kind.SSN, Kind.PHONE])
    assert redacted_input(transfer, phones) is transfer
    tools = ToolsSetRequested(tools=({"type": "function", "name": "lookup", "description": f"e.g. {CARD}"},))
    assert redacted_input(tools, REDACTOR) is tools


def test_an_input_with_nothing_to_mask_is_the_same_object() -> None:
    said = AgentSayRequested(text="Is there anything else I can help with?")
    assert redacted_input(said, REDACTOR) is said


def test_a_sessions_own_texts_are_redacted_by_its_own_policy() -> None:
    """Its instructions, greeting and hang-up condition; the number it dials stays dialable."""
    created = SessionCreated(
        instructions=f"The caller's SSN is {SSN}; mail {EMAIL}.",
        greeting=Greeting(say=f"Hello, calling about card {CARD}."),
        hangup_when=f"when they confirm {CARD}",
        privacy=PrivacyPolicy(redact=(Kind.EMAIL,)),
    )
    redacted = redacted_creation(created)
    shown = redacted.model_dump_json()
    assert "123-45" not in shown and "rosa.mendes" not in shown and "1111 1111 1111" not in shown
    assert redacted.greeting is not None and CARD_MASK in (redacted.greeting.say or "")
    plain = SessionCreated(instructions="You are the order desk.")
    assert redacted_creation(plain) is plain
