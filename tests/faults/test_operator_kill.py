"""kill -9 of workers at random moments while calls are held, wait for a person, and are taken
over, spoken through and released by a supervisor."""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from switchboard.client import ApiError, Client
from switchboard.services import Services
from switchboard.stack import Stack
from tests.e2e.conftest import set_script, simulator_call

CALLS = 8
ROUNDS = 20
KILLS_AT_MOST = 40
DANA = {"id": "sup_dana", "name": "Dana"}
# Short enough that a take-over stalled by a kill sometimes comes after the wait is over (the
# timer answers the attention then, and the take-over finds nobody waiting).
ATTENTION_WAIT_S = 1.0
# A stall is a dead worker's heartbeat timeout plus a sweep (about 3.5 s), perhaps twice over.
SETTLE_TIMEOUT_S = 60.0
# A request slower than this waited for a dead worker's messages to come back (its heartbeat is
# 3 s old first); one no worker died under is answered in well under a second.
STALLED_MS = 2_000

SCRIPT: dict[str, Any] = {
    "name": "operator-kill",
    "timing": {"delta_interval_ms": 10, "chars_per_delta": 16, "response_wait_ms": 60_000},
    # The caller stays on the line until the test ends the call (the model answers "Okay.").
    "caller": [{"hangup": True, "after_ms": 600_000}],
    "model": [],
}

# The call-log entries each verb writes when it is applied (and not refused); an attention's
# answer and the line's return come with the take-over, or with the timer if it came first.
ENTRIES_OF = {
    "hold": {"call.line": 1},
    "unhold": {"call.line": 1},
    "attention": {"attention.requested": 1, "attention.answered": 1, "call.line": 2},
    "take_over": {"supervisor.took_over": 1},
    "say": {"supervisor.said": 1},
    "release": {"supervisor.released": 1},
}
COUNTED = sorted({kind for entries in ENTRIES_OF.values() for kind in entries})

# What each verb answers when applied in this order; anything else is a refusal or a surprise.
APPLIED = {
    "hold": {(200, "held")},
    "unhold": {(200, "free")},
    "attention": {(202, "waiting")},
    "take_over": {(200, "taken")},
    "say": {(202, "speaking"), (202, "after_response")},
    "release": {(200, "released")},
}


@dataclass
class Asked:
    verb: str
    status: int
    body: Any
    ms: float

    @property
    def waited_out(self) -> bool:
        """The gateway's own 202: no worker answered in time; the request is in the log."""
        return self.status == 202 and self.body.get("status") == "queued"

    @property
    def refusal(self) -> str | None:
        if self.status == 409:
            return str(self.body["error"]["code"])
        return None


@dataclass
class Line:
    session_id: str
    call_id: str
    asked: list[Asked] = field(default_factory=list)
    failure: BaseException | None = None


def _request(client: Client, line: Line, verb: str, path: str, body: Any = None) -> None:
    """One operator request, timed. A 503 is a session lookup no worker answered in time, before
    the request was numbered into the log: it is asked again."""
    started = time.monotonic()
    while True:
        status, answer = client.request("POST", f"/v1/sessions/{line.session_id}{path}", body)
        if status != 503 or time.monotonic() - started > SETTLE_TIMEOUT_S:
            break
    line.asked.append(Asked(verb, status, answer, (time.monotonic() - started) * 1000))


