"""Every limit Switchboard enforces, with its unit and the reason it exists."""

# A session that has not connected its sideband by then is failed, so a caller who never
# completes the WebRTC/SIP leg does not hold a provider call open.
ADMISSION_TIMEOUT_MS = 30_000

# The provider ends a realtime session at 60 minutes; Switchboard ends it first, cleanly.
MAXIMUM_SESSION_SECONDS = 3_600

# Live transcripts are a UI projection; one item's accumulated text stops growing past this.
MAXIMUM_LIVE_TRANSCRIPT_BYTES = 16_000

# A provider frame larger than this is refused as an incident instead of being logged whole.
MAXIMUM_PROVIDER_FRAME_BYTES = 1_048_576

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

# How long an API call waits for a worker's answer before the gateway says 503.
API_REPLY_TIMEOUT_MS = 10_000

# A tool body that outlives this is cancelled and answered as timed out.
MAXIMUM_TOOL_MS = 30_000

# A running tool whose outcome has not come back this long after its own limit is answered as
# interrupted: its message was lost (a dead worker past recovery, a dead-lettered run).
TOOL_DEADLINE_GRACE_MS = 15_000

# Reconnect attempts for a lost sideband before the session fails (used by the lifecycle work).
MAXIMUM_RECONNECT_ATTEMPTS = 2
