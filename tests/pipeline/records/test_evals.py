"""Eval cases and their verdicts (pipeline/records/evals.py), without a call."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

import pytest
from pydantic import ValidationError

from pipeline.records.evals import (
    EvalCase,
    FunctionCall,
    Observed,
    Verdict,
    function_calls,
    judge_answer,
    judge_prompt,
    junit_xml,
    rates,
    verdicts,
)


def _case(**expect: Any) -> EvalCase:
    return EvalCase.model_validate(
        {
            "case": {"name": "c"},
            "session": {"instructions": "Hi."},
            "caller": ["Where is 4417?"],
            "expect": expect,
        }
    )


OBSERVED = Observed(
    transcript=(("user", "Where is 4417?"), ("assistant", "Order 4417 ships Friday with UPS.")),
    calls=(FunctionCall(name="lookup_order", arguments={"order_id": "4417"}),),
    end_reason="caller_hung_up",
    waits_ms=(420.0, 610.0, 380.0),
)


def _passed(case: EvalCase, judged: tuple[tuple[bool, str], ...] = ()) -> dict[str, bool]:
    return {verdict.expectation: verdict.passed for verdict in verdicts(case, OBSERVED, judged)}


def test_a_tool_s_arguments_are_checked_exactly_by_pattern_or_by_schema() -> None:
    assert _passed(_case(tools=[{"name": "lookup_order", "arguments": {"order_id": "4417"}}])) == {
        "calls lookup_order": True
    }
    assert _passed(_case(tools=[{"name": "lookup_order", "arguments": {"order_id": 4417}}])) == {
        "calls lookup_order": False
    }
    assert _passed(_case(tools=[{"name": "lookup_order", "arguments_match": {"order_id": r"44\d\d"}}]))[
        "calls lookup_order"
    ]
    assert not _passed(_case(tools=[{"name": "lookup_order", "arguments_match": {"order_id": r"4\d"}}]))[
        "calls lookup_order"
    ]  # a pattern matches the whole value
    schema = {"type": "object", "required": ["order_id"], "properties": {"order_id": {"pattern": "^44"}}}
    assert _passed(_case(tools=[{"name": "lookup_order", "arguments_schema": schema}]))["calls lookup_order"]
    wrong = {"type": "object", "required": ["email"]}
    [verdict] = verdicts(_case(tools=[{"name": "lookup_order", "arguments_schema": wrong}]), OBSERVED)
    assert not verdict.passed and "'email' is a required property" in verdict.detail
    [missing, other] = verdicts(_case(tools=[{"name": "refund"}], only_these_tools=True), OBSERVED)
    assert (missing.passed, missing.detail) == (False, "the model called lookup_order")
    assert (other.passed, other.detail) == (False, "the model also called lookup_order")


def test_words_the_ending_and_the_latency_budget() -> None:
    passed = _passed(
        _case(
            says=["friday"],
            never_says=["refund", "UPS"],
            ends="agent_hung_up",
            latency_ms={"p50": 500, "max": 600},
        )
    )
    assert passed == {
        "says 'friday'": True,  # whatever the case
        "never says 'refund'": True,
        "never says 'UPS'": False,
        "ends agent_hung_up": False,
        "latency p50 ≤ 500 ms": True,
        "latency max ≤ 600 ms": False,
    }
    no_waits = OBSERVED.model_copy(update={"waits_ms": ()})
    [untimed] = verdicts(_case(latency_ms={"p95": 1000}), no_waits)
    assert (untimed.passed, untimed.detail) == (False, "no answer was timed")


def test_judged_criteria_take_the_judge_s_answers_in_order() -> None:
    case = _case(judged=[{"ask": "Confirmed the number?"}, {"ask": "Polite?"}])
    assert _passed(case, ((True, "it did"), (False, "it was curt"))) == {
        "judged: Confirmed the number?": True,
        "judged: Polite?": False,
    }
    messages = judge_prompt(OBSERVED, case.expect.judged[0])
    assert messages[-1]["content"].endswith(
        "Agent: Order 4417 ships Friday with UPS.\n\nQuestion: Confirmed the number?"
    )
    assert judge_answer('{"answer": "yes", "reason": "said so"}') == (True, "said so")
    assert judge_answer("Yes!")[0] is False and "did not answer JSON" in judge_answer("Yes!")[1]
    assert judge_answer('{"answer": "maybe"}')[0] is False


def test_a_case_that_cannot_be_checked_is_refused() -> None:
    with pytest.raises(ValidationError, match="at most one of"):
        _case(tools=[{"name": "x", "arguments": {}, "arguments_match": {}}])
    with pytest.raises(ValidationError, match="not a regular expression"):
        _case(tools=[{"name": "x", "arguments_match": {"a": "("}}])
    with pytest.raises(ValidationError):
        _case(say=["typo"])  # a misspelt expectation is not silently ignored
    with pytest.raises(ValidationError):
        EvalCase.model_validate({"case": {"name": "c"}, "session": {}, "caller": []})


def test_function_calls_are_read_once_each_from_the_log() -> None:
    done = {
        "type": "response.function_call_arguments.done",
        "call_id": "c1",
        "name": "f",
        "arguments": '{"a": 1}',
    }
    item = {
        "type": "response.output_item.done",
        "item": {"type": "function_call", "call_id": "c1", "name": "f"},
    }
    other = {
        "type": "response.output_item.done",
        "item": {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "not json"},
    }
    calls = function_calls([{"payload": done}, {"payload": item}, {"payload": other}])
    assert calls == [FunctionCall(name="f", arguments={"a": 1}), FunctionCall(name="g", arguments="not json")]


def test_pass_rates_over_runs_and_their_junit_xml() -> None:
    runs = [
        [Verdict(expectation="says 'x'", passed=True), Verdict(expectation="ends e", passed=True)],
        [
            Verdict(expectation="says 'x'", passed=False, detail='the agent said: "y"'),
            Verdict(expectation="ends e", passed=True),
        ],
    ]
    [said, ended] = rates(runs)
    assert (said.passed, said.runs, said.rate, said.failure) == (1, 2, 0.5, 'the agent said: "y"')
    assert (ended.passed, ended.runs) == (2, 2)
    tree = ElementTree.fromstring(
        junit_xml([("case-a", [said, ended], None), ("case-b", [], "TimeoutError: late")])
    )
    suites = {suite.get("name"): suite for suite in tree}
    assert suites["case-a"].get("failures") == "1" and suites["case-b"].get("errors") == "1"
    [failure] = suites["case-a"].iter("failure")
    assert failure.get("message") == "passed 1 of 2 runs" and failure.text == 'the agent said: "y"'
