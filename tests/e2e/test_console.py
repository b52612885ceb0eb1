"""The supervisor's console in a real browser (Debian's headless Chromium over the DevTools
protocol), on both providers: a person who opens a call mid-way reads what was said; a caller who
asks for a person appears in the queue and the line is taken from there; an ended call's buttons
are disabled; what a caller says is shown as text, never as markup; a viewer's key sees no button
that acts, and a key revoked while the page is open stops working and the page says so.
Screenshots go to .switchboard/screenshots/ (docs/console*.png are taken from them)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script
from tests.support.browser import Browser
from tests.support.live import QUICK_TIMING, set_live_script
from tests.support.phone import ring
from tests.support.waiting import wait_for

SCREENSHOTS = Path(__file__).resolve().parents[2] / ".switchboard" / "screenshots"
# What a caller might say to a supervisor's screen: shown as these characters, never run.
MARKUP = '<img src=x onerror="window.__injected = 1">'
DANA_SAYS = "This is Dana from billing: I'll sort the refund out now."
DANA_SAID = f"Dana said: “{DANA_SAYS}”"
ACTING = "#actions button:not(#confirm-yes):not(#confirm-no)"
# A caller whose every answer takes the model 2.2 s to begin: slower than the desk lets pass.
SLOW_SCRIPT = {
    "name": "slow",
    "caller": [
        {"say": "Hello, I'm calling about my bill.", "after_ms": 300},
        {"say": "It's twice what it was last month.", "after_ms": 300},
        {"hangup": True, "after_ms": 60_000},
    ],
    "model": [{"say": "Let me look at your bill."}, {"say": "I see the charge; one moment."}],
    "timing": {"first_audio_ms": 2_200},
}


@pytest.fixture(scope="module")
def stack(services: Services, namespace: str) -> Iterator[Stack]:
    """The e2e stack, in a deployment of this module's own: the calls list counts every session
    of its namespace, so another module's sessions (one never connected, one whose admission
    timer this worker fires) must not be counted here."""
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-console",
        simulator_args=("--script", str(SCRIPTS / "spoken_call.json")),
    ) as running:
        running.start(workers=1)
        yield running


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()


def _viewport(browser: Browser, width: int, height: int) -> None:
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )


def _shot(browser: Browser, name: str) -> Path:
    """What the viewport shows (not the whole page): the screen a person sees."""
    shot = browser.call("Page.captureScreenshot", {"format": "png"})
    path = SCREENSHOTS / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def _sign_in(browser: Browser, stack: Stack, key: str, name: str = "Dana", page: str = "") -> None:
    browser.goto(f"{stack.api_url}/console{page}")
    assert browser.eval("document.querySelector('main').textContent").startswith("Enter an API key")
    browser.eval(
        f"document.getElementById('key').value = {json.dumps(key)};"
        f"document.getElementById('me').value = {json.dumps(name)};"
        "document.getElementById('key-form').requestSubmit(); true"
    )
    browser.wait_for("document.getElementById('whoami').textContent !== ''")


def _text(browser: Browser, selector: str) -> str:
    return str(browser.eval(f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''"))


def _listening(client: Client, session_id: str) -> None:
    wait_for(
        lambda: client.session(session_id)["status"] in ("listening", "responding"), "the call to connect"
    )


LISTED = "document.querySelectorAll('#calls tr[data-session]').length"


def _search(browser: Browser, words: str) -> None:
    browser.eval(
        f"(() => {{ const box = document.getElementById('search'); box.value = {json.dumps(words)};"
        " box.dispatchEvent(new Event('input')); return true; })()"
    )


def _turns(client: Client, session_id: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in client.call_log(session_id)["entries"] if e["kind"] == kind]


def _join_late_take_the_line_and_end(
    browser: Browser, client: Client, sid: str, first_words: str, *, live: bool = False, shot: str = ""
) -> None:
    """The steps both providers share: the queue shows the waiting caller; the line is taken from
    there (a Live call, whose line a person cannot take over, is opened from there); the call
    page shows what was said before it opened, and each answer's heard latency in its chart; End
    asks first, then the ended call's buttons are all disabled."""
    row = f"#waiting-rows tr[data-session={json.dumps(sid)}]"
    browser.wait_for(f"!!document.querySelector('{row}')")
    assert "wants a refund" in _text(browser, row) and "of 2:00" in _text(browser, row), _text(browser, row)
    action = "open" if live else "take"
    browser.eval(f"document.querySelector('button[data-{action}={json.dumps(sid)}]').click(); true")
    browser.wait_for(f"location.hash === '#/call/{sid}'")
    holder = "The caller waits for a person" if live else "Dana holds the line"
    browser.wait_for(f"document.getElementById('line').textContent.startsWith('{holder}')")

    # Opened after the caller spoke: the conversation is filled from the record at once.
    browser.wait_for(f"document.getElementById('transcript').textContent.includes({json.dumps(first_words)})")
    assert browser.eval("document.querySelectorAll('#transcript .msg.user').length") >= 1
    assert browser.eval("document.querySelectorAll('#transcript .msg.assistant').length") >= 1
    if live:
        browser.wait_for("!document.getElementById('end').disabled")
        assert browser.eval("document.getElementById('take-over').disabled") is True
    else:
        browser.wait_for("!!document.querySelector('#timeline li[data-kind=\"supervisor.took_over\"]')")
        assert "Dana took over the line" in _text(browser, '#timeline li[data-kind="supervisor.took_over"]')
        browser.wait_for(
            "document.getElementById('take-over').disabled && !document.getElementById('release').disabled"
        )
        # What the person says is in the call's story, in words, while the page is open.
        browser.eval(f"document.getElementById('verb-text').value = {json.dumps(DANA_SAYS)}; true")
        browser.eval("document.getElementById('say').click(); true")
        browser.wait_for(f"document.getElementById('timeline').textContent.includes({json.dumps(DANA_SAID)})")
        browser.wait_for("document.getElementById('verb-answer').textContent.startsWith('The agent says')")
    assert browser.eval("document.getElementById('engineer').open") is False
    _chart_shows_each_measured_turn(browser, client, sid)
    if shot:
        _shot(browser, shot)

    browser.eval("document.getElementById('end').click(); true")
    assert browser.eval("document.getElementById('confirm').hidden") is False
    assert browser.eval("document.getElementById('line').textContent").startswith(holder)
    browser.eval("document.getElementById('confirm-yes').click(); true")
    browser.wait_for("document.getElementById('line').textContent.startsWith('Call over')")
    browser.wait_for(f"[...document.querySelectorAll('{ACTING}')].every((b) => b.disabled)")
    assert browser.eval(f"document.querySelectorAll('{ACTING}').length") == 8
    browser.wait_for("!!document.querySelector('#timeline li[data-kind=\"call.ended\"]')")
    assert "Dana ended the call" in _text(browser, "#timeline")
    _chart_shows_each_measured_turn(browser, client, sid)


