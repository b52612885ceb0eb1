"""A session's model, voice, effort and transcription, checked against the catalog
(pipeline.model_catalog.choice): every refusal names the field and what is allowed; a retired
model is refused naming its replacement; one near its shutdown is warned about."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import pytest

from pipeline.call.errors import MalformedRequest, ModelRetired
from pipeline.model_catalog.choice import Defaults, chosen
from pipeline.model_catalog.entries import read_catalog

CATALOG = read_catalog()
DEFAULTS = Defaults(realtime="gpt-realtime-2.1", live="gpt-live-1.1", transcription="gpt-transcribe")
TODAY = date(2026, 12, 7)


def _chosen(api: Any = "realtime", today: date = TODAY, **asked: Any) -> Any:
    return chosen(
        api=api,
        model=asked.get("model"),
        voice=asked.get("voice"),
        reasoning_effort=asked.get("effort"),
        transcription=asked.get("transcription"),
        tools_in_parallel=asked.get("tools_in_parallel", False),
        catalog=CATALOG,
        defaults=DEFAULTS,
        today=today,
    )


def test_a_session_that_names_nothing_gets_the_deployment_s_defaults() -> None:
    realtime = _chosen()
    assert realtime.model.id == "gpt-realtime-2.1"
    assert realtime.transcription == {"model": "gpt-transcribe"}
    assert realtime.parallel_tool_calls is False  # the model takes the field: one at a time
    assert realtime.warnings == ()
    live = _chosen("live")
    assert (live.model.id, live.transcription, live.parallel_tool_calls) == ("gpt-live-1.1", None, None)


def test_what_a_session_names_is_kept_as_asked() -> None:
    choice = _chosen(
        model="gpt-realtime-2.1-mini",
        voice="cedar",
        effort="low",
        transcription={"model": "gpt-live-transcribe", "languages": ["en", "de"], "keywords": ["Ada"]},
        tools_in_parallel=True,
    )
    assert (choice.model.id, choice.voice, choice.reasoning_effort, choice.parallel_tool_calls) == (
        "gpt-realtime-2.1-mini",
        "cedar",
        "low",
        True,
    )
    assert choice.transcription == {
        "model": "gpt-live-transcribe",
        "languages": ["en", "de"],
        "keywords": ["Ada"],
    }
    assert _chosen(model="gpt-realtime-1.5").parallel_tool_calls is None  # it takes no such field
    assert _chosen(voice="voice_abc123").voice == "voice_abc123"  # a custom voice, by its id


@pytest.mark.parametrize(
    ("api", "asked", "named"),
    [
        (
            "realtime",
            {"model": "gpt-5-voice"},
            "model: 'gpt-5-voice' is not in the catalog, not a realtime model (allowed: gpt-realtime-2.1,",
        ),
        (
            "realtime",
            {"model": "gpt-live-1.1"},
            "model: 'gpt-live-1.1' is a live model, not a realtime model",
        ),
        (
            "live",
            {"model": "gpt-realtime-2.1"},
            "model: 'gpt-realtime-2.1' is a realtime model, not a live model",
        ),
        ("realtime", {"voice": "beacon"}, "voice: gpt-realtime-2.1 has no voice 'beacon' (allowed: alloy,"),
        (
            "realtime",
            {"model": "gpt-realtime-1.5", "effort": "low"},
            "reasoning.effort: gpt-realtime-1.5 does not take 'low' (allowed: none",
        ),
        (
            "realtime",
            {"transcription": {"model": "gpt-realtime-2.1"}},
            "transcription.model: 'gpt-realtime-2.1' is a realtime model, not a transcription model",
        ),
        (
            "realtime",
            {"transcription": {"model": "gpt-transcribe", "language": "en"}},
            "transcription.language: gpt-transcribe does not take it (it takes: prompt, keywords, languages)",
        ),
        (
            "realtime",
            {"transcription": {"model": "gpt-realtime-whisper", "prompt": "x"}},
            "transcription.prompt: gpt-realtime-whisper does not take it (it takes: delay)",
        ),
        (
            "live",
            {"transcription": {"model": "gpt-transcribe"}},
            "transcription: a Live session transcribes by itself",
        ),
        (
            "realtime",
            {"model": "gpt-realtime-1.5", "tools_in_parallel": True},
            "tools_in_parallel: gpt-realtime-1.5 does not call tools in parallel (models that do:",
        ),
    ],
    ids=[
        "unknown",
        "live_on_realtime",
        "realtime_on_live",
        "voice",
        "effort",
        "not_a_transcriber",
        "language_singular",
        "whisper_prompt",
        "live_transcription",
        "parallel",
    ],
)
def test_what_the_model_cannot_do_is_refused_naming_the_field(
    api: Any, asked: dict[str, Any], named: str
) -> None:
    with pytest.raises(MalformedRequest) as refused:
        _chosen(api, **asked)
    assert str(refused.value).startswith(named), str(refused.value)
    assert refused.value.code == "malformed_request"


def test_a_model_past_its_shutdown_is_refused_naming_its_replacement() -> None:
    with pytest.raises(ModelRetired) as refused:
        _chosen(model="gpt-realtime", today=date(2027, 1, 20))
    assert refused.value.code == "model_retired"
    assert str(refused.value) == "model: gpt-realtime was shut down on 2027-01-20; use gpt-realtime-2.1"
    with pytest.raises(
        ModelRetired,
        match=re.escape("transcription.model: whisper-1 was shut down on 2027-02-26; use gpt-transcribe"),
    ):
        _chosen(transcription={"model": "whisper-1"}, today=date(2027, 3, 1))


def test_a_model_within_thirty_days_of_its_shutdown_is_accepted_with_a_warning() -> None:
    near = _chosen(model="gpt-realtime", today=date(2027, 1, 1))
    assert near.model.id == "gpt-realtime"
    assert near.warnings == (
        "model: gpt-realtime shuts down on 2027-01-20, in 19 days; use gpt-realtime-2.1",
    )
    assert _chosen(model="gpt-realtime", today=date(2026, 12, 7)).warnings == ()  # 44 days: not yet
    transcriber = _chosen(transcription={"model": "gpt-4o-transcribe"}, today=date(2027, 2, 10))
    assert transcriber.warnings == (
        "transcription.model: gpt-4o-transcribe shuts down on 2027-02-26, in 16 days; use gpt-transcribe",
    )
