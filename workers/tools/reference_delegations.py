"""The reference delegation handlers: what a Live call's delegations run in the demo and the
tests. `order_desk` is realistic (it reads the demo shop's orders); `echo_task`, `wait_task`,
`refuse_task` and `fail_task` exercise the runner's paths (a result, a cooperative wait that
may time out or be cancelled, a refusal, a raising body).
"""

from __future__ import annotations

import re
import time
from datetime import date

from models.orders import find_order
from workers.tools.registry import DelegationRefused, DelegationRequest, ToolContext, delegation_handler

# An order number as a caller says it: a run of digits (the demo's are four).
ORDER_NUMBER = re.compile(r"\b(\d{3,12})\b")
# How long `wait_task` waits unless the task names a number of milliseconds: longer than a test
# needs to kill a worker under it, shorter than the runner's bound.
DEFAULT_WAIT_MS = 5_000
MAXIMUM_WAIT_MS = 60_000
WAIT_FOR = re.compile(r"\bwait (\d{1,6}) ?ms\b")


@delegation_handler(name="order_desk", version="1", description="Looks up an order the caller names.")
def order_desk(request: DelegationRequest, context: ToolContext) -> str:
    found = ORDER_NUMBER.search(request.task)
    if found is None:
        raise DelegationRefused("the caller did not say an order number; ask them for it")
    order_id = found.group(1)
    order = find_order(order_id)
    if order is None:
        return f"There is no order {order_id}. Ask the caller to check the number."
    # Said as the caller would say it: the day, not the date.
    eta = f", arriving on {date.fromisoformat(order['eta']).strftime('%A')}" if order.get("eta") else ""
    carrier = f" with {order['carrier']}" if order.get("carrier") else ""
    return f"Order {order_id} is {order['status']}{carrier}{eta}."


@delegation_handler(name="echo_task", version="1", description="Answers with the task it was given.")
def echo_task(request: DelegationRequest, context: ToolContext) -> str:
    return f"You asked: {request.task}" if request.task else "The request had no words."


@delegation_handler(
    name="wait_task",
    version="1",
    description="Waits (the task may say 'wait N ms'), then answers with the task.",
)
def wait_task(request: DelegationRequest, context: ToolContext) -> str:
    asked = WAIT_FOR.search(request.task)
    ms = min(int(asked.group(1)), MAXIMUM_WAIT_MS) if asked else DEFAULT_WAIT_MS
    started = time.monotonic()
    if not context.sleep(ms / 1_000):
        # Cancelled: the runner has answered already; this only ends the thread early.
        return "cancelled"
    return f"Done after {round((time.monotonic() - started) * 1000)} ms: {request.task}"


@delegation_handler(name="refuse_task", version="1", description="Refuses every task.")
def refuse_task(request: DelegationRequest, context: ToolContext) -> str:
    raise DelegationRefused("this line cannot do that")


@delegation_handler(name="fail_task", version="1", description="Fails every task.")
def fail_task(request: DelegationRequest, context: ToolContext) -> str:
    raise RuntimeError("the order system is down")


DELEGATION_HANDLERS = [order_desk, echo_task, wait_task, refuse_task, fail_task]
