"""Models as a catalog, end to end (issue 46): a session on each current model runs through the
simulator with its model in the record and the provider's configuration, its cost from the
catalog alone and, on Realtime, its compaction threshold from the model's context; a retired
model is refused naming its replacement, and one near its shutdown is warned about in the answer,
the gateway's log, its metric and `GET /v1/models`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline.model_catalog.entries import read_catalog
from pipeline.platform.cost import cost_usd
from pipeline.session.state import Usage
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script, simulator_call
from tests.support.browser import Browser
from tests.support.live import QUICK_TIMING, live_session, set_live_script

CATALOG = read_catalog()


def _realtime_call(client: Client, stack: Stack, **spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A spoken Realtime call on `spec`'s model, to its end: its record and the simulator's log."""
    set_script(stack, SCRIPTS / "spoken_call.json")
    session = client.create_session("You are a helpful agent.", **spec)
    connected = client.connect(session["id"])
    record = client.wait_for_status(session["id"], timeout_s=60)
    return record, simulator_call(stack, connected["call_id"])


def _priced(record: dict[str, Any], model: str) -> float | None:
    entry = CATALOG.entries[model]
    assert entry.prices is not None
    return cost_usd(Usage.model_validate(record["usage"]), entry.prices.for_calls())


@pytest.mark.parametrize("model", ["gpt-realtime-2.1", "gpt-realtime-2.1-mini"])
def test_a_realtime_call_on_each_current_model(stack: Stack, client: Client, model: str) -> None:
    record, call = _realtime_call(client, stack, model=model, voice="cedar", reasoning={"effort": "low"})

    assert record["status"] == "ended" and (record["model"], record["voice"]) == (model, "cedar")
    assert record["usage"]["output_tokens"] > 0
    assert record["cost_usd"] == _priced(record, model) and record["cost_usd"] > 0
    # Half the model's context: no limit was set by the session or the deployment.
    context = CATALOG.entries[model].context_tokens
    assert context is not None and record["compaction"]["threshold_tokens"] == context // 2
    # The call was created with the model (the provider's session says so once it is configured).
    [updated, *_] = [e["event"] for e in call["events"] if e["event"]["type"] == "session.updated"]
    assert updated["session"]["model"] == model
    [configured, *_] = [c["control"] for c in call["controls"] if c["control"]["type"] == "session.update"]
    session = configured["session"]
    assert session["audio"]["input"]["transcription"] == {"model": "gpt-transcribe"}
    assert session["audio"]["output"]["voice"] == "cedar" and session["reasoning"] == {"effort": "low"}
    assert call["errors"] == []


@pytest.mark.parametrize("model", ["gpt-live-1.1", "gpt-live-1"])
def test_a_live_call_on_each_current_model(stack: Stack, client: Client, model: str) -> None:
    set_live_script(
        stack,
        {
            "timing": QUICK_TIMING,
            "caller": [{"say": "Hi there.", "after_ms": 100}, {"hangup": True, "after_ms": 2_500}],
        },
    )
    session = client.create_session("You are the order desk.", provider="live", model=model, voice="vesper")
    assert session["model"] == model
    connected = client.connect(session["id"])
    record = client.wait_for_status(session["id"], timeout_s=60)

    assert record["status"] == "ended" and record["model"] == model
    assert record["usage"]["active_seconds"] > 0
    assert record["cost_usd"] == _priced(record, model) and record["cost_usd"] > 0
    log = live_session(stack, connected["call_id"])
    assert log["config"]["model"] == model and log["errors"] == []
    assert log["config"]["audio"] == {"output": {"voice": "vesper"}}


def test_a_session_that_names_no_model_answers_the_default_it_got(stack: Stack, client: Client) -> None:
    realtime = client.create_session("Hi.")
    live = client.create_session("Hi.", provider="live")
    assert (realtime["model"], live["model"]) == ("gpt-realtime-2.1", "gpt-live-1.1")
    assert realtime["warnings"] == [] and live["warnings"] == []


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"model": "gpt-live-1.1"}, "model: 'gpt-live-1.1' is a live model, not a realtime model"),
        ({"model": "gpt-5-voice"}, "model: 'gpt-5-voice' is not in the catalog"),
        ({"voice": "beacon"}, "voice: gpt-realtime-2.1 has no voice 'beacon'"),
        (
            {"model": "gpt-realtime-1.5", "reasoning": {"effort": "high"}},
            "reasoning.effort: gpt-realtime-1.5",
        ),
        ({"transcription": {"model": "gpt-live-1.1"}}, "transcription.model: 'gpt-live-1.1' is a live model"),
        ({"transcription": {"model": "gpt-transcribe", "language": "en"}}, "transcription.language:"),
        ({"transcription": {"language": "en", "languages": ["en"]}}, "language and languages together"),
        ({"transcription": {"keywords": [f"word{n}" for n in range(500)]}}, "transcription.keywords"),
        (
            {"provider": "live", "transcription": {"model": "gpt-transcribe"}},
            "a Live session transcribes by itself",
        ),
        ({"model": "gpt-realtime-1.5", "tools_in_parallel": True}, "tools_in_parallel: gpt-realtime-1.5"),
    ],
    ids=[
        "other_api",
        "unknown",
        "voice",
        "effort",
        "not_a_transcriber",
        "singular_language",
        "both_languages",
        "500_keywords",
        "live_transcription",
        "parallel",
    ],
)
def test_what_the_model_cannot_do_is_refused_naming_the_field(
    client: Client, spec: dict[str, Any], named: str
) -> None:
    status, body = client.request("POST", "/v1/sessions", {"instructions": "Hi.", **spec})
    assert status == 422, body
    assert body["error"]["code"] == "malformed_request" and named in body["error"]["message"], body