def _chart_shows_each_measured_turn(browser: Browser, client: Client, sid: str) -> None:
    """The heard-latency chart draws one bar per turn the call log measured, each its turn's
    wait, and its header's p50 and p95 are the record's."""
    waits = [
        t["data"]["heard_ms"] for t in _turns(client, sid, "turn.agent") if t["data"]["heard_ms"] is not None
    ]
    heard = client.session(sid)["heard_latency"]
    assert waits and heard["turns"] == len(waits), (waits, heard)
    # The simulator's model thinks 450 ms before its first audio: no wait can be shorter.
    assert min(waits) >= 450, waits
    summary = f"p50 {heard['p50_ms']} ms · p95 {heard['p95_ms']} ms over {len(waits)} turn"
    browser.wait_for(f"document.getElementById('latency-chart').textContent.includes({json.dumps(summary)})")
    bars = browser.eval(
        "[...document.querySelectorAll('#latency-chart rect')].map((r) => Number(r.dataset.ms))"
    )
    assert bars == waits, (bars, waits)
    facts = f"p50 {heard['p50_ms']} ms · p95 {heard['p95_ms']} ms"
    assert facts in _text(browser, "#call-facts"), _text(browser, "#call-facts")


def _answered(client: Client, call_id: str) -> str:
    """The session that answered a phone call, once it did."""

    def found() -> str | None:
        status, body = client.request("GET", f"/v1/phone-calls/{call_id}")
        return str(body["session_id"]) if status == 200 and body.get("session_id") else None

    return str(wait_for(found, "the phone call to be answered"))


