"""The model catalog (pipeline/model_catalog): every shipped entry reads and is sourced; no
default names a model near its shutdown; a catalog file that is wrong stops the process at
start naming the entry; the operator's file replaces entries by id."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from pipeline.model_catalog.entries import CatalogError, read_catalog
from pipeline.platform.config import ConfigError, Settings, settings_from

# A default this close to its shutdown fails the build, so the next notice is seen in CI and not
# by a caller (the API warns 30 days ahead; a release needs the rest).
DEFAULT_SHUTDOWN_MARGIN_DAYS = 60


def test_no_default_model_shuts_down_within_sixty_days_of_today() -> None:
    settings = Settings()
    today = datetime.now(UTC).date()
    for setting in ("provider_model", "live_model", "transcription_model"):
        entry = settings.catalog.get(getattr(settings, setting))
        assert entry is not None, setting
        if entry.shutdown_date is not None:
            left = (entry.shutdown_date - today).days
            assert left > DEFAULT_SHUTDOWN_MARGIN_DAYS, (
                f"{setting} = {entry.id} shuts down on {entry.shutdown_date} ({left} days):"
                f" move the default to {entry.replacement}"
            )


def test_the_defaults_are_the_current_models() -> None:
    settings = Settings()
    assert (settings.provider_model, settings.live_model, settings.transcription_model) == (
        "gpt-realtime-2.1",
        "gpt-live-1.1",
        "gpt-transcribe",
    )


def test_every_shipped_entry_says_where_it_came_from_and_each_replacement_is_current() -> None:
    catalog = read_catalog()
    assert {"gpt-realtime-2.1", "gpt-realtime-2.1-mini", "gpt-live-1.1", "gpt-live-1"} <= set(catalog.entries)
    for entry in catalog.entries.values():
        assert entry.source and entry.checked_on <= datetime.now(UTC).date()
        if entry.replacement is not None:
            replacement = catalog.entries[entry.replacement]
            assert replacement.api == entry.api and replacement.shutdown_date is None, entry.id
    # The notices this catalog was written from (PROTOCOL.md, "Models and their lifecycle").
    assert catalog.entries["gpt-realtime"].shutdown_date == date(2027, 1, 20)
    assert catalog.entries["gpt-realtime-mini"].shutdown_date == date(2027, 1, 20)
    for transcriber in (
        "whisper-1",
        "gpt-4o-transcribe",
        "gpt-4o-mini-transcribe",
        "gpt-4o-transcribe-diarize",
    ):
        assert catalog.entries[transcriber].shutdown_date == date(2027, 2, 26)
    assert catalog.entries["gpt-realtime-2.1"].parallel_tool_calls
    assert catalog.entries["gpt-live-1.1"].delegation_policy == "plain"


def test_models_within_a_window_of_their_shutdown_are_found() -> None:
    catalog = read_catalog()
    on_the_eve = date(2027, 1, 19)
    assert {entry.id for entry in catalog.retiring(on_the_eve, 30)} == {"gpt-realtime", "gpt-realtime-mini"}
    assert {entry.id for entry in catalog.retiring(date(2027, 2, 1), 30)} >= {
        "whisper-1",
        "gpt-4o-transcribe",
    }
    assert catalog.retiring(date(2026, 12, 1), 30) == ()


def _catalog_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_the_operator_s_file_replaces_an_entry_by_id_and_adds_others(tmp_path: Path) -> None:
    path = _catalog_file(
        tmp_path,
        """
[[model]]
id = "gpt-realtime-2.1"
api = "realtime"
context_tokens = 256_000
output_tokens = 32_000
voices = ["marin"]
source = "our account manager"
checked_on = 2026-12-01

