"""A tool that needs the caller's card number (issue 25, step 3): its sensitive parameter is
sealed by the gateway with the session's public key before anything keeps it, and opened only in
the tool runner's memory. The tool charges the right card; no store holds the number readable;
a worker killed while the tool runs never charges twice (the payment reaches outside the
deployment: the call is answered that its outcome is unknown); and once the session's key is
destroyed, what was sealed for it opens never again."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from models import data_keys
from models.db import connect
from pipeline.platform.config import settings_from
from pipeline.privacy.sealing import SealedValueUnreadable, open_sealed
from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script, simulator_call
from tests.e2e.test_privacy import _card, _database_text, _logs, _redis_text
from tests.support.waiting import wait_for
from workers.runtime import deployment_keys

TOOL_MODULES = "workers.tools.reference,tests.tools.payment_tools"


@pytest.fixture
def payment_stack(services: Services, namespace: str) -> Iterator[Stack]:
    with Stack(
        services.database_url,
        services.redis_url,
        namespace=f"{namespace}-payment",
        extra_env={
            "SWITCHBOARD_TOOL_MODULES": TOOL_MODULES,
            "SWITCHBOARD_BROKER_HEARTBEAT_TIMEOUT_MS": "1500",
        },
    ) as running:
        running.start(workers=1)
        yield running


def _script(card: str, hold_ms: int) -> dict[str, Any]:
    arguments = {"card_number": card, "amount_cents": 1250, "hold_ms": hold_ms}
    return {
        "name": "payment",
        "timing": {
            "delta_interval_ms": 5,
            "chars_per_delta": 40,
            "speech_ms": 100,
            "response_wait_ms": 30000,
        },
        "caller": [
            {"say": f"Please charge my card {card}.", "after_ms": 50},
            {"hangup": True, "after_ms": 300},
        ],
        "model": [
            {"function_call": {"name": "take_payment", "arguments": arguments}},
            {"say": "Done, thank you."},
        ],
    }


def _step(client: Client, session_id: str) -> dict[str, Any] | None:
    steps = client.session(session_id)["tool_steps"]
    return steps[0] if steps else None


def _stored_arguments(services: Services, session_id: str) -> str:
    database = connect(services.database_url)
    row = database.execute_sql(
        "SELECT raw_arguments FROM tool_steps WHERE session_id = %s", (session_id,)
    ).fetchone()
    assert row is not None
    return str(row[0])


def test_the_tool_gets_the_card_in_memory_and_no_store_holds_it(
    payment_stack: Stack, services: Services
) -> None:
    card = _card("4")
    spaced = " ".join(card[i : i + 4] for i in range(0, 16, 4))
    client = Client(payment_stack.api_url, payment_stack.api_token)
    set_script(payment_stack, _script(spaced, 0))
    session = client.create_session("You are the payments desk.", tools=["take_payment"])
    call_id = client.connect(session["id"])["call_id"]
    record = client.wait_for_status(session["id"], timeout_s=60)
    assert record["status"] == "ended", record

    [step] = record["tool_steps"]
    assert (step["tool"], step["status"]) == ("take_payment", "succeeded"), step
    # The tool read the real number: it passed the Luhn check and ends as the caller's does.
    [output] = [
        c["control"]["item"]["output"]
        for c in simulator_call(payment_stack, call_id)["controls"]
        if c["control"]["type"] == "conversation.item.create"
        and c["control"]["item"]["type"] == "function_call_output"
    ]
    assert json.loads(output)["result"] == {"charged_cents": 1250, "card_ending": card[-4:]}
    stored = json.loads(_stored_arguments(services, session["id"]))
    assert stored["card_number"].startswith("sealed:v1:") and stored["amount_cents"] == 1250

    for name, text in {
        "database": _database_text(services.database_url),
        "redis": _redis_text(services.redis_url, payment_stack.namespace),
        "logs": _logs(payment_stack),
        "record": json.dumps(client.session(session["id"], events=True), ensure_ascii=False),
    }.items():
        assert card not in text.replace(" ", "").replace("-", ""), name


def test_a_worker_killed_while_the_tool_runs_never_charges_twice_and_an_erased_key_opens_nothing(
    payment_stack: Stack, services: Services
) -> None:
    card = _card("5")
    client = Client(payment_stack.api_url, payment_stack.api_token)
    set_script(payment_stack, _script(card, 4_000))
    session = client.create_session("You are the payments desk.", tools=["take_payment"])
    session_id = session["id"]
    client.connect(session_id)
    wait_for(
        lambda: (_step(client, session_id) or {}).get("status") == "running", "the tool to run", timeout_s=30
    )
    [worker] = payment_stack.workers
    worker.popen.send_signal(signal.SIGKILL)
    worker.popen.wait()
    payment_stack.workers.clear()
    payment_stack.add_worker()

    record = client.wait_for_status(session_id, timeout_s=90)
    assert record["status"] == "ended", record
    # A body the killed worker had begun may have charged the card: it is not begun again (the
    # outcome is unknown); one it had not begun runs on the new worker, opening the card again.
    [step] = record["tool_steps"]
    assert (step["status"], (step["error"] or {}).get("code")) in (
        ("succeeded", None),
        ("failed", "outcome_unknown"),
    ), step

    # Crypto-shredding: with the session's key destroyed, the sealed card in its tool step (and
    # in every copy of its events) opens never again, with the deployment key or without.
    keys = deployment_keys(settings_from(payment_stack.env))
    connect(services.database_url)
    sealed = json.loads(_stored_arguments(services, session_id))["card_number"]
    private = data_keys.session_private_key(session_id, keys)
    assert open_sealed(sealed, private_key=private, session_id=session_id).replace(" ", "") == card
    assert data_keys.destroy_session_key(session_id)
    with pytest.raises(SealedValueUnreadable):
        data_keys.session_private_key(session_id, keys)
    assert wait_until(lambda: not data_keys.destroy_session_key(session_id), 1)
