"""Heard latency: what a caller waits from the end of their speech to the answer's first audio,
split into Switchboard's hop and the provider's rest, per agent turn of the call log (both
providers) and over a call."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pipeline.call.heard import UNHEARD, percentile, split, summary, waited_ms
from pipeline.records.call_log import LoggedInput, heard_latency, project
from pipeline.session.timeline import Speaker
from tests.pipeline import events as ev
from tests.pipeline import live_calls as lc


def _at(raws: list[tuple[float, dict[str, Any]]]) -> list[LoggedInput]:
    return [LoggedInput(received_at=at, disposition="applied", generation=1, payload=raw) for at, raw in raws]


def _heard_done(resp_id: str, speech_ended_at: float, first_audio_at: float) -> dict[str, Any]:
    return {
        **ev.response_done(resp_id),
        "heard": {"speech_ended_at": speech_ended_at, "first_audio_at": first_audio_at},
    }


def _agent_turns(logged: list[LoggedInput]) -> list[dict[str, Any]]:
    return [entry.data for entry in project(logged) if entry.kind == "turn.agent"]


# ── the arithmetic ──────────────────────────────────────────────────────────────


def test_a_wait_is_measured_in_whole_milliseconds_and_an_overlap_is_no_wait() -> None:
    """Seconds in, rounded ms out; milliseconds in with `per_second=1000`; an answer that began
    before the caller stopped is no wait (None)."""
    assert waited_ms(10.0, 10.8125) == 812
    assert waited_ms(4_800, 5_400, per_second=1000) == 600
    assert waited_ms(10.0, 9.9) is None


@given(
    heard=st.integers(min_value=0, max_value=60_000),
    hop=st.none() | st.integers(min_value=-5, max_value=120_000),
)
def test_a_split_adds_up_and_switchboard_never_takes_more_than_the_wait(heard: int, hop: int | None) -> None:
    """switchboard_ms + provider_ms == heard_ms, both within [0, heard_ms], whatever the hop."""
    waited = split(heard, hop)
    assert waited is not None
    assert waited.switchboard_ms + waited.provider_ms == waited.heard_ms == heard
    assert 0 <= waited.switchboard_ms <= heard and 0 <= waited.provider_ms <= heard
    if hop is not None and 0 <= hop <= heard:
        assert waited.switchboard_ms == hop


def test_an_unknown_wait_has_no_split() -> None:
    """No wait measured, nothing to split."""
    assert split(None, 5) is None


@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=200))
def test_p50_and_p95_are_measured_values_in_order(waits: list[int]) -> None:
    """p50 <= p95 <= the worst wait, each one of the waits measured, over every measured turn."""
    summarized = summary([*waits, None])
    assert summarized["turns"] == len(waits)
    assert min(waits) <= summarized["p50_ms"] <= summarized["p95_ms"] <= max(waits)
    assert summarized["p50_ms"] in waits and summarized["p95_ms"] in waits


def test_nearest_rank_percentiles_of_a_known_call() -> None:
    """Twenty waits of 100..2000 ms: p50 is the tenth, p95 the nineteenth."""
    waits = [100 * n for n in range(1, 21)]
    assert (percentile(waits, 0.5), percentile(waits, 0.95)) == (1_000, 1_900)


def test_a_call_without_a_measured_turn_says_so() -> None:
    """No turn measured: the percentiles are null and the count is 0."""
    assert summary([None, None]) == {"p50_ms": None, "p95_ms": None, "turns": 0}


# ── Realtime: the gateway's stamp on response.done ──────────────────────────────


def test_a_realtime_turn_carries_the_wait_its_response_done_was_stamped_with() -> None:
    """The caller stopped at 10.0 s, their words came at 10.4 s, the response began at 10.405 s
    and its first audio came at 10.9 s: heard 900 ms, of which Switchboard's hop 5 ms."""
    logged = _at(
        [
            *[(1.0, raw) for raw in ev.listening()],
            (10.4, ev.user_final("item_u0", "Where is my order?")),
            (10.405, ev.response_created("resp_0")),
            (11.5, ev.assistant_final("resp_0", "item_a0", "Let me look.")),
            (11.6, _heard_done("resp_0", 10.0, 10.9)),
        ]
    )
    [agent] = _agent_turns(logged)
    assert agent["latency_ms"] == 5
    assert agent["heard_ms"] == 900
    assert agent["heard"] == {"switchboard_ms": 5, "provider_ms": 895}
    assert heard_latency(project(logged)) == {"p50_ms": 900, "p95_ms": 900, "turns": 1}


def test_a_realtime_turn_without_a_stamp_is_unheard() -> None:
    """An answer whose response.done carries no wait (a greeting, typed words, a gateway that
    did not see both ends) has heard_ms null, and the call counts no turn."""
    logged = _at(
        [
            *[(1.0, raw) for raw in ev.listening()],
            (2.0, ev.user_final("item_u0", "Hello?")),
            (2.01, ev.response_created("resp_0")),
            (2.5, ev.assistant_final("resp_0", "item_a0", "Hi.")),
            (2.6, ev.response_done("resp_0")),
        ]
    )
    [agent] = _agent_turns(logged)
    assert {key: agent[key] for key in UNHEARD} == UNHEARD
    assert heard_latency(project(logged))["turns"] == 0


