"""Every stored phone number in its E.164 form (issue 44): numbers used to be taken as any `+` and
2 to 15 digits, so `+4402071234567` (the national trunk prefix inside an international number)
was stored beside `+442071234567`, the same subscriber, and a do-not-call entry for one did not
stop a dial to the other. Numbers are now parsed by libphonenumber and kept as E.164
(`pipeline.phone.numbers`); this rewrites the rows stored before, so they compare with the new ones:

- the do-not-call list: each number in its E.164 form; where both spellings were listed, the
  entry already in E.164 stays (a number is listed once per deployment);
- campaign contacts: each number in its E.164 form; a contact still waiting whose number is not
  a valid one (`+1415`, `+99912345678`) is never dialled: done, `failed`, with why in `refused`;
- trunks' caller numbers, calls placed (`outbound_calls`) and phone calls (`phone_calls`, the
  caller's number and the number dialled): each valid number in its E.164 form.

A number that is no valid one is otherwise left as it was: it is history (a SIP header said it),
and what is dialled from now on is checked where it comes in. Routes need no rewrite: a route's
whole number is compared in its E.164 form when a call comes in (`pipeline.phone.sip.route_matches`).
"""

from collections.abc import Callable
from typing import Any

from pipeline.call.errors import MalformedNumber
from pipeline.phone.numbers import e164, kept_number

STATEMENTS: list[str] = []

# Columns whose valid numbers are rewritten in place (no uniqueness rests on them).
_REWRITTEN = (
    ("campaign_contacts", "number"),
    ("trunks", "caller_number"),
    ("outbound_calls", "to_number"),
    ("phone_calls", "caller"),
    ("phone_calls", "number"),
)


def rewrite(execute: Callable[..., Any]) -> None:
    """Rewrite the stored numbers (see the module docstring), in the migration's transaction."""
    for old, new in _respelled(execute, "suppressions", "number"):
        execute(
            "UPDATE suppressions AS s SET number = %(new)s WHERE number = %(old)s AND NOT EXISTS"
            " (SELECT 1 FROM suppressions AS t WHERE t.namespace = s.namespace AND t.number = %(new)s)",
            {"old": old, "new": new},
        )
        execute("DELETE FROM suppressions WHERE number = %s", (old,))
    for table, column in _REWRITTEN:
        for old, new in _respelled(execute, table, column):
            execute(f"UPDATE {table} SET {column} = %s WHERE {column} = %s", (new, old))
    waiting = execute(
        "SELECT DISTINCT number FROM campaign_contacts WHERE state = 'waiting' AND number <> ''"
    ).fetchall()
    for (number,) in waiting:
        try:
            e164(number)
        except MalformedNumber as refused:
            execute(
                "UPDATE campaign_contacts SET state = 'done', outcome = 'failed', refused = %s"
                " WHERE state = 'waiting' AND number = %s",
                (str(refused)[:200], number),
            )


def _respelled(execute: Callable[..., Any], table: str, column: str) -> list[tuple[str, str]]:
    """The distinct numbers of a column whose E.164 form is spelled otherwise, with that form."""
    rows = execute(f"SELECT DISTINCT {column} FROM {table} WHERE {column} LIKE '+%%'").fetchall()
    return [(str(row[0]), kept_number(str(row[0]))) for row in rows if kept_number(str(row[0])) != row[0]]
