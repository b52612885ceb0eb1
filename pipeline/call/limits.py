"""Every limit Switchboard enforces, with its unit and the reason it exists."""

# A session that has not connected its sideband by then is failed, so a caller who never
# completes the WebRTC/SIP leg does not hold a provider call open.
ADMISSION_TIMEOUT_MS = 30_000

# The provider ends a realtime session at 60 minutes; Switchboard ends it first, cleanly.
MAXIMUM_SESSION_SECONDS = 3_600

# The watchers' transcripts are a UI projection; one item's accumulated text stops growing past this.
MAXIMUM_WATCH_TRANSCRIPT_BYTES = 16_000

# A provider frame larger than this is refused as an incident instead of being logged whole.
MAXIMUM_PROVIDER_FRAME_BYTES = 1_048_576

# A provider event nests a few levels (a response's output items, a tool's JSON schema in a
# session); one nested deeper than this is refused as malformed before anything walks it.
MAXIMUM_FRAME_JSON_DEPTH = 64

# An API request body is flat (a session spec nests three levels); deeper is refused with 422.
MAXIMUM_REQUEST_JSON_DEPTH = 32

# The incidents table's code column holds this many characters.
MAXIMUM_INCIDENT_CODE_CHARS = 128

# The websocket layer closes the socket beyond this; keep it well above the frame limit so an
# oversized frame is an incident, not a lost call.
MAXIMUM_SOCKET_MESSAGE_BYTES = 16 * 1_048_576

# Durable text (transcripts, summaries) is bounded so one runaway item cannot bloat the row.
MAXIMUM_DURABLE_TEXT_BYTES = 64_000

# The default ceiling for one spoken response; the provider accepts 1..4096 or "inf".
DEFAULT_MAXIMUM_OUTPUT_TOKENS = 1_024

# Session instructions beyond this are refused at creation (the provider's own bound is larger,
# but instructions this long are a client bug, and they ride on every response.create).
MAXIMUM_INSTRUCTIONS_BYTES = 32_000

# How long an API call waits for a worker's answer: a read then answers 503, a command numbered
# into the session's log 202 `queued` (it is in the log and will be applied).
API_REPLY_TIMEOUT_MS = 10_000

# A tool body that outlives this is cancelled and answered as timed out.
MAXIMUM_TOOL_MS = 30_000

# What one tool output may carry to the model: a function_call_output is cut to this (the full
# result stays in PostgreSQL), and an http tool's answer longer than this is refused unread, so a
# large answer can neither balloon every later response's context nor a worker's memory.
MAXIMUM_TOOL_OUTPUT_BYTES = 16_000

# A running tool whose outcome has not come back this long after its own limit is answered as
# interrupted: its message was lost (a dead worker past recovery, a dead-lettered run).
TOOL_DEADLINE_GRACE_MS = 15_000

# A response Switchboard asked for that has not reported `response.done` this long after it was
# asked for is lost (the event dropped with Redis, a stranded batch, a cancel nothing answered):
# its turn is settled with a `response_lost` incident and the caller's queued input answered.
# The provider generates speech faster than it is heard, so a response is done before its
# longest possible speech could be spoken: its output-token cap at about 20 audio tokens per
# second of speech (50 ms a token; "inf" is the provider's ceiling of 4,096). The default cap of
# 1,024 tokens is 51 s of speech; the deadline is never shorter than 60 s, so a short cap still
# leaves a slow provider time to start, and is that speech for larger caps (205 s at 4,096). A
# tool the response called is not counted: once the response is done, the turn waits on the
# tool's own deadline (MAXIMUM_TOOL_MS + TOOL_DEADLINE_GRACE_MS), never on this one.
RESPONSE_DEADLINE_MS = 60_000
RESPONSE_MS_PER_OUTPUT_TOKEN = 50
PROVIDER_MAXIMUM_OUTPUT_TOKENS = 4_096

# A session's previous response reporting this many input tokens starts a compaction (the
# provider's realtime context holds 32k tokens; half of it leaves room and halves the cost).
DEFAULT_COMPACTION_INPUT_TOKENS = 16_000

# A compaction summary is stored and injected at most this long; the maintenance response is
# capped at 2,048 output tokens, which is well inside it.
MAXIMUM_SUMMARY_BYTES = 12_000

# A maintenance response that has not finished this long after it was asked for is abandoned,
# so a lost or refused response can never hold the compaction cycle forever.
COMPACTION_DEADLINE_MS = 60_000