def test_a_supervisor_joins_late_takes_the_line_from_the_queue_and_reads_every_caller_word_as_text(
    stack: Stack, client: Client, browser: Browser
) -> None:
    set_script(
        stack,
        {
            "name": "console",
            "caller": [
                {"say": "Hi, I'd like to check on an order.", "after_ms": 300},
                {"say": "It's order 4417, and I want my money back.", "after_ms": 600},
                {"hangup": True, "after_ms": 60_000},
            ],
            "model": [
                {"say": "Of course. What's the order number?"},
                {"say": "Order 4417 shipped yesterday. Let me find someone for the refund."},
                {"say": "I see."},
            ],
            # A realistic model: it thinks 450 ms before each answer's first audio.
            "timing": {"first_audio_ms": 450},
        },
    )
    client.add_route("+18005551212", {"instructions": "You are Acme's order desk."}, max_calls=10)
    sid = _answered(client, ring(stack, "+18005551212", **{"from": "+14155550100"}))
    held = _answered(client, ring(stack, "+18005551212", **{"from": "+13125550199"}))
    done = _answered(client, ring(stack, "+18005551212", **{"from": "+12065550123"}))
    # A call whose model takes 2.2 s to begin each answer: a caller who waits too long for them.
    set_script(stack, SLOW_SCRIPT)
    slow = _answered(client, ring(stack, "+18005551212", **{"from": "+16175550142"}))
    never = client.create_session("You are the order desk.")  # never connected
    wait_for(lambda: len(_turns(client, sid, "turn.agent")) >= 2, "two answers before anyone looks")
    wait_for(lambda: len(_turns(client, done, "turn.agent")) >= 2, "the other call's answers")
    wait_for(lambda: len(_turns(client, slow, "turn.agent")) >= 2, "the slow call's two answers")
    client.caller_text(done, MARKUP)
    wait_for(
        lambda: any(MARKUP in t["data"]["text"] for t in _turns(client, done, "turn.user")), "typed text"
    )
    client.attention(sid, "wants a refund for order 4417", 120)
    _listening(client, held)
    client.hold(held)
    client.end(done, "the caller was helped")

    _viewport(browser, 1366, 768)
    _sign_in(browser, stack, stack.api_token)
    assert _text(browser, "#whoami").endswith("admin")
    browser.wait_for(f"!!document.querySelector('#held-rows tr[data-session={json.dumps(held)}]')")
    browser.wait_for(f"!!document.querySelector('#waiting-rows tr[data-session={json.dumps(sid)}]')")
    assert "+14155550100" in _text(browser, f"#waiting-rows tr[data-session={json.dumps(sid)}]")
    # The slow call struggles, and the desk says how long its callers wait for its answers.
    struggling = client.request("GET", "/v1/queue")[1]["struggling"]
    assert [(s["session_id"], s["why"]) for s in struggling] == [
        (slow, [f"slow answers: {struggling[0]['slow_answers_ms'] / 1000:.1f} s"])
    ], struggling
    assert struggling[0]["slow_answers_ms"] >= 2_200
    slow_row = f"#struggling-rows tr[data-session={json.dumps(slow)}]"
    browser.wait_for(f"!!document.querySelector('{slow_row}')")
    assert struggling[0]["why"][0] in _text(browser, slow_row) and "+16175550142" in _text(browser, slow_row)
    _shot(browser, "console-queue.png")
    client.end(slow, "the caller was helped")
    # The latency chart draws a bar for each turn the call log measured, none for one it did not.
    chart = "latencyChart([{heard_ms: 640}, {}, {heard_ms: 1720}])"
    assert browser.eval(f"{chart}.querySelectorAll('rect').length") == 2
    browser.eval(f"location.hash = '#/call/{done}'; true")
    browser.wait_for("document.getElementById('line').textContent.startsWith('Call over')")
    browser.wait_for(f"document.getElementById('transcript').textContent.includes({json.dumps(MARKUP)})")
    browser.wait_for(f"document.getElementById('timeline').textContent.includes({json.dumps(MARKUP)})")
    # The caller's markup is characters on the screen: no element was made of it, nothing ran.
    assert browser.eval("document.querySelectorAll('main img').length") == 0
    assert browser.eval("window.__injected === undefined") is True
    browser.eval("location.hash = '#/queue'; true")

    _join_late_take_the_line_and_end(
        browser, client, sid, "I'd like to check on an order.", shot="console-call.png"
    )
    assert browser.eval("document.querySelectorAll('main img').length") == 0
    browser.eval("document.querySelector('#engineer summary').click(); true")
    browser.wait_for("document.querySelectorAll('#events tr').length > 5")

    # The calls list: local times, direction, number, state, outcome; a search by words said.
    browser.eval("location.hash = '#/calls'; true")
    browser.wait_for(f"!!document.querySelector('#calls tr[data-session={json.dumps(sid)}]')")
    row = _text(browser, f"#calls tr[data-session={json.dumps(sid)}]")
    assert "in" in row and "+14155550100" in row and "supervisor ended" in row, row
    assert "held" in _text(browser, f"#calls tr[data-session={json.dumps(held)}]")
    assert "not connected" in _text(browser, f"#calls tr[data-session={json.dumps(never['id'])}]")
    # Counted apart from the calls that are over: a session no call reached is not an outage.
    assert _text(browser, "#count-not-connected") == "1 not connected"
    assert _text(browser, "#count-over") == "3 over"
    _shot(browser, "console-calls.png")
    _search(browser, "onerror")
    browser.wait_for(
        f"{LISTED} === 1 && !!document.querySelector('#calls tr[data-session={json.dumps(done)}]')"
    )
    _search(browser, "+1312555")
    browser.wait_for(
        f"{LISTED} === 1 && !!document.querySelector('#calls tr[data-session={json.dumps(held)}]')"
    )
    _search(browser, "no such words")
    browser.wait_for(f"{LISTED} === 0")
    _search(browser, "")
    for state, listed in (("live", held), ("not_connected", never["id"])):
        browser.eval(
            f"(() => {{ const s = document.getElementById('filter-status'); s.value = '{state}';"
            " s.dispatchEvent(new Event('change')); return true; })()"
        )
        browser.wait_for(
            f"{LISTED} === 1 && !!document.querySelector('#calls tr[data-session={json.dumps(listed)}]')"
        )

    # On a phone: the same call page, one column.
    _viewport(browser, 390, 844)
    browser.eval(f"location.hash = '#/call/{sid}'; true")
    browser.wait_for("document.getElementById('transcript').textContent.includes('4417')")
    assert browser.eval("document.documentElement.scrollWidth <= 390") is True
    _shot(browser, "console-call-phone.png")
    for page, shown in (("#/calls", "#calls tr[data-session]"), ("#/queue", "#held-rows")):
        browser.eval(f"location.hash = '{page}'; true")
        browser.wait_for(f"!!document.querySelector('{shown}')")
        assert browser.eval("document.documentElement.scrollWidth <= 390") is True, page
    client.end(held)
    assert browser.errors == []


