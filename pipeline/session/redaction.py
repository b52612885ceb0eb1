"""What an operator or an app types into a call passes the same boundary as what a caller says.

A supervisor's say or whisper, the app's `agent/say` and `agent/reply`, a prompt block, an
attention reason, an end reason, a keypad collection's prompt and arguments, a caller's typed
line: each is a host input numbered into the session's log, and the log is what the record,
webhooks, event streams, exports and the console read. So each is redacted with the session's
kinds before it is numbered (the gateway, `redacted_input`), and a session's own texts (its
instructions, greeting and hang-up condition) before its first input is logged (the worker,
`redacted_creation`). The model then hears what is kept: a card number an operator typed is
said masked, as a caller's typed line always was.

Fail closed: every string of an input is redacted unless the input's type says it configures
the call rather than says anything — the tools offered (the deployment's own catalog) and a
transfer's target (the contact centre's own number, which must stay dialable). The protocol's
own fields (types, ids, names) are left by the `Redactor` itself. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

from pipeline.privacy.boundary import Redactor
from pipeline.session.wire import HostInput, SessionCreated, ToolsSetRequested, host_event, parse_host

# Inputs that only configure the call: nothing in them was typed as words.
_CONFIGURATION = frozenset({ToolsSetRequested.model_fields["type"].default})
# Fields an input carries as configuration, kept as given: (type, path of keys).
_KEPT_AS_GIVEN: dict[str, tuple[tuple[str, ...], ...]] = {
    "switchboard.supervisor": (("verb", "to"),),
}


def redacted_input(event: HostInput, redactor: Redactor) -> HostInput:
    """`event` as the session's log may keep it: every text in it redacted with the session's
    kinds, what configures the call as given. The same object when nothing changed."""
    if event.type in _CONFIGURATION:
        return event
    raw = host_event(event)
    kept = [
        (path, value) for path in _KEPT_AS_GIVEN.get(event.type, ()) if (value := _at(raw, path)) is not None
    ]
    redacted = redactor.event(raw)
    if redacted is raw:
        return event
    for path, value in kept:
        redacted = _with(redacted, path, value)
    if redacted == raw:
        return event
    return parse_host(redacted)  # type: ignore[return-value]


def redacted_creation(created: SessionCreated) -> SessionCreated:
    """A session's first input with its own texts (instructions, greeting, hang-up condition)
    redacted by its own privacy policy; its configuration (tools, webhook, stream, the number
    it dials) as given."""
    redactor = Redactor(created.privacy.kinds)
    instructions = redactor.text(created.instructions)
    hangup_when = redactor.text(created.hangup_when) if created.hangup_when is not None else None
    greeting = created.greeting
    if greeting is not None:
        said = redactor.event(greeting.model_dump(mode="json", exclude_none=True))
        greeting = type(greeting).model_validate(said)
    if (instructions, hangup_when, greeting) == (created.instructions, created.hangup_when, created.greeting):
        return created
    return created.model_copy(
        update={"instructions": instructions, "hangup_when": hangup_when, "greeting": greeting}
    )


def _at(raw: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = raw
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _with(raw: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    head, *rest = path
    inner = raw.get(head)
    if not rest:
        return {**raw, head: value}
    assert isinstance(inner, dict)
    return {**raw, head: _with(inner, tuple(rest), value)}
