"""What the model is given: its instructions as named blocks, and the tools it is offered.

The app rewrites one block at a time (`PUT /prompt/{name}`); only a change of the joined bytes
sends `session.update`, since identical instructions would still cost the provider a cache
write. The call log keeps each block's name, hash and length, never its text. The tools change
mid-call too, between tool runs, never under one. A session created with `hangup` is also
offered the built-in `end_call`, with which the model ends the call after its goodbye.
"""

from __future__ import annotations

import hashlib

from pipeline.call.capabilities import Ability, Refusal, refusal
from pipeline.call.limits import MAXIMUM_INSTRUCTIONS_BYTES, MAXIMUM_PROMPT_BLOCKS
from pipeline.dialects import capabilities_of, dialect_of
from pipeline.session.refusals import over_for
from pipeline.session.state import IN_CALL, PromptBlock, SessionState
from pipeline.session.step import Control, LogEntry, Step, answering, refused, refused_by, refused_for
from pipeline.session.wire import PromptSetRequested, ToolsSetRequested


def joined(blocks: tuple[PromptBlock, ...]) -> str:
    """The session's instructions: its blocks' texts, in order, a blank line apart."""
    return "\n\n".join(block.text for block in blocks if block.text)


def block_hash(text: str) -> str:
    """What the call log keeps of a block's text."""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def set_prompt(state: SessionState, event: PromptSetRequested) -> Step:
    """Rewrite one block (empty text removes it; a new name is added last): 200, or 422 when
    the instructions would grow past their bound."""
    ended = over_for(state)
    if ended is not None:
        return refused_for(state, event.request_id, event.gateway_id, ended)
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
    controls: tuple[Control, ...] = ()
    if changed and state.phase in IN_CALL:
        told = dialect_of(state).instructions_changed(state, event.name, event.text, instructions_now)
        if isinstance(told, Refusal):
            return refused_by(state, event.request_id, event.gateway_id, told)
        controls = told
    step = Step(state=updated, controls=controls, effects=(LogEntry(kind="prompt.changed", data=entry),))
    body = {"status": "changed" if changed else "unchanged", **entry}
    return answering(step, event.request_id, event.gateway_id, 200, body)


def set_tools(state: SessionState, event: ToolsSetRequested) -> Step:
    """Offer these tools from now on: 200, or 409 while a tool runs (its call must get its
    output under the catalog it was made with)."""
    ended = over_for(state)
    if ended is not None:
        return refused_for(state, event.request_id, event.gateway_id, ended)
    cannot = refusal(capabilities_of(state), Ability.TOOLS)
    if cannot is not None:
        return refused_by(state, event.request_id, event.gateway_id, cannot)
    if state.realtime.chain.pending is not None:
        message = (
            f"the tool {state.realtime.chain.pending.name} is running; change the tools when it has finished"
        )
        return refused(state, event.request_id, event.gateway_id, 409, "tool_running", message)
    updated = state.evolve(
        tools=event.tools,
        catalog_digest=event.catalog_digest,
        tool_versions=event.tool_versions,
        tool_side_effects=event.tool_side_effects,
    )
    names = [str(tool.get("name")) for tool in event.tools]
    controls = dialect_of(state).tools_changed(updated) if state.phase in IN_CALL else ()
    step = Step(
        state=updated, controls=controls, effects=(LogEntry(kind="tools.changed", data={"tools": names}),)
    )
    return answering(step, event.request_id, event.gateway_id, 200, {"status": "changed", "tools": names})
