"""The call log: a call's story projected from its logged inputs, the same however often it is
read, with `call.ended` last and exactly once."""

from __future__ import annotations

from typing import Any

from pipeline.records.call_log import LoggedInput, ended_by, project
from pipeline.session.state import Phase
from tests.pipeline import events as ev

LOOKUP = {"type": "function", "name": "lookup_order", "description": "Look an order up.", "parameters": {}}


def _log(raws: list[dict[str, Any]], *, start: float = 1_000.0, step_s: float = 0.5) -> list[LoggedInput]:
    return [
        LoggedInput(received_at=start + index * step_s, disposition="applied", generation=1, payload=raw)
        for index, raw in enumerate(raws)
    ]


def _kinds(raws: list[dict[str, Any]]) -> list[str]:
    return [entry.kind for entry in project(_log(raws))]


def _spoken_turn(n: int) -> list[dict[str, Any]]:
    return [
        ev.user_final(f"item_u{n}", f"Caller line {n}."),
        ev.response_created(f"resp_{n}"),
        ev.assistant_final(f"resp_{n}", f"item_a{n}", f"Answer {n}."),
        ev.response_done(f"resp_{n}"),
    ]


def test_a_spoken_call_reads_as_started_turns_and_ended_by_the_caller() -> None:
    """Two spoken turns and a provider hangup: started, user and agent turns in order, then
    call.ended (caller_hung_up, by the caller) with the call's duration."""
    raws = [*ev.listening(), *_spoken_turn(0), *_spoken_turn(1), ev.sideband_closed(1000)]
    entries = project(_log(raws))
    assert [e.kind for e in entries] == [
        "call.started",
        "turn.user",
        "turn.agent",
        "turn.user",
        "turn.agent",
        "call.ended",
    ]
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5, 6]
    assert entries[1].data == {"text": "Caller line 0.", "item_id": "item_u0", "typed": False}
    agent = entries[2].data
    assert (agent["text"], agent["interrupted"], agent["latency_ms"]) == ("Answer 0.", False, 500)
    assert entries[-1].data == {"reason": "caller_hung_up", "ended_by": "caller", "duration_s": 5.0}
    assert entries[0].at.endswith("Z")


def test_an_answer_cut_by_a_barge_in_is_marked_interrupted() -> None:
    """A response cancelled because the caller talked over it is an interrupted agent turn."""
    raws = [
        *ev.listening(),
        ev.user_final("item_u0", "Hi."),
        ev.response_created("resp_0"),
        ev.speech_started("item_u1"),
        ev.assistant_final("resp_0", "item_a0", "Hello th"),
        ev.response_done("resp_0", "cancelled"),
    ]
    [agent] = [e for e in project(_log(raws)) if e.kind == "turn.agent"]
    assert agent.data["interrupted"] is True


def test_a_tool_call_and_its_result_are_entries() -> None:
    """A function call taken up is a tool.call; its outcome a tool.result."""
    outcome = {"status": "succeeded", "result": {"order": "4417"}, "elapsed_ms": 12}
    raws = [
        *ev.listening(tools=[LOOKUP]),
        ev.user_final("item_u0", "Where is my order?"),
        ev.response_created("resp_0"),
        ev.function_call("call_1", "resp_0", arguments='{"order": "4417"}'),
        ev.response_done("resp_0"),
        {"type": "switchboard.tool_finished", "call_id": "call_1", "outcome": outcome},
    ]
    entries = [e for e in project(_log(raws)) if e.kind.startswith("tool.")]
    assert [(e.kind, e.data["call_id"]) for e in entries] == [
        ("tool.call", "call_1"),
        ("tool.result", "call_1"),
    ]
    assert entries[0].data["arguments"] == '{"order": "4417"}'
    assert (entries[1].data["status"], entries[1].data["elapsed_ms"]) == ("succeeded", 12)


def test_an_app_end_and_a_failure_say_who_ended_the_call() -> None:
    """An end from the API is app_ended by the app; a failed admission is an error entry and an
    end by the platform whose reason is the failure's code, as the record's end_reason is."""
    ended = project(_log([*ev.listening(), ev.end_requested()]))[-1]
    assert (ended.kind, ended.data["reason"], ended.data["ended_by"]) == ("call.ended", "app_ended", "app")
    failed = project(_log([ev.session_created(), ev.admission_begun(), ev.admission_failed()]))
    assert [e.kind for e in failed] == ["error", "call.ended"]
    assert (failed[-1].data["reason"], failed[-1].data["ended_by"]) == ("provider_unavailable", "platform")
    assert failed[-1].data["code"] == "provider_unavailable"


def test_call_ended_is_last_and_once_whatever_comes_after() -> None:
    """Late events after the end (a stale close, a second end, a caller line) add nothing after
    call.ended, and never a second one."""
    raws = [
        *ev.listening(),
        ev.end_requested(),
        ev.sideband_closed(1000),
        ev.end_requested("again"),
        ev.user_final("item_late", "Hello?"),
    ]
    kinds = _kinds(raws)
    assert kinds.count("call.ended") == 1 and kinds[-1] == "call.ended"


def test_typed_text_is_a_typed_user_turn_and_entries_after_n_are_the_tail() -> None:
    """Text typed through the API is a user turn marked typed; asking for the entries after N
    answers the rest, numbered as before."""
    raws = [*ev.listening(), {"type": "switchboard.text_injected", "item_id": "item_t", "text": "Typed."}]
    everything = project(_log(raws))
    assert everything[-1].data["typed"] is True
    assert project(_log(raws), after=1) == everything[1:]


def test_who_ended_a_call_follows_its_end_reason() -> None:
    """Failures are the platform's, a provider hangup the caller's, limits the platform's, and
    any other reason the app's (the API's end takes the app's reason); an open call has none."""
    assert ended_by(Phase.FAILED, "sideband_lost") == "platform"
    assert ended_by(Phase.ENDED, "caller_hung_up") == "caller"
    assert ended_by(Phase.ENDED, "max_duration") == "platform"
    # A log written before the endings were renamed is read in today's words.
    assert ended_by(Phase.ENDED, "session_timeout") == "platform"
    assert ended_by(Phase.ENDED, "provider_call_ended") == "caller"
    assert ended_by(Phase.ENDED, "usage_budget_reached") == "platform"
    assert ended_by(Phase.ENDED, "app_ended") == "app"
    assert ended_by(Phase.LISTENING, None) is None
