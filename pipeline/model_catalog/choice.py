"""A session's model, voice, reasoning effort and transcription, checked against the catalog.

What a session asks for is refused when the catalog says it cannot be: an unknown model, one of
the other API, a voice the model lacks, an effort it does not take, a transcription model that is
not one or a field it does not take. Each refusal names the field and the values allowed. A model
past its shutdown is refused naming its replacement (`model_retired`); one near it is accepted
with a warning."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from pipeline.call.errors import MalformedRequest, ModelRetired
from pipeline.model_catalog.entries import Api, Catalog, ModelEntry

# A shutdown this close is warned about: in the answer, the log, a metric and the console.
WARN_WITHIN_DAYS = 30
# A custom voice (made with OpenAI's voices API) is named by its id; the catalog cannot list them.
CUSTOM_VOICE = re.compile(r"^voice_[A-Za-z0-9]{1,64}$")


@dataclass(frozen=True)
class Defaults:
    """The deployment's models for a session that names none (settings, checked at start)."""

    realtime: str
    live: str
    transcription: str


@dataclass(frozen=True)
class Chosen:
    """What a session talks to, as the catalog allowed it."""

    model: ModelEntry
    voice: str | None
    reasoning_effort: str | None
    # `audio.input.transcription` as sent (Realtime; None on Live, which transcribes by itself).
    transcription: dict[str, Any] | None
    # None: the model takes no `parallel_tool_calls`; else whether tool calls run in parallel.
    parallel_tool_calls: bool | None
    warnings: tuple[str, ...]


def chosen(
    *,
    api: Api,
    model: str | None,
    voice: str | None,
    reasoning_effort: str | None,
    transcription: dict[str, Any] | None,
    tools_in_parallel: bool,
    catalog: Catalog,
    defaults: Defaults,
    today: date,
) -> Chosen:
    """The session's choice, each part checked against the catalog (raises MalformedRequest
    naming the field, or ModelRetired naming the replacement)."""
    warnings: list[str] = []
    entry = _model(
        api, model or (defaults.realtime if api == "realtime" else defaults.live), catalog, "model"
    )
    warnings.extend(_retiring(entry, today, "model"))
    if voice is not None and voice not in entry.voices and not CUSTOM_VOICE.match(voice):
        raise MalformedRequest(
            f"voice: {entry.id} has no voice {voice!r} (allowed: {', '.join(entry.voices)})"
        )
    if reasoning_effort is not None and reasoning_effort not in entry.reasoning_efforts:
        allowed = ", ".join(entry.reasoning_efforts) or f"none: {entry.id} does not reason"
        raise MalformedRequest(
            f"reasoning.effort: {entry.id} does not take {reasoning_effort!r} (allowed: {allowed})"
        )
    if tools_in_parallel and not entry.parallel_tool_calls:
        capable = ", ".join(each.id for each in catalog.of_api(api) if each.parallel_tool_calls) or "none"
        raise MalformedRequest(
            f"tools_in_parallel: {entry.id} does not call tools in parallel (models that do: {capable})"
        )
    sent: dict[str, Any] | None = None
    if api == "live":
        if transcription is not None:
            raise MalformedRequest(
                "transcription: a Live session transcribes by itself; it takes no transcription"
            )
    else:
        asked = dict(transcription or {})
        transcriber = _model(
            "transcription",
            asked.pop("model", None) or defaults.transcription,
            catalog,
            "transcription.model",
        )
        warnings.extend(_retiring(transcriber, today, "transcription.model"))
        for field in asked:
            if field not in transcriber.takes:
                allowed = ", ".join(transcriber.takes) or "none"
                raise MalformedRequest(
                    f"transcription.{field}: {transcriber.id} does not take it (it takes: {allowed})"
                )
        sent = {"model": transcriber.id, **asked}
    return Chosen(
        model=entry,
        voice=voice,
        reasoning_effort=reasoning_effort,
        transcription=sent,
        parallel_tool_calls=tools_in_parallel if entry.parallel_tool_calls else None,
        warnings=tuple(warnings),
    )


def _model(api: Api, model_id: str, catalog: Catalog, field: str) -> ModelEntry:
    entry = catalog.get(model_id)
    if entry is None or entry.api != api:
        allowed = ", ".join(each.id for each in catalog.of_api(api))
        what = "not in the catalog" if entry is None else f"a {entry.api} model"
        raise MalformedRequest(f"{field}: {model_id!r} is {what}, not a {api} model (allowed: {allowed})")
    return entry


def _retiring(entry: ModelEntry, today: date, field: str) -> list[str]:
    """A warning when `entry` shuts down within WARN_WITHIN_DAYS; ModelRetired once it has."""
    if entry.shutdown_date is None:
        return []
    left = (entry.shutdown_date - today).days
    instead = f"; use {entry.replacement}" if entry.replacement else ""
    if left <= 0:
        raise ModelRetired(f"{field}: {entry.id} was shut down on {entry.shutdown_date.isoformat()}{instead}")
    if left <= WARN_WITHIN_DAYS:
        return [
            f"{field}: {entry.id} shuts down on {entry.shutdown_date.isoformat()}, in {left} days{instead}"
        ]
    return []


def shutdown_warnings(asked: tuple[tuple[str, str], ...], catalog: Catalog, today: date) -> list[str]:
    """The warnings for models (by field) that shut down within WARN_WITHIN_DAYS."""
    warnings: list[str] = []
    for field, model_id in asked:
        entry = catalog.get(model_id)
        if entry is not None and entry.shutdown_date is not None and (entry.shutdown_date - today).days > 0:
            warnings.extend(_retiring(entry, today, field))
    return warnings


def retiring_message(entry: ModelEntry, today: date) -> str:
    """One line about a model that shuts down soon (or has), for the log and `doctor`."""
    left = (entry.shutdown_date - today).days if entry.shutdown_date else None
    when = "has shut down" if left is not None and left <= 0 else f"shuts down in {left} days"
    instead = f"; its replacement is {entry.replacement}" if entry.replacement else ""
    shutdown = entry.shutdown_date.isoformat() if entry.shutdown_date else "?"
    return f"{entry.id} {when} ({shutdown}){instead}"
