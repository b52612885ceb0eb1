"""Queue and actor names, shared by the gateway (which enqueues) and the workers."""

from __future__ import annotations

from dataclasses import dataclass

ADMISSION_QUEUE = "admission"
TRANSCRIPT_QUEUE = "transcript"
TOOL_QUEUE = "tool"
TOOL_RUNS_QUEUE = "tool_runs"
COMPACTION_QUEUE = "compaction"
# Requests that only read (a session's record or call log, the session list, an API key's
# identity): a queue of their own, so a burst of reads never waits in front of a call's
# admission, nor a call's admission behind them.
READS_QUEUE = "reads"
# Webhooks to the apps that own calls: an endpoint that is slow or down never holds up a call.
APP_WEBHOOKS_QUEUE = "app_webhooks"
# Event streams to the apps' own brokers (docs/events.md): a broker down never holds up a call,
# nor the webhooks.
EVENT_STREAMS_QUEUE = "event_streams"
# Every queue a deployment has (its dead letters, depths and lags are per queue).
QUEUES = (
    ADMISSION_QUEUE,
    READS_QUEUE,
    TRANSCRIPT_QUEUE,
    TOOL_QUEUE,
    TOOL_RUNS_QUEUE,
    COMPACTION_QUEUE,
    APP_WEBHOOKS_QUEUE,
    EVENT_STREAMS_QUEUE,
)

# The queues whose messages wait on the app's own servers (its webhook endpoint, its broker): an
# app that is slow or down keeps a thread on its delivery for as long as an attempt may take.
DELIVERY_QUEUES = (APP_WEBHOOKS_QUEUE, EVENT_STREAMS_QUEUE)
# Threads of each delivery queue's pool in a worker that consumes it beside other queues (the
# Procfile's app_webhooks and event_streams processes run 4 each).
DELIVERY_POOL_THREADS = 4


@dataclass(frozen=True)
class Pool:
    """Queues a worker process consumes with threads of their own: a message of one pool never
    waits for a thread another pool's messages hold."""

    queues: frozenset[str]
    threads: int


def worker_pools(queues: frozenset[str], threads: int) -> tuple[Pool, ...]:
    """How a worker consuming `queues` shares out its threads. A call's queues share `threads`;
    each delivery queue consumed beside them has a pool of its own, so that one `switchboard
    worker` on every queue (the README's way) is held up by a dead app no more than the
    Procfile's processes are: an app's broker that never answers once held all 8 threads, and an
    unrelated call's turns waited 41 s. A worker of one pool only keeps its `threads`."""
    deliveries = [queue for queue in DELIVERY_QUEUES if queue in queues]
    calls = queues - frozenset(deliveries)
    if len(deliveries) + (1 if calls else 0) <= 1:
        return (Pool(queues, threads),)
    pools = [Pool(calls, threads)] if calls else []
    pools += [Pool(frozenset({queue}), DELIVERY_POOL_THREADS if calls else threads) for queue in deliveries]
    return tuple(pools)


# Each durable event goes to the queue of the concern it belongs to; whichever worker takes
# it applies every contiguous logged event of the session, so queues never reorder a session.
_QUEUE_OF_TYPE = {
    "switchboard.sideband_connected": ADMISSION_QUEUE,
    "switchboard.sideband_closed": ADMISSION_QUEUE,
    "switchboard.end_requested": ADMISSION_QUEUE,
    "session.created": ADMISSION_QUEUE,
    "session.updated": ADMISSION_QUEUE,
    "response.function_call_arguments.done": TOOL_QUEUE,
    "response.output_item.done": TOOL_QUEUE,
    "switchboard.compaction_requested": COMPACTION_QUEUE,
    "conversation.item.deleted": COMPACTION_QUEUE,
}

EVENT_ACTOR = {
    ADMISSION_QUEUE: "admission_event",
    TRANSCRIPT_QUEUE: "transcript_event",
    TOOL_QUEUE: "tool_event",
    COMPACTION_QUEUE: "compaction_event",
}


def queue_for(event_type: str) -> str:
    return _QUEUE_OF_TYPE.get(event_type, TRANSCRIPT_QUEUE)


# The request actors (an API request the gateway waits on) that only read.
READ_REQUESTS = frozenset(
    {
        "describe_session",
        "session_call_log",
        "list_sessions",
        "call_queue",
        "key_identity",
        "session_owners",
        "resolve_tools",
        "outbound_call",
    }
)


def queue_of_request(actor_name: str) -> str:
    """The queue an API request for `actor_name` is enqueued on."""
    return READS_QUEUE if actor_name in READ_REQUESTS else ADMISSION_QUEUE


def control_queue(namespace: str, gateway_id: str) -> str:
    """The Redis list a gateway takes its controls and directives from. Scoped by the
    broker namespace: two deployments on one Redis, each with a gateway `gw1`, must not read
    each other's controls (they answered each other's API calls: 7 of 10 creates got 503)."""
    return f"{namespace}:gateway.{gateway_id}"


def gateway_alive_key(namespace: str, gateway_id: str) -> str:
    """The Redis key a live gateway renews; its absence means the gateway is dead."""
    return f"{namespace}:gateway-alive:{gateway_id}"


def gateway_registry_key(namespace: str) -> str:
    """The Redis set of gateway ids that may hold sessions (checked for dead members)."""
    return f"{namespace}:gateways"


def dead_letter_counts_key(namespace: str) -> str:
    """The Redis hash (queue → count) where the workers publish how many dead letters each queue
    has in PostgreSQL, for the gateway's `switchboard_dead_letters` gauge (it reads no database)."""
    return f"{namespace}:dead-letter-counts"
