"""`switchboard dlq list | show ID | replay ID… | --all | purge ID… | --all`."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from pipeline.call.errors import UnreplayableDeadLetter
from pipeline.platform.config import Settings
from switchboard.services import Services
from workers.dead_letters import DeadLetters, Letter


def run_dlq(
    settings: Settings, services: Services, action: str, ids: list[str], *, every: bool, as_json: bool
) -> int:
    from models.db import connect
    from models.migrate import migrate
    from workers.broker import make_broker

    # The dead letters are rows (migrated here too: this may run before any worker did).
    migrate(connect(services.database_url))
    broker = make_broker(services.redis_url, namespace=settings.broker_namespace)
    letters = DeadLetters(broker)
    now_ms = int(time.time() * 1000)
    try:
        if action == "list":
            return _list(letters.list(), now_ms, as_json)
        if action == "show":
            if len(ids) != 1:
                print("switchboard dlq show: give one message id", file=sys.stderr)
                return 2
            letter = letters.find(ids[0])
            if letter is None:
                print(f"switchboard dlq: no dead letter {ids[0]!r}", file=sys.stderr)
                return 1
            detail = {**letter.detail(now_ms), "replay_would": letters.outlook(letter, now_ms)}
            print(json.dumps(detail, indent=2, default=str))
            return 0
        if not ids and not every:
            print(f"switchboard dlq {action}: give message ids, or --all", file=sys.stderr)
            return 2
        chosen: list[Letter | str] = list(letters.list()) if every else [letters.find(i) or i for i in ids]
        return _act(letters, action, chosen, as_json, now_ms)
    finally:
        broker.close()


def _list(letters: list[Letter], now_ms: int, as_json: bool) -> int:
    rows = [letter.summary(now_ms) for letter in letters]
    if as_json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no dead letters")
        return 0
    print(f"{'id':36}  {'queue':10}  {'actor':17}  {'session':40}  {'seq':>5}  {'age s':>8}  error")
    for row in rows:
        # A corrupt letter has no actor or session to show; its size and the start of its
        # bytes (escaped, so a terminal shows them as text) say what it is instead.
        actor, error = row["actor"], row["error"]
        if row["corrupt"]:
            actor, error = "(corrupt)", f"{error} ({row['size_bytes']} bytes: {row['preview']})"
        print(
            f"{row['id']:36}  {row['queue']:10}  {actor:17}  {row['session_id'] or '-':40}  "
            f"{row['seq'] if row['seq'] is not None else '-':>5}  {row['age_s']:>8}  {error}"
        )
    return 0


def _act(letters: DeadLetters, action: str, chosen: list[Letter | str], as_json: bool, now_ms: int) -> int:
    results: list[dict[str, Any]] = []
    for letter in chosen:
        if isinstance(letter, str):
            results.append(
                {"id": letter, "done": False, "why": "no such dead letter (replayed or purged already?)"}
            )
            continue
        # Said before it is done: a request that is no longer valid is replayed all the same (its
        # actor re-checks under the lock and refuses), and the operator reads why.
        outlook = letters.outlook(letter, now_ms) if action == "replay" else None
        try:
            done = letters.replay(letter) if action == "replay" else letters.purge(letter)
            why = None if done else "no longer a dead letter (replayed or purged meanwhile)"
        except UnreplayableDeadLetter as refused:
            # The others are still replayed; this one is reported and stays for a purge.
            done, why = False, str(refused)
        result: dict[str, Any] = {"id": letter.id, "session_id": letter.session_id, "done": done, "why": why}
        if outlook is not None:
            result["outlook"] = outlook
        results.append(result)
    if as_json:
        print(json.dumps(results))
    else:
        verb = "replayed" if action == "replay" else "purged"
        for result in results:
            if not result["done"]:
                print(f"{result['id']}: {result['why']}")
            elif result.get("outlook"):
                print(f"{verb} {result['id']}: {result['outlook']}")
            else:
                print(f"{verb} {result['id']}")
        if not results:
            print(f"nothing to {action}")
    return 0 if all(result["done"] for result in results) else 1
