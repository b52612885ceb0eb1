"""Evals: a case — the caller's lines and what must come of them — checked against a finished
call. Pure: what a case is, what was observed of a call, each expectation's verdict, pass rates
over repeated runs, and the JUnit XML a CI reads. `switchboard eval run` (switchboard/evals.py)
places the calls and asks the judge.

A case file is JSON:

    {"case": {"name": "order-status", "description": "…"},
     "session": {…},                # the body of POST /v1/sessions
     "caller": ["Where is my order 4417?", "Thanks, bye."],
     "model": [ … ],                # the simulated model's answers (simulator only)
     "expect": {
       "tools": [{"name": "lookup_order", "arguments": {"order_id": "4417"}}],
       "says": ["Friday"], "never_says": ["refund"],
       "ends": "caller_hung_up",
       "latency_ms": {"p95": 1500},
       "judged": [{"ask": "Did the agent confirm the order number?", "evidence": ["4417"]}]}}
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any, Literal
from xml.etree import ElementTree

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, model_validator

# The log's function-call events, as the provider names them.
_ARGUMENTS_DONE = "response.function_call_arguments.done"
_ITEM_DONE = "response.output_item.done"


class _Strict(BaseModel):
    # A misspelt expectation in a hand-written case must fail loudly, not pass by being ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseHeader(_Strict):
    name: str = Field(min_length=1)
    description: str = ""


class ToolExpectation(_Strict):
    """A tool the agent must call, its arguments checked exactly, by a pattern per argument
    (a regular expression the argument's text must match whole), or by a JSON schema."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    arguments_match: dict[str, str] | None = None
    arguments_schema: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_check(self) -> ToolExpectation:
        given = [self.arguments, self.arguments_match, self.arguments_schema]
        if sum(check is not None for check in given) > 1:
            raise ValueError("give at most one of arguments, arguments_match, arguments_schema")
        if self.arguments_match is not None:
            for key, pattern in self.arguments_match.items():
                try:
                    re.compile(pattern)
                except re.error as error:
                    raise ValueError(f"arguments_match.{key}: not a regular expression: {error}") from error
        if self.arguments_schema is not None:
            jsonschema.Draft202012Validator.check_schema(self.arguments_schema)
        return self


class Judged(_Strict):
    """A criterion a judge model answers yes or no from the call's transcript. `evidence` is
    for the simulated judge only: it answers yes when every piece is in the transcript."""

    ask: str = Field(min_length=1)
    evidence: tuple[str, ...] = ()


class Latency(_Strict):
    """The most the caller may wait for answers, in milliseconds."""

    p50: float | None = Field(default=None, gt=0)
    p95: float | None = Field(default=None, gt=0)
    max: float | None = Field(default=None, gt=0)


class Expectations(_Strict):
    tools: tuple[ToolExpectation, ...] | None = None
    # The tools above are all the agent may call (no other).
    only_these_tools: bool = False
    says: tuple[str, ...] = ()
    never_says: tuple[str, ...] = ()
    ends: str | None = None
    latency_ms: Latency | None = None
    judged: tuple[Judged, ...] = ()


class EvalCase(_Strict):
    case: CaseHeader
    session: dict[str, Any]
    caller: tuple[str, ...] = Field(min_length=1)
    # What the simulated model answers, one entry per response (the simulator's script).
    model: tuple[dict[str, Any], ...] = ()
    expect: Expectations = Expectations()


class FunctionCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arguments: Any


class Observed(BaseModel):
    """What a finished call showed: its transcript, the functions the model called, how it
    ended and how long the caller waited for each answer."""

    model_config = ConfigDict(frozen=True)

    transcript: tuple[tuple[Literal["user", "assistant"], str], ...]
    calls: tuple[FunctionCall, ...]
    end_reason: str | None
    waits_ms: tuple[float, ...]

    @property
    def agent_said(self) -> str:
        return "\n".join(text for role, text in self.transcript if role == "assistant")

    def transcript_text(self) -> str:
        names = {"user": "Caller", "assistant": "Agent"}
        return "\n".join(f"{names[role]}: {text}" for role, text in self.transcript)


class Verdict(BaseModel):
    """One expectation of one run: passed or not, and why, in words a reader needs."""

    model_config = ConfigDict(frozen=True)

    expectation: str
    passed: bool
    detail: str = ""


def observed_of(record: dict[str, Any], waits_ms: Sequence[float] = ()) -> Observed:
    """What a session record (read with its log) shows of the call."""
    transcript = tuple(
        (item["role"], str(item["text"]))
        for item in record.get("transcript", [])
        if item.get("role") in ("user", "assistant")
    )
    return Observed(
        transcript=transcript,
        calls=tuple(function_calls(record.get("log", []))),
        end_reason=record.get("end_reason"),
        waits_ms=tuple(waits_ms),
    )


def function_calls(log: Iterable[dict[str, Any]]) -> list[FunctionCall]:
    """The functions the model called, once each, in the order the log has them."""
    seen: set[str] = set()
    calls = []
    for entry in log:
        payload = entry.get("payload") or {}
        if payload.get("type") == _ARGUMENTS_DONE:
            call_id, name, arguments = payload.get("call_id"), payload.get("name"), payload.get("arguments")
        elif payload.get("type") == _ITEM_DONE and (payload.get("item") or {}).get("type") == "function_call":
            item = payload["item"]
            call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        else:
            continue
        if not isinstance(name, str) or call_id in seen:
            continue
        seen.add(str(call_id))
        calls.append(FunctionCall(name=name, arguments=_decoded(arguments)))
    return calls


def _decoded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def judge_prompt(observed: Observed, criterion: Judged) -> list[dict[str, str]]:
    """The messages a judge model is asked one criterion with."""
    return [
        {
            "role": "system",
            "content": (
                "You judge one phone call between a caller and an agent from its transcript. "
                'Answer with a JSON object {"answer": "yes" | "no", "reason": "…"} and nothing else.'
            ),
        },
        {
            "role": "user",
            "content": f"Transcript:\n{observed.transcript_text()}\n\nQuestion: {criterion.ask}",
        },
    ]


def judge_answer(text: str) -> tuple[bool, str]:
    """The judge's yes or no, and its reason; an answer that is neither is a no that says so."""
    try:
        answer = json.loads(text)
    except ValueError:
        return False, f"the judge did not answer JSON: {text[:200]!r}"
    if not isinstance(answer, dict) or answer.get("answer") not in ("yes", "no"):
        return False, f"the judge answered neither yes nor no: {text[:200]!r}"
    return answer["answer"] == "yes", str(answer.get("reason", ""))


def verdicts(case: EvalCase, observed: Observed, judged: Sequence[tuple[bool, str]] = ()) -> list[Verdict]:
    """Every expectation of the case against one finished call (`judged`: the judge's answer to
    each judged criterion, in order)."""
    expect = case.expect
    found: list[Verdict] = []
    if expect.tools is not None:
        found += _tool_verdicts(expect, observed.calls)
    said = observed.agent_said.casefold()
    for words in expect.says:
        found.append(
            Verdict(
                expectation=f"says {words!r}",
                passed=words.casefold() in said,
                detail="" if words.casefold() in said else f"the agent said: {_quoted(observed.agent_said)}",
            )
        )
    for words in expect.never_says:
        found.append(
            Verdict(
                expectation=f"never says {words!r}",
                passed=words.casefold() not in said,
                detail=""
                if words.casefold() not in said
                else f"the agent said: {_quoted(observed.agent_said)}",
            )
        )
    if expect.ends is not None:
        found.append(
            Verdict(
                expectation=f"ends {expect.ends}",
                passed=observed.end_reason == expect.ends,
                detail="" if observed.end_reason == expect.ends else f"it ended {observed.end_reason}",
            )
        )
    if expect.latency_ms is not None:
        found += _latency_verdicts(expect.latency_ms, observed.waits_ms)
    for criterion, (passed, reason) in zip(expect.judged, judged, strict=True):
        found.append(Verdict(expectation=f"judged: {criterion.ask}", passed=passed, detail=reason))
    return found


def _tool_verdicts(expect: Expectations, calls: Sequence[FunctionCall]) -> list[Verdict]:
    found = []
    assert expect.tools is not None
    for wanted in expect.tools:
        named = [call for call in calls if call.name == wanted.name]
        label = f"calls {wanted.name}"
        if not named:
            called = ", ".join(call.name for call in calls) or "no tool"
            found.append(Verdict(expectation=label, passed=False, detail=f"the model called {called}"))
            continue
        problems = [_arguments_problem(wanted, call.arguments) for call in named]
        passed = any(problem is None for problem in problems)
        detail = "" if passed else "; ".join(str(problem) for problem in problems)
        found.append(Verdict(expectation=label, passed=passed, detail=detail))
    if expect.only_these_tools:
        allowed = {wanted.name for wanted in expect.tools}
        others = [call.name for call in calls if call.name not in allowed]
        found.append(
            Verdict(
                expectation="calls no other tool",
                passed=not others,
                detail="" if not others else f"the model also called {', '.join(others)}",
            )
        )
    return found


def _arguments_problem(wanted: ToolExpectation, arguments: Any) -> str | None:
    """Why these arguments do not meet the expectation, or None when they do."""
    shown = json.dumps(arguments, sort_keys=True)
    if wanted.arguments is not None and arguments != wanted.arguments:
        return f"arguments {shown}, expected {json.dumps(wanted.arguments, sort_keys=True)}"
    if wanted.arguments_match is not None:
        if not isinstance(arguments, dict):
            return f"arguments {shown} are not an object"
        for key, pattern in wanted.arguments_match.items():
            value = arguments.get(key)
            text = value if isinstance(value, str) else json.dumps(value)
            if key not in arguments or re.fullmatch(pattern, text) is None:
                return f"arguments {shown}: {key} does not match {pattern!r}"
    if wanted.arguments_schema is not None:
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(wanted.arguments_schema).iter_errors(arguments)
        )
        if error is not None:
            return f"arguments {shown}: {error.message}"
    return None