def test_a_live_call_reads_the_same_from_the_queue_to_its_end(
    stack: Stack, client: Client, browser: Browser
) -> None:
    """On the Live provider: joined late, the words said are there; the line is taken from the
    queue; the ended call's buttons are disabled."""
    set_live_script(
        stack,
        {
            "caller": [
                {"say": "Hello, is anyone there?", "after_ms": 100},
                {"hangup": True, "after_ms": 60_000},
            ],
            "model": [{"say": "Hello! You're through to the order desk."}],
            # A realistic model: 450 ms on the timeline before each thing it says.
            "timing": {**QUICK_TIMING, "first_audio_ms": 450},
        },
    )
    sid = client.create_session("You are the order desk.", provider="live")["id"]
    client.connect(sid)
    _listening(client, sid)
    wait_for(lambda: len(_turns(client, sid, "turn.user")) >= 1, "the caller's words in the log")
    client.attention(sid, "wants a refund", 120)

    _sign_in(browser, stack, stack.api_token)
    _join_late_take_the_line_and_end(
        browser, client, sid, "Hello, is anyone there?", live=True, shot="console-call-live.png"
    )
    assert browser.errors == []


def _key(stack: Stack, services: Services, *arguments: str) -> dict[str, Any]:
    made = subprocess.run(
        [sys.executable, "-m", "switchboard", "keys", *arguments],
        env={
            **os.environ,
            "SWITCHBOARD_DATABASE_URL": services.database_url,
            "SWITCHBOARD_REDIS_URL": services.redis_url,
            "SWITCHBOARD_BROKER_NAMESPACE": stack.namespace,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(made.stdout)) if made.stdout.strip().startswith("{") else {}


def test_a_viewer_sees_no_button_that_acts_and_a_revoked_key_stops_the_page(
    stack: Stack, client: Client, services: Services, browser: Browser
) -> None:
    """A viewer's key reads the queue and the call but is offered nothing to do; once revoked,
    within the keys' revocation window, the page stops and says why."""
    set_script(stack, {"name": "quiet", "caller": [{"hangup": True, "after_ms": 60_000}], "model": []})
    viewer = _key(stack, services, "add", "wallboard", "--role", "viewer")
    sid = client.create_session("You are the order desk.")["id"]
    client.connect(sid)
    _listening(client, sid)
    client.attention(sid, "wants a refund", 120)

    _sign_in(browser, stack, viewer["key"], page=f"#/call/{sid}")
    assert _text(browser, "#whoami").endswith("viewer")
    browser.wait_for(
        "document.getElementById('line').textContent.startsWith('The caller waits for a person')"
    )
    assert _text(browser, "#read-only").startswith("Your key may watch this call")
    assert browser.eval("document.querySelectorAll('main button').length") == 0
    browser.eval("location.hash = '#/queue'; true")
    browser.wait_for(f"!!document.querySelector('#waiting-rows tr[data-session={json.dumps(sid)}]')")
    assert browser.eval("document.querySelectorAll('main button').length") == 0

    _key(stack, services, "revoke", viewer["id"])
    browser.wait_for("!!document.getElementById('key-lost')", timeout_s=30)
    assert "no longer works" in _text(browser, "#key-lost")
    assert browser.eval("document.querySelectorAll('main table').length") == 0
    client.end(sid)
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
    for path in (
        "/console/console.html.bak",
        "/console/..%2F..%2Fpyproject.toml",
        "/v1/sessions",
        "/v1/queue",
    ):
        try:
            urllib.request.urlopen(f"{stack.api_url}{path}", timeout=10)
        except urllib.error.HTTPError as refused:
            assert refused.code in (401, 404), path
        else:
            raise AssertionError(f"{path} was served")


def test_the_calls_list_pages_by_cursor_within_a_date_range_and_refuses_a_forged_cursor(
    stack: Stack, client: Client
) -> None:
    """`limit` and `cursor` walk the list newest first without repeating a call; `next` is
    null on the last page; `created_after` bounds it; a cursor this API never gave is a 422."""
    made = [client.create_session("You are the order desk.")["id"] for _ in range(3)]
    first = client.session(made[0])["created_at"]
    walked: list[str] = []
    cursor = ""
    while True:
        path = f"/v1/sessions?limit=2&created_after={first.replace('+', '%2B')}" + (
            f"&cursor={cursor}" if cursor else ""
        )
        status, page = client.request("GET", path)
        assert status == 200, page
        walked += [s["id"] for s in page["sessions"]]
        if page["next"] is None:
            break
        cursor = page["next"]
    assert walked == list(reversed(made))
    for forged in ("cursor=abc", "created_before=yesterday"):
        status, refused = client.request("GET", f"/v1/sessions?{forged}")
        assert (status, refused["error"]["code"]) == (422, "malformed_request")