@pytest.fixture(scope="module")
def retiring_stack(
    services: Services, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """A deployment whose own catalog file adds a model shut down yesterday and one that shuts
    down in ten days (the shipped models' dates are months away from any test run's)."""
    today = datetime.now(UTC).date()
    path: Path = tmp_path_factory.mktemp("catalog") / "models.toml"
    path.write_text(
        "".join(
            f'[[model]]\nid = "{name}"\napi = "realtime"\ncontext_tokens = 32_000\nvoices = ["marin"]\n'
            f'shutdown_date = {day.isoformat()}\nreplacement = "gpt-realtime-2.1"\n'
            f'source = "a test"\nchecked_on = {today.isoformat()}\n\n'
            for name, day in (
                ("gpt-realtime-old", today - timedelta(days=1)),
                ("gpt-realtime-soon", today + timedelta(days=10)),
            )
        )
    )
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-retiring",
        extra_env={"SWITCHBOARD_MODEL_CATALOG": str(path)},
    ) as running:
        running.start(workers=1)
        yield running


def test_a_retired_model_is_refused_and_a_retiring_one_warned_everywhere(retiring_stack: Stack) -> None:
    client = Client(retiring_stack.api_url, retiring_stack.api_token, retiring_stack.live_url)
    status, body = client.request(
        "POST", "/v1/sessions", {"instructions": "Hi.", "model": "gpt-realtime-old"}
    )
    assert status == 422 and body["error"]["code"] == "model_retired"
    assert "use gpt-realtime-2.1" in body["error"]["message"]

    warned = client.create_session("Hi.", model="gpt-realtime-soon")
    [warning] = warned["warnings"]
    assert warning.startswith("model: gpt-realtime-soon shuts down on") and "in 10 days" in warning
    assert client.session(warned["id"])["model"] == "gpt-realtime-soon"

    # The gateway said so once at start, and its metric counts the days left.
    gateway = retiring_stack.gateway
    assert gateway is not None
    warnings = [line for line in gateway.lines if "model gpt-realtime-soon shuts down in 10 days" in line]
    assert len(warnings) == 1
    status, scraped = client.request("GET", "/metrics")
    assert status == 200
    assert 'switchboard_model_retiring{model="gpt-realtime-soon"} 10.0' in scraped
    assert 'switchboard_model_retiring{model="gpt-realtime-old"} -1.0' in scraped
    assert (
        'model="gpt-realtime-2.1"' not in scraped.split("switchboard_model_retiring", 1)[1].split("# HELP")[0]
    )

    status, listed = client.request("GET", "/v1/models")
    assert status == 200
    models = {model["id"]: model for model in listed["models"]}
    assert models["gpt-realtime-soon"]["replacement"] == "gpt-realtime-2.1"
    assert models["gpt-realtime-2.1"]["context_tokens"] == 128_000  # the shipped entries stay


def test_the_console_names_a_model_near_its_shutdown_and_the_call_s_model(retiring_stack: Stack) -> None:
    client = Client(retiring_stack.api_url, retiring_stack.api_token, retiring_stack.live_url)
    session = client.create_session("Hi.", model="gpt-realtime-soon")
    browser = Browser()
    try:
        browser.goto(f"{retiring_stack.api_url}/console#/call/{session['id']}")
        browser.eval(
            f"document.getElementById('key').value = {json.dumps(retiring_stack.api_token)};"
            "document.getElementById('key-form').requestSubmit(); true"
        )
        browser.wait_for("document.querySelectorAll('#notices .banner').length > 0")
        notices = browser.eval(
            "Array.from(document.querySelectorAll('#notices .banner')).map(b => b.textContent)"
        )
        facts = browser.wait_for("(document.getElementById('call-facts') || {}).textContent")
    finally:
        browser.close()
    [soon] = [notice for notice in notices if notice.startswith("gpt-realtime-soon")]
    assert "in 10 days" in soon and "gpt-realtime-2.1" in soon
    [old] = [notice for notice in notices if notice.startswith("gpt-realtime-old")]
    assert "was shut down on" in old
    assert not any(notice.startswith("gpt-realtime-2.1") for notice in notices)
    assert "Model gpt-realtime-soon" in facts


def test_the_catalog_is_answered_as_the_api_describes_it(client: Client) -> None:
    status, listed = client.request("GET", "/v1/models")
    assert status == 200
    ids = [model["id"] for model in listed["models"]]
    assert ids == list(CATALOG.entries)
    realtime = next(model for model in listed["models"] if model["id"] == "gpt-realtime")
    assert (realtime["shutdown_date"], realtime["replacement"], realtime["prices"]) == (
        "2027-01-20",
        "gpt-realtime-2.1",
        None,
    )
    status, _ = Client(client.api_url, "not-a-key").request("GET", "/v1/models")
    assert status == 401