def _latency_verdicts(budget: Latency, waits_ms: Sequence[float]) -> list[Verdict]:
    if not waits_ms:
        return [Verdict(expectation="latency", passed=False, detail="no answer was timed")]
    measured = {
        "p50": statistics.median(waits_ms),
        "p95": _percentile(waits_ms, 0.95),
        "max": max(waits_ms),
    }
    found = []
    for name in ("p50", "p95", "max"):
        limit = getattr(budget, name)
        if limit is None:
            continue
        passed = measured[name] <= limit
        found.append(
            Verdict(
                expectation=f"latency {name} ≤ {limit:g} ms",
                passed=passed,
                detail=f"{name} {measured[name]:.0f} ms over {len(waits_ms)} answers",
            )
        )
    return found


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _quoted(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return json.dumps(flat if len(flat) <= limit else flat[: limit - 1] + "…", ensure_ascii=False)


class Rate(BaseModel):
    """One expectation over repeated runs: how many passed, and the first failure's detail."""

    model_config = ConfigDict(frozen=True)

    expectation: str
    passed: int
    runs: int
    failure: str = ""

    @property
    def rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0


def rates(runs: Sequence[Sequence[Verdict]]) -> list[Rate]:
    """Each expectation's pass rate over the runs of one case, in the order the case has them."""
    order: list[str] = []
    passed: dict[str, int] = {}
    seen: dict[str, int] = {}
    failure: dict[str, str] = {}
    for run in runs:
        for verdict in run:
            if verdict.expectation not in seen:
                order.append(verdict.expectation)
            seen[verdict.expectation] = seen.get(verdict.expectation, 0) + 1
            passed[verdict.expectation] = passed.get(verdict.expectation, 0) + int(verdict.passed)
            if not verdict.passed and verdict.expectation not in failure:
                failure[verdict.expectation] = verdict.detail
    return [
        Rate(expectation=name, passed=passed[name], runs=len(runs), failure=failure.get(name, ""))
        for name in order
    ]


def junit_xml(results: Sequence[tuple[str, Sequence[Rate], str | None]]) -> str:
    """JUnit XML of an eval run: a test suite per case, a test case per expectation (failed
    unless it passed in every run). `results`: each case's name, rates, and an error that
    stopped it (the call could not be placed), if one did."""
    suites = ElementTree.Element("testsuites", name="switchboard eval")
    for name, case_rates, error in results:
        failures = sum(1 for rate in case_rates if rate.passed < rate.runs)
        suite = ElementTree.SubElement(
            suites,
            "testsuite",
            name=name,
            tests=str(max(len(case_rates), 1 if error else 0)),
            failures=str(failures),
            errors="1" if error else "0",
        )
        if error:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name="the call")
            ElementTree.SubElement(case, "error", message=error)
        for rate in case_rates:
            case = ElementTree.SubElement(suite, "testcase", classname=name, name=rate.expectation)
            if rate.passed < rate.runs:
                message = f"passed {rate.passed} of {rate.runs} runs"
                failed = ElementTree.SubElement(case, "failure", message=message)
                failed.text = rate.failure
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True)