def _read(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A read through a worker; 503 while the worker that took it is dead and not yet replaced."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        try:
            return read()
        except ApiError as error:
            if error.status != 503 or time.monotonic() > deadline:
                raise


def _settled(client: Client, line: Line, releases: int) -> None:
    """Wait until this round's release is applied and the agent, given the line back, is quiet."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        kinds = [e["kind"] for e in _read(lambda: client.call_log(line.session_id))["entries"]]
        released = kinds.count("supervisor.released") >= releases
        if released and _read(lambda: client.session(line.session_id))["status"] == "listening":
            return
        time.sleep(0.1)
    raise AssertionError(f"{line.session_id}: round {releases} did not settle")


def _operate(client: Client, line: Line) -> None:
    """Every round: hold, give back, ask for a person, a supervisor takes the line (answering the
    attention), speaks through it and releases it; then wait until the agent is quiet."""
    try:
        _settled(client, line, 0)
        for round_ in range(1, ROUNDS + 1):
            _request(client, line, "hold", "/hold")
            _request(client, line, "unhold", "/unhold")
            _request(
                client,
                line,
                "attention",
                "/attention",
                {"reason": "wants a refund", "wait_s": ATTENTION_WAIT_S},
            )
            _request(client, line, "take_over", "/supervisor", {"by": DANA, "verb": {"type": "take_over"}})
            say = {"type": "say", "text": f"Hi, this is Dana, round {round_}."}
            _request(client, line, "say", "/supervisor", {"by": DANA, "verb": say})
            _request(client, line, "release", "/supervisor", {"by": DANA, "verb": {"type": "release"}})
            _settled(client, line, round_)
    except BaseException as error:  # noqa: BLE001 - handed to the main thread, which raises it
        line.failure = error


@dataclass
class Checked:
    refusals: Counter[str]
    answered_by_timer: int


def _check(stack: Stack, client: Client, line: Line) -> Checked:
    """Every accepted request applied once: the entries it implies, no more and no fewer; every
    attention answered once; one person at a time; each control sent once; the end last."""
    record = client.wait_for_status(line.session_id, timeout_s=60)
    assert record["status"] == "ended", record
    full = _read(lambda: client.session(line.session_id, events=True))
    assert full["applied_seq"] == full["logged_seq"], "a logged event was never applied"

    refusals: Counter[str] = Counter()
    expected: Counter[str] = Counter()
    for asked in line.asked:
        if asked.refusal is not None:
            refusals[f"{asked.verb}:{asked.refusal}"] += 1
            continue
        assert asked.status in (200, 202), (asked.verb, asked.status, asked.body)
        if not asked.waited_out:
            assert (asked.status, asked.body.get("status")) in APPLIED[asked.verb], asked
        expected.update(ENTRIES_OF[asked.verb])

    story = _read(lambda: client.call_log(line.session_id))["entries"]
    kinds = [entry["kind"] for entry in story]
    found = Counter(kind for kind in kinds if kind in COUNTED)
    assert found == expected, f"{line.session_id}: logged {dict(found)}, asked for {dict(expected)}"

    assert kinds.count("call.ended") == 1 and kinds[-1] == "call.ended", kinds[-5:]
    people = [kind for kind in kinds if kind in ("supervisor.took_over", "supervisor.released")]
    assert people == ["supervisor.took_over", "supervisor.released"] * (len(people) // 2), people
    waits = [kind for kind in kinds if kind.startswith("attention.")]
    assert waits == ["attention.requested", "attention.answered"] * (len(waits) // 2), waits

    sim = simulator_call(stack, line.call_id)
    assert sim["errors"] == [], sim["errors"][:5]
    controls = [entry["control"] for entry in sim["controls"]]
    ids = [control["event_id"] for control in controls]
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} controls sent twice"
    spoken = [
        c
        for c in controls
        if c["type"] == "response.create"
        and c["response"].get("metadata") == {"switchboard": "supervisor_say"}
    ]
    assert len(spoken) == found["supervisor.said"], (len(spoken), found["supervisor.said"])
    by_timer = sum(1 for e in story if e["kind"] == "attention.answered" and not e["data"]["ok"])
    return Checked(refusals, by_timer)


def test_workers_killed_during_holds_attentions_and_take_overs(
    services: Services, namespace: str, figure: Callable[[str], None]
) -> None:
    """Two workers; every 0.3 to 0.9 s one of them, at random, is killed -9 and replaced, while
    8 calls are held and given back, wait for a person and are taken over, spoken through and
    released. Each request answered (or left `queued` by a dead worker) is applied exactly once."""
    chance = random.Random(8)
    with Stack(services.database_url, services.redis_url, namespace=f"{namespace}-faultoperator") as stack:
        stack.start(workers=2)
        client = Client(stack.api_url, stack.api_token, stack.live_url)
        set_script(stack, SCRIPT)
        lines: list[Line] = []
        for _ in range(CALLS):
            session = client.create_session("Answer briefly.")
            lines.append(Line(session["id"], client.connect(session["id"])["call_id"]))

        done = threading.Event()
        kills: list[str] = []

        def killer() -> None:
            while not done.wait(chance.uniform(0.3, 0.9)) and len(kills) < KILLS_AT_MOST:
                victim = chance.choice(stack.workers[-2:])
                victim.kill()
                kills.append(victim.name)
                stack.add_worker()

        calls = [threading.Thread(target=_operate, args=(client, line)) for line in lines]
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            for call in calls:
                call.start()
            for call in calls:
                call.join(180)
        finally:
            done.set()
            thread.join(30)
        assert not any(call.is_alive() for call in calls), "a call's rounds did not finish in 180 s"
        for line in lines:
            assert line.failure is None, f"{line.session_id}: {line.failure!r}"
            _read(lambda line=line: client.end(line.session_id))
        checked = [_check(stack, client, line) for line in lines]

    asked = [a for line in lines for a in line.asked]
    counts = Counter(a.verb for a in asked)
    waited_out = sum(a.waited_out for a in asked)
    stalled = sum(a.ms > STALLED_MS for a in asked)
    by_timer = sum(c.answered_by_timer for c in checked)
    assert len(kills) >= 3, f"only {len(kills)} kills happened while the calls ran"
    # Each verb is numbered into the log only after the one before it was answered (or left
    # queued there), and each round settles first, so applied in that order none is refused:
    # a refusal would be a request applied out of order or twice.
    refusals = sum((c.refusals for c in checked), Counter[str]())
    assert not refusals, f"refused: {dict(refusals)}"
    ms = [a.ms for a in asked]
    figure(
        f"worker kill -9 during operator verbs: {len(kills)} kills during {CALLS} calls × {ROUNDS} rounds "
        f"({counts['hold']} holds, {counts['attention']} attentions, {counts['take_over']} take-overs; "
        f"{stalled} requests stalled by a kill, {waited_out} left queued, {by_timer} attentions answered "
        f"by the timer): 0 lost, 0 repeated; request p50 {statistics.median(ms):.0f} ms, "
        f"longest {max(ms):,.0f} ms"
    )
