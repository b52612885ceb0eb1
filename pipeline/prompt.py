"""What the model is given: its instructions as named blocks, and the tools it is offered.

The app rewrites one block at a time (`PUT /prompt/{name}`); only a change of the joined bytes
sends `session.update`, since identical instructions would still cost the provider a cache
write. The call log keeps each block's name, hash and length, never its text. The tools change
mid-call too, between tool runs, never under one. A session created with `hangup` is also
offered the built-in `end_call`, with which the model ends the call after its goodbye.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pipeline.call.dialect import Ability, refusal, too_long
from pipeline.dialects import capabilities_of
from pipeline.limits import MAXIMUM_INSTRUCTIONS_BYTES, MAXIMUM_PROMPT_BLOCKS
from pipeline.live import LiveAppend, instructions
from pipeline.state import IN_CALL, PromptBlock, SessionState
from pipeline.step import LogEntry, Step, answering, refused, refused_by
from pipeline.wire import PromptSetRequested, SessionUpdate, ToolsSetRequested

END_CALL = "end_call"
TRANSFER_CALL = "transfer_call"

# The goodbye comes in the same response as the call to end: nothing said after it is heard.
SAY_GOODBYE_FIRST = (
    "Say your goodbye in the same reply in which you call this, before the call: the call ends "
    "when that reply is done, and nothing you say after it is heard."
)


# A Live session's instructions are fixed at startup: a changed block is appended as an update.
LIVE_BLOCK_CHANGED = (
    "Your instructions have changed: follow this from now on, in place of the part named '{name}':\n{text}"
)
LIVE_BLOCK_REMOVED = "Your instructions have changed: disregard the part named '{name}' from now on."


def joined(blocks: tuple[PromptBlock, ...]) -> str:
    """The session's instructions: its blocks' texts, in order, a blank line apart."""
    return "\n\n".join(block.text for block in blocks if block.text)


def block_hash(text: str) -> str:
    """What the call log keeps of a block's text."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def set_prompt(state: SessionState, event: PromptSetRequested) -> Step:
    """Rewrite one block (empty text removes it; a new name is added last): 200, or 422 when
    the instructions would grow past their bound."""
    if state.is_terminal:
        return refused(
            state, event.request_id, event.gateway_id, 409, "session_ended", f"session is {state.phase}"
        )
    blocks = [block for block in state.blocks if block.name != event.name]
    position = next((i for i, block in enumerate(state.blocks) if block.name == event.name), len(blocks))
    if event.text:
        blocks.insert(position, PromptBlock(name=event.name, text=event.text))
    if len(blocks) > MAXIMUM_PROMPT_BLOCKS:
        message = f"the instructions have at most {MAXIMUM_PROMPT_BLOCKS} blocks"
        return refused(state, event.request_id, event.gateway_id, 422, "too_many_blocks", message)
    instructions_now = joined(tuple(blocks))
    if len(instructions_now.encode()) > MAXIMUM_INSTRUCTIONS_BYTES:
        message = f"the instructions would exceed {MAXIMUM_INSTRUCTIONS_BYTES} bytes"
        return refused(state, event.request_id, event.gateway_id, 422, "prompt_too_long", message)
    changed = instructions_now != state.instructions
    updated = state.evolve(prompt_blocks=tuple(blocks), instructions=instructions_now)
    entry = {"name": event.name, "hash": block_hash(event.text), "chars": len(event.text), "changed": changed}
    controls: tuple[SessionUpdate | LiveAppend, ...] = ()
    if changed and state.phase in IN_CALL and state.is_live:
        note = (
            LIVE_BLOCK_CHANGED.format(name=event.name, text=event.text)
            if event.text
            else LIVE_BLOCK_REMOVED.format(name=event.name)
        )
        cannot = too_long(capabilities_of(state), note)
        if cannot is not None:
            return refused_by(state, event.request_id, event.gateway_id, cannot)
        controls = (instructions(note),)
    elif changed and state.phase in IN_CALL:
        controls = (SessionUpdate(session={"type": "realtime", "instructions": instructions_now}),)
    step = Step(state=updated, controls=controls, effects=(LogEntry(kind="prompt.changed", data=entry),))
    body = {"status": "changed" if changed else "unchanged", **entry}
    return answering(step, event.request_id, event.gateway_id, 200, body)


def set_tools(state: SessionState, event: ToolsSetRequested) -> Step:
    """Offer these tools from now on: 200, or 409 while a tool runs (its call must get its
    output under the catalog it was made with)."""
    if state.is_terminal:
        return refused(
            state, event.request_id, event.gateway_id, 409, "session_ended", f"session is {state.phase}"
        )
    cannot = refusal(capabilities_of(state), Ability.TOOLS)
    if cannot is not None:
        return refused_by(state, event.request_id, event.gateway_id, cannot)
    if state.chain.pending is not None:
        message = f"the tool {state.chain.pending.name} is running; change the tools when it has finished"
        return refused(state, event.request_id, event.gateway_id, 409, "tool_running", message)
    updated = state.evolve(
        tools=event.tools,
        catalog_digest=event.catalog_digest,
        tool_versions=event.tool_versions,
        tool_side_effects=event.tool_side_effects,
    )
    names = [str(tool.get("name")) for tool in event.tools]
    controls: tuple[SessionUpdate, ...] = ()
    if state.phase in IN_CALL:
        session = {"type": "realtime", "tools": offered_tools(updated), "tool_choice": "auto"}
        controls = (SessionUpdate(session=session),)
    step = Step(
        state=updated, controls=controls, effects=(LogEntry(kind="tools.changed", data={"tools": names}),)
    )
    return answering(step, event.request_id, event.gateway_id, 200, {"status": "changed", "tools": names})


def offered_tools(state: SessionState) -> list[dict[str, Any]]:
    """The function tools as `session.update` carries them: the session's, and end_call when
    the session may hang up."""
    tools = [dict(tool) for tool in state.tools]
    if state.hangup_when is not None:
        tools.append(end_call_tool(state.hangup_when))
    if state.phone is not None and state.phone.transfer_targets:
        tools.append(transfer_call_tool(state.phone.transfer_targets))
    return tools


def transfer_call_tool(targets: tuple[str, ...]) -> dict[str, Any]:
    """The built-in tool with which the model hands a phone call on: only to the route's
    targets (an enum, so the model cannot invent a number)."""
    return {
        "type": "function",
        "name": TRANSFER_CALL,
        "description": (
            "Transfer the caller to a person or another line, when they ask for it or you cannot "
            "help. Tell the caller first, in the same reply. Only these targets exist."
        ),
        "parameters": {
            "type": "object",
            "properties": {"target": {"type": "string", "enum": list(targets)}},
            "required": ["target"],
        },
    }


def end_call_tool(when: str) -> dict[str, Any]:
    """The built-in tool with which the model ends the call."""
    return {
        "type": "function",
        "name": END_CALL,
        "description": f"End the call. {when}\n{SAY_GOODBYE_FIRST}".strip(),
        "parameters": {"type": "object", "properties": {}},
    }
