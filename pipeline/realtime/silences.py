"""The caller's silences on a Realtime phone call: the provider's idle timeout (configured from
the route) is counted; the agent asks whether the caller is still there, and after the route's
number of them says goodbye and hangs up when that is said."""

from __future__ import annotations

from pipeline.realtime.events import CallerSilent
from pipeline.realtime.turns import SAY_EXACTLY, begin_directed
from pipeline.session.state import IN_CALL, Phase, ResponseContext, SessionState
from pipeline.session.step import LogEntry, Step, unchanged

ARE_YOU_THERE = "The caller has said nothing for a while. Ask them, briefly, whether they are still there."
GOODBYE_SILENT = "I can't hear anyone on the line, so I'll end the call now. Goodbye!"


def caller_silent(state: SessionState, event: CallerSilent) -> Step:
    """The caller said nothing for the idle timeout: counted; the agent asks whether they are
    there, or, at the route's limit, says goodbye and hangs up when that is said."""
    if state.phase not in IN_CALL:
        return unchanged(state)
    heard = state.realtime.silences_heard + 1
    counted = Step(
        state=state.with_realtime(silences_heard=heard),
        effects=(LogEntry(kind="call.silence", data={"count": heard}),),
    )
    now = counted.state
    if (
        now.line_closed
        or now.realtime.hanging_up
        or now.realtime.turn is not None
        or now.phase is not Phase.LISTENING
    ):
        return counted
    limit = state.phone.silences if state.phone is not None else None
    if limit is not None and heard >= limit:
        goodbye = ResponseContext(
            instructions=SAY_EXACTLY.format(text=GOODBYE_SILENT),
            max_output_tokens=state.limits.max_output_tokens,
            input_item_id="",
            tool_choice="none",
        )
        leaving = now.with_realtime(hanging_up=True, hangup_reason="caller_silent")
        return counted.then(begin_directed(leaving, goodbye))
    prompt = ResponseContext(
        instructions=f"{state.instructions}\n\n{ARE_YOU_THERE}",
        max_output_tokens=state.limits.max_output_tokens,
        input_item_id="",
        tool_choice="none",
    )
    return counted.then(begin_directed(now, prompt))
