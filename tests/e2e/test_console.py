"""The operator console in a real browser (Debian's headless Chromium over the DevTools
protocol): the calls list, a live call's transcript growing, a whisper and a take-over from its
buttons appearing in its call log, a refusal shown, and the dead letters page. Screenshots go
to .switchboard/screenshots/ (docs/console.png is one of them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script
from tests.support.browser import Browser

SCREENSHOTS = Path(__file__).resolve().parents[2] / ".switchboard" / "screenshots"


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()


def test_the_console_shows_a_live_call_and_steers_it(stack: Stack, client: Client, browser: Browser) -> None:
    set_script(
        stack,
        {
            "name": "console",
            "timing": {"response_wait_ms": 3_000},
            "caller": [
                {"say": "Hi, I'd like to check on an order.", "after_ms": 600},
                {"say": "It's order 4417.", "after_ms": 900},
                {"say": "And can you hold it for me?", "after_ms": 900},
                {"hangup": True, "after_ms": 30_000},
            ],
            "model": [
                {"say": "Of course. What's the order number?"},
                {"say": "Order 4417 shipped yesterday."},
                {"say": "I can ask someone for you."},
            ],
        },
    )
    session = client.create_session("You are the order desk.")
    sid = session["id"]
    client.connect(sid)

    browser.goto(f"{stack.api_url}/console")
    assert browser.eval("document.querySelector('main').textContent").startswith("Enter an API key")
    browser.eval(
        f"document.getElementById('key').value = {json.dumps(stack.api_token)};"
        "document.getElementById('me').value = 'Dana';"
        "document.getElementById('key-form').requestSubmit(); true"
    )
    browser.wait_for(f"!!document.querySelector('tr[data-session={json.dumps(sid)}]')")
    counts = browser.eval("document.getElementById('counts').textContent")
    assert any(f"{phase}: " in counts for phase in ("connected", "listening", "responding")), counts
    browser.screenshot(SCREENSHOTS / "console-calls.png")

    browser.eval(f"location.hash = '#/call/{sid}'; true")
    browser.wait_for("document.querySelectorAll('#transcript p').length >= 1")
    first = browser.eval("document.querySelectorAll('#transcript p').length")
    browser.wait_for(f"document.querySelectorAll('#transcript p').length > {first}")  # it grows
    browser.wait_for("document.querySelectorAll('#timeline li[data-kind=\"turn.agent\"]').length >= 1")

    browser.eval(
        "document.getElementById('verb-text').value = 'The customer is a VIP.';"
        " document.getElementById('whisper').click(); true"
    )
    browser.wait_for("!!document.querySelector('#timeline li[data-kind=\"supervisor.whispered\"]')")
    assert browser.eval("document.getElementById('verb-answer').textContent").startswith("202")

    assert browser.eval("document.getElementById('line').textContent") == "line: free"
    browser.eval("document.getElementById('take-over').click(); true")
    browser.wait_for("!!document.querySelector('#timeline li[data-kind=\"supervisor.took_over\"]')")
    browser.wait_for("document.getElementById('line').textContent === 'line: taken over by Dana'")
    browser.eval("document.getElementById('take-over').click(); true")
    browser.wait_for("document.getElementById('verb-answer').textContent.includes('already_held')")
    assert "refused" in browser.eval("document.getElementById('verb-answer').className")
    taken = [e for e in client.call_log(sid)["entries"] if e["kind"] == "supervisor.took_over"]
    assert taken[0]["data"]["by"] == {"id": "Dana", "name": "Dana"}
    browser.screenshot(SCREENSHOTS / "console-call.png")

    browser.eval("document.getElementById('end').click(); true")
    browser.wait_for(
        "document.getElementById('status') && document.getElementById('status').textContent === 'ended'"
    )

    browser.eval("location.hash = '#/dead-letters'; true")
    browser.wait_for("!!document.getElementById('dead-letters')")
    assert browser.errors == []


def test_the_console_page_holds_no_data_and_serves_only_its_own_assets(stack: Stack) -> None:
    """The page and its script load without a key (they hold nothing), under a policy that
    runs only their own script; anything else under /console is 404; the API still needs a key."""
    import urllib.error
    import urllib.request

    with urllib.request.urlopen(f"{stack.api_url}/console", timeout=10) as page:
        assert page.status == 200 and "script-src 'self'" in page.headers["Content-Security-Policy"]
        assert b"/console/console.js" in page.read()
    for path in ("/console/console.js", "/console/console.css"):
        with urllib.request.urlopen(f"{stack.api_url}{path}", timeout=10) as asset:
            assert asset.status == 200
    for path in ("/console/console.html.bak", "/console/..%2F..%2Fpyproject.toml", "/v1/sessions"):
        try:
            urllib.request.urlopen(f"{stack.api_url}{path}", timeout=10)
        except urllib.error.HTTPError as refused:
            assert refused.code in (401, 404), path
        else:
            raise AssertionError(f"{path} was served")
