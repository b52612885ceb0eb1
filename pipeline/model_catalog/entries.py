"""The model catalog: which models exist, the API each speaks, its limits, prices and voices, and
when it shuts down (`models.toml` beside this module, and an operator's own file on top).

An entry is checked when the catalog is read: a misspelt field, a price below zero or a
replacement that is not in the catalog stops the process at start, naming the entry, rather than
a call finding it out."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.model_catalog.prices import ModelPrices

SHIPPED = Path(__file__).with_name("models.toml")

Api = Literal["realtime", "live", "transcription"]
Effort = Literal["minimal", "low", "medium", "high", "xhigh"]
# What a transcription model takes besides its name (`audio.input.transcription`).
TranscriptionField = Literal["language", "languages", "prompt", "keywords", "delay"]


class CatalogPrices(ModelPrices):
    """An entry's prices: a model's tokens (and a Live model's minutes) as a call's cost counts
    them, and what a minute of standby or of transcription costs, for the catalog's reader."""

    standby_minute: float | None = Field(default=None, ge=0)
    transcription_minute: float | None = Field(default=None, ge=0)

    def for_calls(self) -> ModelPrices:
        """The prices a call's usage is charged at."""
        return ModelPrices(text=self.text, audio=self.audio, active_minute=self.active_minute)


class ModelEntry(BaseModel):
    """One model as the catalog has it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    api: Api
    context_tokens: int | None = Field(default=None, ge=1)
    output_tokens: int | None = Field(default=None, ge=1)
    # None: no price was published, so a call on this model has no cost (never a guessed one).
    prices: CatalogPrices | None = None
    voices: tuple[str, ...] = ()
    reasoning_efforts: tuple[Effort, ...] = ()
    preambles: bool = False
    parallel_tool_calls: bool = False
    # Live: how the instructions say when to delegate ("marker": with gpt-live-1's token).
    delegation_policy: Literal["plain", "marker"] | None = None
    # Transcription: the fields of `audio.input.transcription` it takes besides `model`.
    takes: tuple[TranscriptionField, ...] = ()
    deprecated_on: date | None = None
    shutdown_date: date | None = None
    replacement: str | None = None
    source: str = Field(min_length=1)
    checked_on: date

    def answer(self) -> dict[str, Any]:
        """The entry as `GET /v1/models` answers it."""
        return {
            "id": self.id,
            "api": self.api,
            "context_tokens": self.context_tokens,
            "output_tokens": self.output_tokens,
            "prices": None if self.prices is None else self.prices.model_dump(mode="json", exclude_none=True),
            "voices": list(self.voices),
            "reasoning_efforts": list(self.reasoning_efforts),
            "preambles": self.preambles,
            "parallel_tool_calls": self.parallel_tool_calls,
            "transcription_fields": list(self.takes),
            "deprecated_on": _day(self.deprecated_on),
            "shutdown_date": _day(self.shutdown_date),
            "replacement": self.replacement,
            "source": self.source,
            "checked_on": _day(self.checked_on),
        }


def _day(value: date | None) -> str | None:
    return None if value is None else value.isoformat()


class CatalogError(ValueError):
    """A catalog file that cannot be used: the message names the file and the entry."""


@dataclass(frozen=True)
class Catalog:
    """The models by id, in the order the files list them."""

    entries: Mapping[str, ModelEntry]

    def get(self, model_id: str) -> ModelEntry | None:
        return self.entries.get(model_id)

    def of_api(self, api: Api) -> tuple[ModelEntry, ...]:
        return tuple(entry for entry in self.entries.values() if entry.api == api)

    def retiring(self, today: date, within_days: int) -> tuple[ModelEntry, ...]:
        """The models whose shutdown is at most `within_days` away (or past)."""
        return tuple(
            entry
            for entry in self.entries.values()
            if entry.shutdown_date is not None and (entry.shutdown_date - today).days <= within_days
        )


@cache
def read_catalog(extra: Path | None = None) -> Catalog:
    """The shipped catalog, with the entries of `extra` (an operator's file) replacing or adding
    to it by id; raises CatalogError naming the entry that is wrong."""
    entries = dict(_entries(SHIPPED))
    if extra is not None:
        entries.update(_entries(extra))
    _check_replacements(entries.values(), extra or SHIPPED)
    return Catalog(entries=entries)


def _entries(path: Path) -> Iterable[tuple[str, ModelEntry]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise CatalogError(f"model catalog {path}: cannot be read ({error.strerror or error})") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise CatalogError(f"model catalog {path}: not TOML ({error})") from error
    unknown = set(data) - {"model"}
    if unknown:
        raise CatalogError(
            f"model catalog {path}: only [[model]] entries belong in it, not {sorted(unknown)}"
        )
    raw = data.get("model", [])
    if not isinstance(raw, list):
        raise CatalogError(f"model catalog {path}: `model` must be a list of [[model]] tables")
    seen: set[str] = set()
    for index, item in enumerate(raw):
        name = item.get("id") if isinstance(item, dict) else None
        where = f"entry {index + 1}" + (f" ({name})" if isinstance(name, str) else "")
        try:
            entry = ModelEntry.model_validate(item)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, each['loc'])) or 'entry'}: {each['msg']}" for each in error.errors()
            )
            raise CatalogError(f"model catalog {path}: {where}: {problems}") from error
        if entry.id in seen:
            raise CatalogError(f"model catalog {path}: {where}: {entry.id} is listed twice")
        seen.add(entry.id)
        if entry.replacement is not None and entry.shutdown_date is None:
            raise CatalogError(f"model catalog {path}: {where}: a replacement without a shutdown_date")
        yield entry.id, entry


def _check_replacements(entries: Iterable[ModelEntry], path: Path) -> None:
    listed = {entry.id: entry for entry in entries}
    for entry in listed.values():
        if entry.replacement is None:
            continue
        replacement = listed.get(entry.replacement)
        if replacement is None or replacement.api != entry.api:
            raise CatalogError(
                f"model catalog {path}: {entry.id}: its replacement {entry.replacement!r} is not"
                f" a {entry.api} model in the catalog"
            )
