"""`models` and `doctor`: the model catalog, and what in the deployment names a model that is
shutting down."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, date, datetime

from pipeline.model_catalog.choice import WARN_WITHIN_DAYS, retiring_message
from pipeline.model_catalog.entries import Catalog, ModelEntry
from pipeline.platform.config import Settings
from switchboard.cli.reach import IN_DATABASE, ON_THIS_MACHINE, apply_migrations, reach_services


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`models list` and `doctor`."""
    models = commands.add_parser(
        "models",
        help="the model catalog: list (API, limits, prices, voices, shutdown dates), "
        f"{ON_THIS_MACHINE} (the shipped catalog and SWITCHBOARD_MODEL_CATALOG)",
    )
    models.add_argument("action", choices=["list"], help="what to do")
    models.add_argument("--json", action="store_true", help="as GET /v1/models answers it")
    models.set_defaults(run=_models)
    doctor = commands.add_parser(
        "doctor",
        help=f"what names a model shutting down within {WARN_WITHIN_DAYS} days (or shut down): the "
        f"deployment's defaults, its routes, its campaigns still to run and its agents' published "
        f"versions, {IN_DATABASE}; exit 1 if any",
    )
    doctor.set_defaults(run=_doctor)


def _models(settings: Settings, arguments: argparse.Namespace) -> int:
    entries = list(settings.catalog.entries.values())
    if arguments.json:
        print(json.dumps({"models": [entry.answer() for entry in entries]}, indent=2))
        return 0
    print(_table(entries))
    return 0


def _table(entries: list[ModelEntry]) -> str:
    """The catalog as a table for a terminal: a model per line."""
    header = ("model", "api", "context", "output", "price", "shutdown", "replacement")
    rows = [header] + [
        (
            entry.id,
            entry.api,
            _tokens(entry.context_tokens),
            _tokens(entry.output_tokens),
            _price(entry),
            entry.shutdown_date.isoformat() if entry.shutdown_date else "",
            entry.replacement or "",
        )
        for entry in entries
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _tokens(count: int | None) -> str:
    return "" if count is None else f"{count // 1000}K" if count % 1000 == 0 else f"{count:,}"


def _price(entry: ModelEntry) -> str:
    """The price a reader compares models by: audio in/out per 1M tokens, or per minute."""
    prices = entry.prices
    if prices is None:
        return "not published"
    if prices.active_minute:
        return f"${prices.active_minute:g}/min active"
    if prices.transcription_minute is not None:
        return f"${prices.transcription_minute:g}/min"
    return f"audio ${prices.audio.input:g}/${prices.audio.output:g} per 1M"


def _doctor(settings: Settings, arguments: argparse.Namespace) -> int:
    from models.db import connect
    from models.model_uses import models_named

    today = datetime.now(UTC).date()
    findings = [
        f"default {setting} ({name}): {message}"
        for setting, name in (
            ("SWITCHBOARD_PROVIDER_MODEL", settings.provider_model),
            ("SWITCHBOARD_LIVE_MODEL", settings.live_model),
            ("SWITCHBOARD_TRANSCRIPTION_MODEL", settings.transcription_model),
        )
        if (message := _retiring(settings.catalog, name, today)) is not None
    ]
    services = reach_services(settings, quiet=True)
    connect(services.database_url)
    apply_migrations(services)
    for use in models_named(settings.broker_namespace):
        message = _retiring(settings.catalog, use.model, today)
        if message is not None:
            findings.append(f"{use.kind} {use.id} ({use.field}): {message}")
        elif settings.catalog.get(use.model) is None:
            findings.append(f"{use.kind} {use.id} ({use.field}): {use.model} is not in the model catalog")
    for finding in findings:
        print(finding)
    if not findings:
        within = f"within {WARN_WITHIN_DAYS} days"
        print(f"switchboard: no default, route or campaign names a model shutting down {within}")
        return 0
    print(f"switchboard: {len(findings)} to change before the provider refuses them", file=sys.stderr)
    return 1


def _retiring(catalog: Catalog, model: str, today: date) -> str | None:
    entry = catalog.get(model)
    if entry is None or entry.shutdown_date is None or (entry.shutdown_date - today).days > WARN_WITHIN_DAYS:
        return None
    return retiring_message(entry, today)