# How long the API waits for a forced compaction to finish before answering "still running".
COMPACTION_REPLY_TIMEOUT_MS = 70_000
# An erasure on request rewrites every row of a session (a caller's, of every session of the
# number) before it answers; past this the answer is 503 `reply_timeout`, the erasure goes on,
# and asking again answers how it went.
ERASURE_REPLY_TIMEOUT_MS = 60_000

# A session's usage budget in provider-reported total tokens: a 60-minute call whose responses
# each re-read a compacted context of about 16k tokens stays well inside it.
DEFAULT_USAGE_BUDGET_TOKENS = 2_000_000
# A budget is a bound, so it has one: ten times the default covers any call the provider lets
# run (60 minutes), and a larger figure is a client bug, not a budget.
MAXIMUM_USAGE_BUDGET_TOKENS = 20_000_000

# Typed text injected into a live call: bounded like a chat message, and limited per minute per
# session so an API client cannot flood the model.
MAXIMUM_TYPED_TEXT_BYTES = 4_000
TYPED_MESSAGES_PER_MINUTE = 12

# A lost sideband is re-opened on the same call at most this many times, after 250 ms × the
# attempt (at most 1 s); then the session fails sideband_reconnect_exhausted.
MAXIMUM_RECONNECT_ATTEMPTS = 2
RECONNECT_BACKOFF_MS = 250
MAXIMUM_RECONNECT_DELAY_MS = 1_000

# Each gateway renews a liveness key this often; one whose key is older than the next limit is
# dead, and a live gateway takes its sessions over (re-opening their sidebands by call id).
GATEWAY_HEARTBEAT_MS = 1_000
GATEWAY_DEAD_AFTER_MS = 3_000

# While Redis is unreachable a gateway keeps, per session, at most this many events (and gateway
# incidents) it could not number or enqueue; what a full session refuses is counted and, once
# Redis answers, numbered where the hole is as one `switchboard.events_dropped` event (and an
# incident). A call nobody answers brings about two durable events per caller line (speech
# started, transcript), so this is a quarter of an hour of a caller talking non-stop; at the ~1 KB
# such an event takes, about 1 MB a session.
MAXIMUM_UNSENT_EVENTS_PER_SESSION = 1_000

# A session's seq counter in Redis (`{ns}:seq:{session}`) expires this long after its last use.
# It must outlive every call: a gateway that never numbered for the session (an API request for a
# call held elsewhere) would start again at 1 and its event would be taken for a duplicate. A call
# lasts at most MAXIMUM_SESSION_SECONDS after it connects (its ceiling timer, 30 s of admission
# before), and may be silent all that time; a day leaves hours for a ceiling timer that fires late.
# A counter is about 100 bytes, so 100,000 calls a day keep about 10 MB.
SEQ_COUNTER_TTL_SECONDS = 86_400

# A gateway's restart marker (`{ns}:gateway-marker:{id}`, renewed every 10 s) expires this long
# after the gateway stopped renewing it. Expiring under a live gateway (Redis unreachable that
# long) costs one needless retransmission of the events it holds, never a lost one.
GATEWAY_MARKER_TTL_SECONDS = 60

# The named blocks a session's instructions may be made of (PUT /v1/sessions/{id}/prompt/{name}).
MAXIMUM_PROMPT_BLOCKS = 32

# The longest a caller may be held waiting for a person (POST /v1/sessions/{id}/attention).
MAXIMUM_ATTENTION_WAIT_S = 3_600

# A tool declared to run inline (a quick body) runs on the worker that decided its call, whose
# thread waits for it: past this it is answered as timed out, like any tool past its limit.
INLINE_TOOL_MS = 1_000
# An inline run is backed by a run_tool message this much later, which finds the step finished
# and does nothing — unless the worker died with the body running: then tool_runs runs it.
INLINE_TOOL_BACKUP_MS = INLINE_TOOL_MS + 4_000

# A usage budget (tokens on Realtime, active seconds on Live) is noticed once at this share.
BUDGET_WARNING_PERCENT = 80

# What the model is told then.
BUDGET_NOTICE = (
    "Notice from the host, not from the person: this call has used most of its usage budget "
    "and will be ended when the budget runs out. Bring what you are doing to a close, tell the "
    "person the call is near its limit, and suggest they call back or continue in writing for "
    "anything long."
)


def bounded(text: str) -> str:
    """Text cut to the durable bound on a UTF-8 character boundary."""
    encoded = text.encode()
    if len(encoded) <= MAXIMUM_DURABLE_TEXT_BYTES:
        return text
    return encoded[:MAXIMUM_DURABLE_TEXT_BYTES].decode(errors="ignore")