[[model]]
id = "gpt-realtime-3"
api = "realtime"
context_tokens = 256_000
source = "the launch notice"
checked_on = 2026-12-01
""",
    )
    settings = settings_from({"SWITCHBOARD_MODEL_CATALOG": str(path)})
    assert settings.catalog.entries["gpt-realtime-2.1"].context_tokens == 256_000
    assert settings.catalog.entries["gpt-realtime-2.1"].prices is None  # replaced whole, not merged
    assert "gpt-realtime-3" in settings.catalog.entries
    assert "gpt-live-1.1" in settings.catalog.entries


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[[model]\nid = ", "not TOML"),
        (
            '[[model]]\nid = "x-1"\napi = "realtime"\nsource = "s"\n',
            "entry 1 (x-1): checked_on: Field required",
        ),
        (
            '[[model]]\nid = "x-1"\napi = "telepathy"\nsource = "s"\nchecked_on = 2026-12-01\n',
            "entry 1 (x-1): api:",
        ),
        (
            '[[model]]\nid = "x-1"\napi = "live"\nsource = "s"\nchecked_on = 2026-12-01\n'
            "prices = {active_minute = -1}\n",
            "entry 1 (x-1): prices.active_minute",
        ),
        (
            '[[model]]\nid = "x-1"\napi = "live"\nsource = "s"\nchecked_on = 2026-12-01\ncontext = 5\n',
            "entry 1 (x-1): context: Extra inputs are not permitted",
        ),
        (
            '[[model]]\nid = "x-1"\napi = "live"\nsource = "s"\nchecked_on = 2026-12-01\n'
            'shutdown_date = 2027-01-01\nreplacement = "nope"\n',
            "x-1: its replacement 'nope' is not a live model in the catalog",
        ),
        ('[models]\nid = "x"\n', "only [[model]] entries belong in it"),
    ],
    ids=[
        "not_toml",
        "no_checked_on",
        "unknown_api",
        "negative_price",
        "misspelt_field",
        "unknown_replacement",
        "wrong_table",
    ],
)
def test_a_catalog_file_that_is_wrong_is_refused_naming_the_entry(
    tmp_path: Path, text: str, named: str
) -> None:
    path = _catalog_file(tmp_path, text)
    with pytest.raises(CatalogError) as raised:
        read_catalog(path)
    assert named in str(raised.value) and str(path) in str(raised.value)
    with pytest.raises(ConfigError) as refused:
        settings_from({"SWITCHBOARD_MODEL_CATALOG": str(path)})
    assert named in str(refused.value)


def test_a_default_that_is_not_a_model_of_its_api_is_refused_at_start() -> None:
    with pytest.raises(
        ConfigError, match=re.escape("SWITCHBOARD_PROVIDER_MODEL: 'gpt-live-1.1' is not a realtime model")
    ):
        settings_from({"SWITCHBOARD_PROVIDER_MODEL": "gpt-live-1.1"})
    with pytest.raises(
        ConfigError,
        match=re.escape("SWITCHBOARD_TRANSCRIPTION_MODEL: 'gpt-realtime-2.1' is not a transcription"),
    ):
        settings_from({"SWITCHBOARD_TRANSCRIPTION_MODEL": "gpt-realtime-2.1"})
    with pytest.raises(
        ConfigError, match=re.escape("LIVE_MAX_SESSIONS: 'gpt-realtime-2.1' is not a Live model")
    ):
        settings_from({"SWITCHBOARD_LIVE_MAX_SESSIONS": '{"gpt-realtime-2.1": 5}'})


def test_the_operator_s_price_wins_over_the_catalog_s_never_the_reverse() -> None:
    catalog_price = Settings().prices_for("gpt-realtime-2.1")
    assert catalog_price is not None and catalog_price.audio.input == 32.0
    negotiated = settings_from(
        {"SWITCHBOARD_PRICES": '{"gpt-realtime-2.1": {"audio": {"input": 20, "cached": 0.3, "output": 40}}}'}
    )
    price = negotiated.prices_for("gpt-realtime-2.1")
    assert price is not None and (price.audio.input, price.text.input) == (20, 0)
    assert negotiated.prices_for("gpt-realtime-2.1-mini") == Settings().prices_for("gpt-realtime-2.1-mini")
    assert Settings().prices_for("gpt-realtime") is None  # nobody published one: no cost, not a guess
    live = Settings().prices_for("gpt-live-1.1")
    assert live is not None and live.active_minute == 0.05


def test_a_process_given_a_catalog_that_does_not_parse_stops_at_start_with_one_line(tmp_path: Path) -> None:
    path = _catalog_file(tmp_path, '[[model]]\nid = "x-1"\napi = "live"\nsource = "s"\n')
    finished = subprocess.run(
        [sys.executable, "-m", "switchboard", "models", "list"],
        env={**os.environ, "SWITCHBOARD_MODEL_CATALOG": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 2 and finished.stdout == ""
    [line] = finished.stderr.splitlines()
    assert line.startswith("switchboard: ") and "entry 1 (x-1): checked_on: Field required" in line