@given(
    stopped_to_words_ms=st.integers(min_value=0, max_value=3_000),
    hop_ms=st.integers(min_value=0, max_value=500),
    created_to_audio_ms=st.integers(min_value=0, max_value=5_000),
)
def test_heard_is_never_less_than_switchboard_s_hop(
    stopped_to_words_ms: int, hop_ms: int, created_to_audio_ms: int
) -> None:
    """Whatever the provider's and Switchboard's times, heard_ms >= switchboard_ms == the turn's
    latency_ms, and the two shares add up to heard_ms."""
    stopped = 100.0
    words = stopped + stopped_to_words_ms / 1000
    created = words + hop_ms / 1000
    first_audio = created + created_to_audio_ms / 1000
    logged = _at(
        [
            *[(1.0, raw) for raw in ev.listening()],
            (words, ev.user_final("item_u0", "Where is my order?")),
            (created, ev.response_created("resp_0")),
            (first_audio + 1, ev.assistant_final("resp_0", "item_a0", "Let me look.")),
            (first_audio + 1.1, _heard_done("resp_0", stopped, first_audio)),
        ]
    )
    [agent] = _agent_turns(logged)
    assert agent["heard_ms"] >= agent["heard"]["switchboard_ms"] == agent["latency_ms"]
    assert agent["heard"]["switchboard_ms"] + agent["heard"]["provider_ms"] == agent["heard_ms"]


def test_the_projection_reads_the_same_wait_every_time() -> None:
    """The call log is a projection: read twice, or partly, its heard_ms does not change."""
    logged = _at(
        [
            *[(1.0, raw) for raw in ev.listening()],
            (10.4, ev.user_final("item_u0", "Where is my order?")),
            (10.405, ev.response_created("resp_0")),
            (11.5, ev.assistant_final("resp_0", "item_a0", "Let me look.")),
            (11.6, _heard_done("resp_0", 10.0, 10.9)),
            (12.0, ev.user_final("item_u1", "Thanks.")),
        ]
    )
    assert project(logged) == project(logged)
    assert project(logged)[:3] == project(logged[:-1])[:3]


# ── Live: the call's own timeline ───────────────────────────────────────────────


def _live(raws: list[dict[str, Any]]) -> list[LoggedInput]:
    return _at([(1_000.0 + index, raw) for index, raw in enumerate(raws)])


def test_a_live_answer_waited_from_the_caller_s_last_word_to_the_agent_s_first() -> None:
    """The caller's words end at 800 ms on the timeline and the agent's begin at 1,250 ms: heard
    450 ms, all of it the provider's (the model took the turn itself)."""
    raws = [
        *lc.listening(),
        lc.said("Hi there friend", 200),  # three words of 200 ms: 200 → 800
        lc.said("Hello! How can I help?", 1_250, Speaker.AGENT),
        lc.closed("remote_hangup"),
    ]
    [agent] = _agent_turns(_live(raws))
    assert agent["heard_ms"] == 450
    assert agent["heard"] == {"switchboard_ms": 0, "provider_ms": 450}


def test_live_agent_words_after_the_agent_s_own_are_no_answer_to_the_caller() -> None:
    """A second agent turn with no caller words between is unheard; a turn that began before the
    caller stopped (an overlap) is no wait either."""
    raws = [
        *lc.listening(),
        lc.said("Could you check", 0),  # 0 → 600
        lc.said("Let me look.", 900, Speaker.AGENT),
        lc.said("It ships Friday.", 4_000, Speaker.AGENT),
        lc.said("Oh and one more thing", 5_000),  # 5,000 → 6,000
        lc.said("Sure.", 5_800, Speaker.AGENT),
        lc.closed("remote_hangup"),
    ]
    agents = _agent_turns(_live(raws))
    assert [agent["heard_ms"] for agent in agents] == [300, None, None]
    assert heard_latency(project(_live(raws))) == {"p50_ms": 300, "p95_ms": 300, "turns": 1}


def _commentary_placed(start_ms: int) -> dict[str, Any]:
    return {
        "type": "session.commentary.appended",
        "event_id": f"event_placed_{start_ms}",
        "start_ms": start_ms,
        "end_ms": start_ms,
    }


def test_a_live_answer_that_was_switchboard_s_commentary_counts_its_wait_up_to_it_as_switchboard_s() -> None:
    """The caller's words end at 600 ms; Switchboard's commentary takes its place at 1,000 ms and
    the agent says it from 1,300 ms: heard 700 ms, 400 of them Switchboard's. An acknowledgement
    spoken before the commentary came was the model's own: none of that wait is Switchboard's."""
    raws = [
        *lc.listening(),
        lc.said("Could you check", 0),  # 0 → 600
        lc.delegated("D1", 400),
        lc.finished("D1"),
        _commentary_placed(1_000),
        lc.said("It ships Friday.", 1_300, Speaker.AGENT),
        lc.said("And the other one", 3_000),  # 3,000 → 3,800
        lc.said("Okay, checking now.", 4_100, Speaker.AGENT),
        _commentary_placed(4_600),
        lc.closed("remote_hangup"),
    ]
    answered, acknowledged = _agent_turns(_live(raws))
    assert answered["heard_ms"] == 700
    assert answered["heard"] == {"switchboard_ms": 400, "provider_ms": 300}
    assert acknowledged["heard"] == {"switchboard_ms": 0, "provider_ms": 300}
