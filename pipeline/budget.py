"""The usage budget: provider-reported total tokens, summed over every response.

One notice at 80 % asks the model to wrap up and tell the person; at 100 % the session ends
`usage_budget_reached` (the sideband closed, the call hung up), checked as each response ends.
"""

from __future__ import annotations

from pipeline.admission import finish
from pipeline.state import IN_CALL, SessionState
from pipeline.step import Step, unchanged
from pipeline.wire import ItemCreate

WARNING_PERCENT = 80

NOTICE = (
    "Notice from the host, not from the person: this call has used most of its usage budget "
    "and will be ended when the budget runs out. Bring what you are doing to a close, tell the "
    "person the call is near its limit, and suggest they call back or continue in writing for "
    "anything long."
)


def exhausted(state: SessionState) -> Step | None:
    """The session's end if its usage reached the budget, else None."""
    if state.phase in IN_CALL and state.usage.total_tokens >= state.limits.usage_budget_tokens:
        return finish(state, "usage_budget_reached")
    return None


def warn(state: SessionState) -> Step:
    """The one notice at 80 % of the budget (a system message the next response reads)."""
    near = state.usage.total_tokens * 100 >= state.limits.usage_budget_tokens * WARNING_PERCENT
    if state.budget_warning_sent or not near or state.phase not in IN_CALL:
        return unchanged(state)
    notice = ItemCreate(
        item={"type": "message", "role": "system", "content": [{"type": "input_text", "text": NOTICE}]}
    )
    return Step(state=state.evolve(budget_warning_sent=True), controls=(notice,))
