"""Dead letters whose body is not a message, beside good ones, on the real Redis: listed and
shown as corrupt, refused by replay, purged — and never in the way of the good ones."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
import redis
from dramatiq.brokers.redis import RedisBroker

from pipeline.call.errors import Refusal
from pipeline.platform.config import Settings
from switchboard.dlq import run_dlq
from switchboard.services import Services
from workers.broker import make_broker
from workers.dead_letters import DeadLetters

# Not UTF-8, not JSON, and an ANSI escape that must never reach a terminal as is.
GARBAGE = b"\xff\xfe\x1b[31m{not a message"
# JSON with every field of a message, but kwargs that are not an object.
MISSHAPEN = (
    b'{"queue_name":"transcript","actor_name":"transcript_event","args":[],"kwargs":[],'
    b'"options":{},"message_id":"m-misshapen","message_timestamp":1}'
)


@pytest.fixture
def broker(services: Services) -> Iterator[RedisBroker]:
    """A broker on a namespace of its own, whose keys are deleted afterwards."""
    made = make_broker(services.redis_url, namespace=f"sbtest-dlq-{uuid.uuid4().hex[:8]}")
    yield made
    keys = list(made.client.scan_iter(f"{made.namespace}:*"))
    if keys:
        made.client.delete(*keys)
    made.close()


def _dead_letter(broker: RedisBroker, queue: str, data: bytes) -> str:
    """Enqueue ``data`` as a message body, fetch it and nack it: the broker's own path into
    the dead letters, as a worker takes it."""
    redis_id = str(uuid.uuid4())
    broker.do_enqueue(queue, redis_id, data)
    assert broker.do_fetch(queue, 1) == [data]
    broker.do_nack(queue, redis_id)
    return redis_id


def _good(session_id: str, seq: int) -> dramatiq.Message[Any]:
    return dramatiq.Message(
        queue_name="transcript",
        actor_name="transcript_event",
        args=(),
        kwargs={"envelope": {"session_id": session_id, "seq": seq}},
        options={"retries": 3, "traceback": 'Traceback:\n  File "x", line 1\nRuntimeError: disk full'},
    )


@pytest.fixture
def mixed(broker: RedisBroker) -> dict[str, str]:
    """Two good dead letters with two corrupt ones between them: name → id as listed."""
    first, second = _good("sess_a", 1), _good("sess_b", 2)
    _dead_letter(broker, "transcript", first.encode())
    garbage = _dead_letter(broker, "transcript", GARBAGE)
    misshapen = _dead_letter(broker, "tool", MISSHAPEN)
    _dead_letter(broker, "admission", second.encode())
    # A good letter is listed by its Dramatiq message id; a corrupt one has only its Redis key.
    return {
        "first": first.message_id,
        "garbage": garbage,
        "misshapen": misshapen,
        "second": second.message_id,
    }


def _run(
    broker: RedisBroker, services: Services, capsys: Any, action: str, *ids: str, every: bool = False
) -> tuple[int, Any]:
    """`switchboard dlq ACTION … --json`, in-process; its exit code and its parsed output."""
    settings = Settings(broker_namespace=broker.namespace)
    code = run_dlq(settings, services, action, list(ids), every=every, as_json=True)
    return code, json.loads(capsys.readouterr().out)


def test_a_corrupt_letter_is_listed_as_corrupt_beside_the_good_ones(
    broker: RedisBroker, mixed: dict[str, str]
) -> None:
    """Listing does not stop at a body that is not a message: it is listed with its id,
    queue, size and an escaped preview, and the good letters around it are listed as before."""
    letters = {letter.id: letter for letter in DeadLetters(broker).list()}
    assert sorted(letters) == sorted(mixed.values())
    assert [letters[mixed[name]].session_id for name in mixed] == ["sess_a", None, None, "sess_b"]
    garbage = letters[mixed["garbage"]].summary(now_ms=letters[mixed["garbage"]].dead_since_ms + 1_500)
    assert garbage["corrupt"] is True and garbage["queue"] == "transcript" and garbage["age_s"] == 1.5
    assert garbage["size_bytes"] == len(GARBAGE)
    assert garbage["preview"] == "\\xff\\xfe\\x1b[31m{not a message"
    assert garbage["error"].startswith("corrupt: UnicodeDecodeError:")
    misshapen = letters[mixed["misshapen"]].summary(now_ms=0)
    assert misshapen["error"] == "corrupt: its kwargs is a list, not a dict"
    assert letters[mixed["first"]].summary(now_ms=0)["corrupt"] is False


def test_a_corrupt_letter_is_refused_by_replay_and_removed_by_purge(
    broker: RedisBroker, mixed: dict[str, str]
) -> None:
    """Replaying a corrupt letter is a refusal that says why; purging it removes it."""
    dead_letters = DeadLetters(broker)
    garbage = dead_letters.find(mixed["garbage"][:8])
    assert garbage is not None
    with pytest.raises(Refusal, match="cannot be replayed"):
        dead_letters.replay(garbage)
    assert dead_letters.purge(garbage) is True
    assert mixed["garbage"] not in [letter.id for letter in dead_letters.list()]


def test_the_command_lists_and_shows_a_corrupt_letter(
    broker: RedisBroker, mixed: dict[str, str], services: Services, capsys: Any
) -> None:
    """`dlq list` (text and --json) and `dlq show` carry the corrupt letter; show gives its
    exact bytes, and the text listing escapes them."""
    code, rows = _run(broker, services, capsys, "list")
    assert code == 0 and sorted(row["id"] for row in rows) == sorted(mixed.values())
    code, shown = _run(broker, services, capsys, "show", mixed["garbage"])
    assert code == 0 and base64.b64decode(shown["raw_base64"]) == GARBAGE and shown["corrupt"] is True

    settings = Settings(broker_namespace=broker.namespace)
    assert run_dlq(settings, services, "list", [], every=False, as_json=False) == 0
    text = capsys.readouterr().out
    [row] = [line for line in text.splitlines() if line.startswith(mixed["garbage"])]
    assert "(corrupt)" in row and f"({len(GARBAGE)} bytes: \\xff\\xfe\\x1b[31m{{not a message)" in row
    assert "\x1b" not in text
    assert mixed["first"] in text and mixed["second"] in text


def test_replay_all_and_purge_all_keep_going_past_corrupt_letters(
    broker: RedisBroker, mixed: dict[str, str], services: Services, capsys: Any
) -> None:
    """`dlq replay --all` replays the good letters and reports each corrupt one as not
    replayable (exit 1); `dlq purge --all` then removes the corrupt ones."""
    code, results = _run(broker, services, capsys, "replay", every=True)
    assert code == 1
    done = {result["id"]: result for result in results}
    assert done[mixed["first"]]["done"] is True and done[mixed["second"]]["done"] is True
    for name in ("garbage", "misshapen"):
        assert done[mixed[name]]["done"] is False and "cannot be replayed" in done[mixed[name]]["why"]
    client: redis.Redis = broker.client
    replayed = []
    for queue in ("transcript", "admission"):
        for redis_id in client.lrange(f"{broker.namespace}:{queue}", 0, -1):
            body = client.hget(f"{broker.namespace}:{queue}.msgs", redis_id)
            assert isinstance(body, bytes)
            replayed.append(dramatiq.Message.decode(body).message_id)
    assert sorted(replayed) == sorted([mixed["first"], mixed["second"]])
    left = sorted(letter.id for letter in DeadLetters(broker).list())
    assert left == sorted([mixed["garbage"], mixed["misshapen"]])

    code, results = _run(broker, services, capsys, "purge", every=True)
    assert code == 0 and sorted(result["id"] for result in results) == sorted(
        [mixed["garbage"], mixed["misshapen"]]
    )
    assert DeadLetters(broker).list() == []
    for queue in ("transcript", "tool", "admission"):
        assert client.hlen(f"{broker.namespace}:{queue}.XQ.msgs") == 0


def test_a_corrupt_letter_is_purged_by_its_id(
    broker: RedisBroker, mixed: dict[str, str], services: Services, capsys: Any
) -> None:
    """`dlq purge ID` removes a corrupt letter named by a prefix of its id."""
    code, results = _run(broker, services, capsys, "purge", mixed["misshapen"][:12])
    assert code == 0 and results == [
        {"id": mixed["misshapen"], "session_id": None, "done": True, "why": None}
    ]
    assert len(DeadLetters(broker).list()) == 3
