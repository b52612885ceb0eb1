"""Migration 0020 (issue 44): numbers stored before numbers were kept in one spelling are
rewritten in their E.164 form, so a do-not-call entry, a campaign's contact, a call's row and a
phone call compare with the numbers stored from now on; a waiting contact whose number is no
valid one is never dialled."""

from __future__ import annotations

import importlib
import uuid
from typing import Any

from pipeline.outbound.specs import CampaignSettings

migration = importlib.import_module("models.migrations.0020_e164_numbers")


def _column(database: Any, sql: str, namespace: str) -> list[Any]:
    return [row if len(row) > 1 else row[0] for row in database.execute_sql(sql, (namespace,)).fetchall()]


def test_numbers_stored_in_another_spelling_are_rewritten_in_their_e164_form(database: Any) -> None:
    """Each stored number in its E.164 form; of two spellings of one suppressed number, one
    entry (the one in E.164) stays; a waiting contact with no valid number is done, `failed`,
    saying why; what is no number is left as it was; run again, it changes nothing."""
    namespace = f"e164-{uuid.uuid4().hex[:8]}"
    run = database.execute_sql
    for number, reason in (
        ("+4402071234567", "trunk prefix"),
        ("+490301234567", "trunk prefix"),
        ("+49301234567", "as E.164"),
        ("+1415", "no number"),
    ):
        run(
            "INSERT INTO suppressions (namespace, number, reason, source) VALUES (%s, %s, %s, 'api')",
            (namespace, number, reason),
        )
    run(
        "INSERT INTO trunks (namespace, name, url, username, password, caller_number)"
        " VALUES (%s, 'main', 'sips:trunk.example.com', 'agent', 'sealed', '+4402071234500')",
        (namespace,),
    )
    campaign_id = f"camp_{uuid.uuid4().hex}"
    spec = CampaignSettings.model_validate(
        {"name": "n", "session": {"instructions": "x", "provider": "live"}}
    )
    run(
        "INSERT INTO campaigns (id, namespace, name, spec, status)"
        " VALUES (%s, %s, 'n', %s::jsonb, 'running')",
        (campaign_id, namespace, spec.model_dump_json()),
    )
    for position, (number, state, outcome) in enumerate(
        (("+4402071234567", "waiting", None), ("+1415", "waiting", None), ("+1416", "done", "completed"))
    ):
        run(
            "INSERT INTO campaign_contacts (campaign_id, position, number, state, outcome)"
            " VALUES (%s, %s, %s, %s, %s)",
            (campaign_id, position, number, state, outcome),
        )
    run(
        "INSERT INTO outbound_calls (id, namespace, session_id, to_number, trunk)"
        " VALUES (%s, %s, 'sess_x', '+490301234567', 'main')",
        (f"call_{uuid.uuid4().hex}", namespace),
    )
    run(
        "INSERT INTO phone_calls (call_id, namespace, number, caller, action)"
        " VALUES (%s, %s, '+4402079460000', '+4402079460177', 'reject')",
        (f"rtc_{uuid.uuid4().hex}", namespace),
    )

    migration.rewrite(run)

    suppressed = _column(
        database, "SELECT number, reason FROM suppressions WHERE namespace = %s ORDER BY number", namespace
    )
    assert suppressed == [
        ("+1415", "no number"),
        ("+442071234567", "trunk prefix"),
        ("+49301234567", "as E.164"),
    ]
    assert _column(database, "SELECT caller_number FROM trunks WHERE namespace = %s", namespace) == [
        "+442071234500"
    ]
    contacts = _column(
        database,
        "SELECT c.number, c.state, c.outcome, c.refused FROM campaign_contacts c"
        " JOIN campaigns p ON p.id = c.campaign_id WHERE p.namespace = %s ORDER BY c.position",
        namespace,
    )
    assert contacts == [
        ("+442071234567", "waiting", None, None),
        ("+1415", "done", "failed", "'+1415' is not a valid phone number: too short for a number of +1"),
        ("+1416", "done", "completed", None),
    ]
    assert _column(database, "SELECT to_number FROM outbound_calls WHERE namespace = %s", namespace) == [
        "+49301234567"
    ]
    assert _column(database, "SELECT caller, number FROM phone_calls WHERE namespace = %s", namespace) == [
        ("+442079460177", "+442079460000")
    ]

    migration.rewrite(run)
    again = _column(
        database, "SELECT number, reason FROM suppressions WHERE namespace = %s ORDER BY number", namespace
    )
    assert again == suppressed
