"""The usage budget: provider-reported total tokens, summed over every response.

One notice at 80 % asks the model to wrap up and tell the person; at 100 % the session ends
`usage_budget_reached` (the sideband closed, the call hung up), checked as each response ends.
(A Live call's budget is in seconds, checked as the provider reports them: `pipeline/live/reports.py`.)
"""

from __future__ import annotations

from pipeline.call.limits import BUDGET_NOTICE, BUDGET_WARNING_PERCENT
from pipeline.realtime.controls import ItemCreate
from pipeline.session.ending import finish
from pipeline.session.state import IN_CALL, SessionState
from pipeline.session.step import Step, unchanged


def exhausted(state: SessionState) -> Step | None:
    """The session's end if its usage reached the budget, else None."""
    if state.phase in IN_CALL and state.usage.total_tokens >= state.limits.usage_budget_tokens:
        return finish(state, "usage_budget_reached")
    return None


def warn(state: SessionState) -> Step:
    """The one notice at 80 % of the budget (a system message the next response reads)."""
    near = state.usage.total_tokens * 100 >= state.limits.usage_budget_tokens * BUDGET_WARNING_PERCENT
    if state.budget_warning_sent or not near or state.phase not in IN_CALL:
        return unchanged(state)
    notice = ItemCreate(
        item={"type": "message", "role": "system", "content": [{"type": "input_text", "text": BUDGET_NOTICE}]}
    )
    return Step(state=state.evolve(budget_warning_sent=True), controls=(notice,))
