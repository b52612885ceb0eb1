"""The providers' capabilities: one refusal function over them, and docs/providers.md's table of
what is refused where, checked against the two literals (a flag changed without the table, or
the table without the flag, fails here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.call.capabilities import Ability, Capabilities, not_supported, refusal
from pipeline.dialects import CAPABILITIES, capabilities_of
from pipeline.live.capabilities import LIVE
from pipeline.realtime.capabilities import REALTIME
from pipeline.session.state import Phase, Provider, SessionState
from pipeline.session.step import AnswerRequest
from pipeline.session.wire import InterruptRequested, TextInjected
from pipeline.transitions import apply

ROOT = Path(__file__).resolve().parents[2]

# What each ability is asked for by, as the docs name it, and the answer it gets when refused
# (a verb is refused by the worker; a spec is refused as it is read).
VERB = "409 `{code}`"
SPEC = "422 `malformed_request`"
REQUESTS = {
    Ability.INTERRUPT: ("`POST …/interrupt`", VERB),
    Ability.TYPED_CALLER_TEXT: ("`POST …/caller/text`", VERB),
    Ability.TOOLS: ("`PUT …/tools`; a session spec with `tools` or `hangup`", f"{VERB}; a spec {SPEC}"),
    Ability.TAKE_OVER: ("supervisor `take_over`", VERB),
    Ability.COMPACTION: ("`POST …/compact`", VERB),
    Ability.DELEGATIONS: ("a session spec with `live` settings", SPEC),
    Ability.USAGE_IN_SECONDS: ("`limits.usage_budget_seconds` in a session spec", SPEC),
    Ability.IDLE_SILENCES: ("a route with `silences`", SPEC),
    Ability.OUTBOUND_CALLS: ("`POST /v1/calls`, `POST /v1/campaigns` with a session of this provider", VERB),
}
BEGIN = (
    "<!-- the refusals: made from pipeline/*/capabilities.py, checked by tests/pipeline/test_dialect.py -->"
)
END = "<!-- end of the refusals -->"


def _title(capabilities: Capabilities) -> str:
    return capabilities.name.capitalize()


def refusal_table() -> str:
    """The table of docs/providers.md, made from the capabilities of every provider."""
    rows = ["| request | refused on | answer | why |", "|---|---|---|---|"]
    for capabilities in CAPABILITIES.values():
        for ability in Ability:
            if capabilities.can(ability):
                continue
            request, answer = REQUESTS[ability]
            answer = answer.format(code=capabilities.not_supported)
            reason = capabilities.reasons[ability]
            rows.append(f"| {request} | {_title(capabilities)} | {answer} | {reason} |")
        if capabilities.append_tokens is not None:
            request = (
                "`say`, `whisper`, `agent/say`, `agent/reply`, a changed prompt block, longer than "
                f"one append ({capabilities.append_tokens} tokens, estimated)"
            )
            code = capabilities.too_long
            rows.append(f"| {request} | {_title(capabilities)} | 422 `{code}` | refused rather than cut |")
    return "\n".join(rows)


def test_the_docs_table_of_refusals_is_the_capabilities() -> None:
    text = (ROOT / "docs" / "providers.md").read_text()
    assert BEGIN in text and END in text
    documented = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert documented == refusal_table(), "docs/providers.md should hold:\n" + refusal_table()


def test_every_provider_is_a_wing_with_capabilities() -> None:
    assert set(CAPABILITIES) == set(Provider)
    assert [c.name for c in CAPABILITIES.values()] == [p.value for p in CAPABILITIES]
    assert capabilities_of(SessionState(provider=Provider.LIVE)) is LIVE
    assert capabilities_of(SessionState()) is REALTIME


@pytest.mark.parametrize("capabilities", [REALTIME, LIVE], ids=lambda c: c.name)
@pytest.mark.parametrize("ability", list(Ability))
def test_a_refusal_is_exactly_a_missing_ability(capabilities: Capabilities, ability: Ability) -> None:
    refused = refusal(capabilities, ability)
    if capabilities.can(ability):
        assert refused is None
    else:
        assert refused is not None
        assert (refused.status, refused.code) == (409, f"not_supported_on_{capabilities.name}")
        assert refused.message == capabilities.reasons[ability] and refused.message


@pytest.mark.parametrize("capabilities", [REALTIME, LIVE], ids=lambda c: c.name)
def test_what_a_provider_does_not_support_is_each_refusal_it_answers(capabilities: Capabilities) -> None:
    """The record's `not_supported` names every ability the provider lacks, with the very code
    and message a request for it is refused with (the console shows that message)."""
    shown = not_supported(capabilities)
    assert set(shown) == {ability.value for ability in Ability if not capabilities.can(ability)}
    for name, why in shown.items():
        refused = refusal(capabilities, Ability(name))
        assert refused is not None and why == {"code": refused.code, "message": refused.message}
    assert ("take_over" in shown) is (capabilities is LIVE)


def test_a_provider_that_cannot_must_say_why() -> None:
    with pytest.raises(ValueError, match="cannot interrupt and does not say why"):
        Capabilities(
            name="mute",
            interrupt=False,
            typed_caller_text=True,
            tools=True,
            take_over=True,
            compaction=True,
            delegations=True,
            usage_in_seconds=True,
            idle_silences=True,
            outbound_calls=True,
            responses=True,
            append_tokens=None,
            reasons={},
        )


def _answer(step_effects: tuple[object, ...]) -> AnswerRequest:
    [answer] = [effect for effect in step_effects if isinstance(effect, AnswerRequest)]
    return answer


@pytest.mark.parametrize("provider", list(Provider))
def test_typed_text_and_an_interrupt_are_answered_by_the_worker(provider: Provider) -> None:
    """Both used to be refused by the gateway before a worker saw them; now the worker answers
    each, from the session's capabilities, like every other verb."""
    state = SessionState(phase=Phase.LISTENING, provider=provider, instructions="Be brief.", call_id="rtc_1")
    typed = TextInjected(item_id="item_typed_1", text="hello", request_id="r1", gateway_id="gw1")
    interrupt = InterruptRequested(request_id="r2", gateway_id="gw1")
    for event, ability, ok in (
        (typed, Ability.TYPED_CALLER_TEXT, {"item_id": "item_typed_1", "status": "queued"}),
        (interrupt, Ability.INTERRUPT, {"status": "interrupting"}),
    ):
        step = apply(state, event, state.generation)
        answer = _answer(step.effects)
        assert (answer.request_id, answer.gateway_id) == (event.request_id, "gw1")
        cannot = refusal(capabilities_of(state), ability)
        if cannot is None:
            assert (answer.status, answer.body) == (202, ok)
        else:
            assert step.controls == () and step.state == state
            assert (answer.status, answer.body["error"]["code"]) == (409, "not_supported_on_live")
    typed_controls = apply(state, typed, state.generation).controls
    assert [c.type for c in typed_controls] == (
        ["conversation.item.create", "response.create"] if provider is Provider.REALTIME else []
    )


def test_typed_text_on_an_ended_call_is_answered_not_applied() -> None:
    ended = SessionState(phase=Phase.ENDED, instructions="Be brief.", end_reason="caller_hung_up")
    step = apply(ended, TextInjected(item_id="i", text="hi", request_id="r", gateway_id="g"), 1)
    answer = _answer(step.effects)
    assert (answer.status, answer.body["error"]["code"]) == (409, "session_ended")
    assert answer.body["error"]["end_reason"] == "caller_hung_up"
    assert step.controls == () and step.state == ended
