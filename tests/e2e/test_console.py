"""The supervisor's console in a real browser (Debian's headless Chromium over the DevTools
protocol), on both providers: a person who opens a call mid-way reads what was said; a caller who
asks for a person appears in the queue and the line is taken from there; an ended call's buttons
are disabled; what a caller says is shown as text, never as markup; a viewer's key sees no button
that acts, and a key revoked while the page is open stops working and the page says so. And its
rough edges, each gone (issue 44, item 17): who asked for a person is said; an ended call no longer
says it is ending; Take over on a Live call says why it is not offered; a campaign is named, not
numbered; a time of another day shows its date; a campaign's cancel asks first; the queue fits a
390-pixel phone; a greeting cut at 0 words draws no empty bubble.
Screenshots go to .switchboard/screenshots/ (docs/console*.png are taken from them)."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import SCRIPTS, set_script
from tests.support.browser import Browser
from tests.support.live import QUICK_TIMING, _sim, set_live_script
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


# ── the console's rough edges (issue 44, item 17) ───────────────────────────────────────────

# A caller who stays on the line, says one thing and waits (a Realtime call).
STAYS = {
    "name": "stays",
    "caller": [
        {"say": "Hello, I'd like some help please.", "after_ms": 200},
        {"hangup": True, "after_ms": 60_000},
    ],
    "model": [{"say": "Of course, how can I help?"}],
}
# A trunk for the campaigns' calls out (the simulated Live API checks its shape, never dials it).
TRUNK = {
    "name": "console",
    "url": "sips:sip.example.com",
    "username": "acme",
    "password": "console-trunk-password",
    "caller_number": "+12125550100",
}
CAMPAIGN_SESSION = {"instructions": "You remind {name} of an appointment.", "provider": "live"}
# Each word of an element's text with the number of line boxes it spans: 1 unless it was broken.
WORD_LINES = """((node) => {
  const words = [];
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    for (const found of text.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(text, found.index);
      range.setEnd(text, found.index + found[0].length);
      words.push([found[0], range.getClientRects().length]);
    }
  }
  return words;
})"""
# Where an element is on the screen, and how much of it the boxes it sits in let be seen.
SEEN_BOX = """((node) => {
  const box = node.getBoundingClientRect();
  let left = 0, right = window.innerWidth;
  for (let up = node.parentElement; up; up = up.parentElement) {
    const overflow = getComputedStyle(up).overflowX;
    if (overflow !== "visible") {
      const around = up.getBoundingClientRect();
      left = Math.max(left, around.left);
      right = Math.min(right, around.right);
    }
  }
  return {left: box.left, right: box.right, width: box.width, seenLeft: left, seenRight: right};
})"""


def _a_number() -> str:
    """A valid San Francisco number no other test dials (an exchange of 200 to 999)."""
    return f"+1415{random.randrange(2 * 10**6, 10**7)}"


def _entry_text(browser: Browser, kind: str) -> str:
    return _text(browser, f'#timeline li[data-kind="{kind}"]')


def test_an_app_s_request_for_a_person_is_the_app_s_and_a_key_press_is_the_caller_s(
    stack: Stack, client: Client, browser: Browser
) -> None:
    """The call log says who asked for a person: the app through the API ("The app asked"),
    the caller with the key their route maps to a person ("Caller asked"); the console reads it
    so, never the app's request as the caller's."""
    set_script(
        stack,
        {
            "name": "keyed",
            "caller": [
                {"say": "Can I talk to a person?", "after_ms": 100},
                {"dtmf": "0", "after_ms": 200},
                {"hangup": True, "after_ms": 60_000},
            ],
            "model": [{"say": "Let me see."}],
        },
    )
    client.add_route("+18005550417", {"instructions": "Be brief."}, keys={"0": "attention"})
    keyed = _answered(client, ring(stack, "+18005550417"))
    set_script(stack, STAYS)
    asked = client.create_session("You are the order desk.")["id"]
    client.connect(asked)
    _listening(client, asked)
    client.attention(asked, "the app wants a person on this", 120)
    wait_for(lambda: _turns(client, keyed, "attention.requested"), "the caller's key press for a person")
    assert _turns(client, keyed, "attention.requested")[0]["data"]["by"] == "caller"
    assert _turns(client, asked, "attention.requested")[0]["data"]["by"] == "app"

    _sign_in(browser, stack, stack.api_token, page=f"#/call/{asked}")
    browser.wait_for("!!document.querySelector('#timeline li[data-kind=\"attention.requested\"]')")
    said = _entry_text(browser, "attention.requested")
    assert "The app asked for a person: the app wants a person on this" in said, said
    assert "Caller asked" not in said, said
    browser.eval(f"location.hash = '#/call/{keyed}'; true")
    browser.wait_for(
        "(document.querySelector('#timeline li[data-kind=\"attention.requested\"]') || {}).textContent"
        "?.includes('Caller asked for a person: the caller pressed 0')"
    )
    client.end(keyed)
    client.end(asked)
    assert browser.errors == []


def test_an_ended_call_says_it_ended_not_that_it_is_ending(
    stack: Stack, client: Client, browser: Browser
) -> None:
    """End, confirmed in the page, says "The call is ending." while it does; once the call is over
    the page says it ended, and nothing on it still says it is ending."""
    set_script(stack, STAYS)
    sid = client.create_session("You are the order desk.")["id"]
    client.connect(sid)
    _listening(client, sid)

    _sign_in(browser, stack, stack.api_token, page=f"#/call/{sid}")
    browser.wait_for("!document.getElementById('end').disabled")
    browser.eval("document.getElementById('end').click(); true")
    browser.eval("document.getElementById('confirm-yes').click(); true")
    browser.wait_for("document.getElementById('line').textContent.startsWith('Call over')")
    browser.wait_for("document.getElementById('verb-answer').textContent === 'The call has ended.'")
    # Two refreshes later, still: nothing says the call is ending.
    browser.wait_for("!!document.querySelector('#timeline li[data-kind=\"call.ended\"]')")
    assert "is ending" not in str(browser.eval("document.getElementById('main').textContent"))
    assert client.session(sid)["status"] == "ended"
    assert browser.errors == []


def test_take_over_on_a_live_call_says_why_it_is_not_offered(
    stack: Stack, client: Client, browser: Browser
) -> None:
    """On a Live call Take over is disabled and says why, in the page and on the button, in the
    words the API refuses it with (409 not_supported_on_live); on a Realtime call it is offered."""
    set_live_script(
        stack,
        {
            "caller": [
                {"say": "Hello, is anyone there?", "after_ms": 100},
                {"hangup": True, "after_ms": 60_000},
            ],
            "model": [{"say": "Hello! You're through to the order desk."}],
        },
    )
    sid = client.create_session("You are the order desk.", provider="live")["id"]
    client.connect(sid)
    _listening(client, sid)
    status, refused = client.request(
        "POST", f"/v1/sessions/{sid}/supervisor", {"by": {"id": "dana"}, "verb": {"type": "take_over"}}
    )
    assert (status, refused["error"]["code"]) == (409, "not_supported_on_live"), refused
    why = refused["error"]["message"]
    assert client.session(sid)["not_supported"]["take_over"] == {
        "code": "not_supported_on_live",
        "message": why,
    }

    _sign_in(browser, stack, stack.api_token, page=f"#/call/{sid}")
    browser.wait_for("!document.getElementById('end').disabled")
    assert browser.eval("document.getElementById('take-over').disabled") is True
    assert browser.eval("document.getElementById('take-over').title") == why
    assert (
        browser.eval("document.getElementById('take-over').getAttribute('aria-describedby')")
        == "take-over-why"
    )
    assert browser.eval("document.getElementById('take-over-why').hidden") is False
    assert why in _text(browser, "#take-over-why"), _text(browser, "#take-over-why")
    assert browser.eval("document.getElementById('take-over-why').getBoundingClientRect().height") > 0
    client.end(sid)

    set_script(stack, STAYS)
    offered = client.create_session("You are the order desk.")["id"]
    client.connect(offered)
    _listening(client, offered)
    browser.eval(f"location.hash = '#/call/{offered}'; true")
    browser.wait_for("!document.getElementById('take-over').disabled")
    assert browser.eval("document.getElementById('take-over-why').hidden") is True
    assert browser.eval("document.getElementById('take-over').hasAttribute('aria-describedby')") is False
    client.end(offered)
    assert browser.errors == []


def _campaign_call(stack: Stack, client: Client, tmp_path: Path, name: str) -> tuple[str, str, str]:
    """A campaign of one contact, who answers and stays on the line; its id, the number it
    called and the session of that call, once connected."""
    if not any(t["name"] == TRUNK["name"] for t in client.trunks()["trunks"]):
        client.add_trunk(TRUNK)
    script = tmp_path / "stays_on_the_line.json"
    script.write_text(
        json.dumps(
            {
                "name": "stays-on-the-line",
                "timing": QUICK_TIMING,
                "caller": [{"say": "Hello?", "after_ms": 200}, {"hangup": True, "after_ms": 60_000}],
                "model": [{"say": "Hi, this is Acme Dental calling about your appointment."}],
            }
        )
    )
    to = _a_number()
    _sim(
        stack,
        "PUT",
        "/_sim/live/dial-plan",
        {to: {"outcome": "human", "script": str(script), "ring_ms": 200}},
    )
    campaign = client.create_campaign(
        {"name": name, "session": CAMPAIGN_SESSION, "contacts": [{"to": to, "vars": {"name": "Sam"}}]}
    )

    def connected() -> str | None:
        [contact] = client.campaign_contacts(campaign["id"])["contacts"]
        if not contact["attempts"] or not contact["attempts"][0]["session_id"]:
            return None
        session_id = str(contact["attempts"][0]["session_id"])
        # A call is claimed a moment before its session is made.
        status, record = client.request("GET", f"/v1/sessions/{session_id}")
        return session_id if status == 200 and record["status"] in ("listening", "responding") else None

    return campaign["id"], to, str(wait_for(connected, "the campaign's call to connect", timeout_s=30))


def test_a_campaign_s_call_is_shown_with_the_campaign_s_name_not_its_id(
    stack: Stack, client: Client, browser: Browser, tmp_path: Path
) -> None:
    """The queue, the calls list and the call's page name the campaign that placed a call (as
    text, never markup), linked to its page, where they showed its id."""
    name = "Dental <b>reminders</b>"
    campaign_id, to, sid = _campaign_call(stack, client, tmp_path, name)
    client.attention(sid, "the callee wants to reschedule", 120)

    _viewport(browser, 1366, 768)
    _sign_in(browser, stack, stack.api_token)
    row = f"#waiting-rows tr[data-session={json.dumps(sid)}]"
    browser.wait_for(f"!!document.querySelector('{row}')")
    shown = _text(browser, row)
    assert to in shown and f"campaign {name}" in shown and campaign_id[-8:] not in shown, shown
    assert browser.eval(f"document.querySelector('{row} a.campaign').getAttribute('href')") == (
        f"#/campaign/{campaign_id}"
    )

    browser.eval("location.hash = '#/calls'; true")
    listed = f"#calls tr[data-session={json.dumps(sid)}]"
    browser.wait_for(f"!!document.querySelector('{listed}')")
    shown = _text(browser, listed)
    assert f"campaign {name}" in shown and campaign_id[-8:] not in shown, shown

    browser.eval(f"location.hash = '#/call/{sid}'; true")
    browser.wait_for("!!document.getElementById('call-campaign')")
    assert _text(browser, "#call-campaign") == f"From campaign {name}"
    browser.eval(f"location.hash = '#/campaign/{campaign_id}'; true")
    browser.wait_for(f"document.getElementById('campaign-title').textContent === {json.dumps(name)}")
    assert browser.eval("document.querySelectorAll('main b').length") == 1  # the summary's label only
    client.end(sid)
    assert browser.errors == []


def test_cancelling_a_campaign_asks_first_and_keeping_it_cancels_nothing(
    stack: Stack, client: Client, browser: Browser
) -> None:
    """Cancel asks before it acts, saying what it does; "Keep it" leaves the campaign as it
    was; confirmed, the campaign is cancelled and its waiting contacts with it."""
    if not any(t["name"] == TRUNK["name"] for t in client.trunks()["trunks"]):
        client.add_trunk(TRUNK)
    # A window open only on a day three days from now: nobody is called while the test runs.
    closed_day = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")[(datetime.now(UTC).weekday() + 3) % 7]
    window = {"timezone": "UTC", "days": [closed_day], "start": "09:00", "end": "17:00"}
    contacts = [{"to": _a_number(), "vars": {"name": f"Contact {n}"}} for n in range(3)]
    campaign = client.create_campaign(
        {"name": "Not today", "session": CAMPAIGN_SESSION, "contacts": contacts, "window": window}
    )
    campaign_id = campaign["id"]

    _sign_in(browser, stack, stack.api_token, page=f"#/campaign/{campaign_id}")
    browser.wait_for("document.querySelectorAll('#contacts tr').length === 3")
    browser.wait_for("!document.getElementById('cancel').disabled")
    browser.eval("document.getElementById('cancel').click(); true")
    assert browser.eval("document.getElementById('campaign-confirm').hidden") is False
    question = _text(browser, "#campaign-confirm")
    assert "Cancel “Not today”?" in question and "3 contacts still waiting" in question, question
    assert "cannot be resumed" in question, question
    browser.eval("document.getElementById('cancel-no').click(); true")
    assert browser.eval("document.getElementById('campaign-confirm').hidden") is True
    time.sleep(1.0)  # what a click that acted at once would have done by now
    assert client.campaign(campaign_id)["status"] in ("scheduled", "running")

    browser.eval("document.getElementById('cancel').click(); true")
    browser.eval("document.getElementById('cancel-yes').click(); true")
    wait_for(lambda: client.campaign(campaign_id)["status"] == "cancelled", "the campaign to be cancelled")
    browser.wait_for("document.getElementById('cancel').disabled")
    assert browser.eval("document.getElementById('cancel').title") == "The campaign is cancelled."
    outcomes = {c["outcome"] for c in client.campaign_contacts(campaign_id)["contacts"]}
    assert outcomes == {"cancelled"}, outcomes
    assert browser.errors == []


def test_a_time_of_another_day_shows_its_date(
    stack: Stack, client: Client, services: Services, browser: Browser
) -> None:
    """The calls list, a call's facts and its story give a time of another day with its date
    (today's may be only the time of day); a call of three days ago never reads as today's."""
    set_script(
        stack,
        {
            "name": "short",
            "caller": [
                {"say": "Just checking my order.", "after_ms": 100},
                {"hangup": True, "after_ms": 800},
            ],
            "model": [{"say": "It is on its way."}],
        },
    )
    sid = client.create_session("You are the order desk.")["id"]
    client.connect(sid)
    client.wait_for_status(sid, timeout_s=30)
    today = client.session(sid)["created_at"]
    _three_days_back(services, sid)
    then = client.session(sid)["created_at"]
    assert then != today

    _sign_in(browser, stack, stack.api_token, page="#/calls")
    _search(browser, sid)
    row = f"#calls tr[data-session={json.dumps(sid)}]"
    browser.wait_for(f"{LISTED} === 1 && !!document.querySelector('{row}')")
    date = browser.eval(
        f"new Date({json.dumps(then)}).toLocaleDateString(undefined, {{month: 'short', day: 'numeric'}})"
    )
    started = _text(browser, f"{row} td:first-child")
    assert date in started, (started, date)

    browser.eval(f"location.hash = '#/call/{sid}'; true")
    browser.wait_for("!!document.querySelector('#timeline li[data-kind=\"call.ended\"]')")
    assert date in _text(browser, "#call-facts"), _text(browser, "#call-facts")
    stamps = browser.eval("[...document.querySelectorAll('#timeline time')].map((t) => t.textContent)")
    assert stamps and all(date in stamp for stamp in stamps), (stamps, date)
    assert browser.errors == []


def _three_days_back(services: Services, session_id: str) -> None:
    """The session's every moment, as if the call were made three days ago."""
    import psycopg2

    from models.db import parse_database_url

    with (
        psycopg2.connect(**parse_database_url(services.database_url)) as connection,
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE sessions SET created_at = created_at - interval '3 days',"
            " ended_at = ended_at - interval '3 days' WHERE id = %s",
            (session_id,),
        )
        cursor.execute(
            "UPDATE session_events SET received_at = received_at - 259200,"
            " taken_at = taken_at - 259200, applied_at = applied_at - 259200 WHERE session_id = %s",
            (session_id,),
        )
        cursor.execute(
            "UPDATE incidents SET created_at = created_at - interval '3 days' WHERE session_id = %s",
            (session_id,),
        )


def test_on_a_390_px_phone_the_queue_keeps_its_words_whole_and_its_buttons_on_screen(
    stack: Stack, client: Client, browser: Browser
) -> None:
    """At 390 px each waiting caller's row breaks no word (the reason, the number, the wait) and
    its button is on the screen and within its box, not scrolled off it; the page does not scroll
    sideways."""
    set_script(stack, STAYS)
    client.add_route("+18005550390", {"instructions": "You are Acme's order desk."}, max_calls=10)
    sid = _answered(client, ring(stack, "+18005550390", **{"from": "+14155550142"}))
    _listening(client, sid)
    client.attention(sid, "wants a refund for order 4417, which arrived broken", 120)
    set_live_script(
        stack,
        {
            "caller": [{"say": "Hello?", "after_ms": 100}, {"hangup": True, "after_ms": 60_000}],
            "model": [{"say": "Hello! You're through to the order desk."}],
        },
    )
    live = client.create_session("You are the order desk.", provider="live")["id"]
    client.connect(live)
    _listening(client, live)
    client.attention(live, "asks for the manager", 120)

    _viewport(browser, 390, 844)
    _sign_in(browser, stack, stack.api_token)
    for session_id, button in ((sid, "data-take"), (live, "data-open")):
        row = f"#waiting-rows tr[data-session={json.dumps(session_id)}]"
        browser.wait_for(f"!!document.querySelector('{row} button[{button}]')")
        broken = [
            (word, lines)
            for word, lines in browser.eval(f"{WORD_LINES}(document.querySelector('{row}'))")
            if lines != 1
        ]
        assert broken == [], broken
        box = browser.eval(f"{SEEN_BOX}(document.querySelector('{row} button[{button}]'))")
        assert box["width"] > 0 and box["left"] >= box["seenLeft"] and box["right"] <= box["seenRight"], box
        assert box["right"] <= 390, box
    assert browser.eval("document.documentElement.scrollWidth <= 390") is True
    _shot(browser, "console-queue-phone.png")
    client.end(sid)
    client.end(live)
    assert browser.errors == []


def test_a_greeting_cut_before_its_first_word_draws_no_empty_bubble(
    stack: Stack, client: Client, browser: Browser
) -> None:
    """A caller who speaks over the greeting before its first word leaves a stored agent line with
    no text: the conversation draws no bubble for it, and the story says it was cut off."""
    set_script(
        stack,
        {
            "name": "spoke over the greeting",
            "caller": [
                {"say": "Hi, I need to change my delivery address.", "after_ms": 0, "during_response": True},
                {"hangup": True, "after_ms": 60_000},
            ],
            "model": [{"say": "Sure, what's the new address?"}],
            # The model thinks 1.5 s before the greeting's first audio: the caller speaks first.
            "timing": {"first_audio_ms": 1_500},
        },
    )
    sid = client.create_session("You are the order desk.", greeting={"say": "Thanks for calling Acme."})["id"]
    client.connect(sid)

    def cut() -> list[dict[str, Any]]:
        said = [t for t in client.session(sid)["transcript"] if t["role"] == "assistant"]
        return (
            said if any(not t["text"].strip() for t in said) and any(t["text"].strip() for t in said) else []
        )

    said = wait_for(cut, "a greeting cut at 0 words, then an answer")
    _sign_in(browser, stack, stack.api_token, page=f"#/call/{sid}")
    browser.wait_for(
        "document.getElementById('transcript').textContent.includes('change my delivery address')"
    )
    browser.wait_for("document.querySelectorAll('#transcript .msg.assistant').length >= 1")
    bubbles = browser.eval(
        "[...document.querySelectorAll('#transcript .msg')].map((m) => m.querySelector('p').textContent)"
    )
    assert all(text.strip() for text in bubbles), bubbles
    spoken = [t["text"] for t in said if t["text"].strip()]
    assert browser.eval("document.querySelectorAll('#transcript .msg.assistant').length") == len(spoken)
    browser.wait_for(
        "[...document.querySelectorAll('#timeline li[data-kind=\"turn.agent\"]')]"
        ".some((li) => li.textContent.includes('Agent was cut off before its first word'))"
    )
    assert "“”" not in _text(browser, "#timeline")
    client.end(sid)
    assert browser.errors == []
