"""One name for an ending (docs/api.md, "Endings"): the record's end reasons take the words the
call log always used (`provider_call_ended` → `caller_hung_up`, `ended_by_api` → `app_ended`,
`session_timeout` → `max_duration`), in the column and in the state the folds read."""

_RENAMED = {
    "provider_call_ended": "caller_hung_up",
    "ended_by_api": "app_ended",
    "session_timeout": "max_duration",
}

STATEMENTS = [
    statement
    for former, current in _RENAMED.items()
    for statement in (
        f"UPDATE sessions SET end_reason = '{current}' WHERE end_reason = '{former}'",
        f"""
        UPDATE sessions SET state = jsonb_set(state, '{{end_reason}}', '"{current}"')
         WHERE state ->> 'end_reason' = '{former}'
        """,
    )
]
