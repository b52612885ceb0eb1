"""The names of the tools Switchboard itself offers the model, beside the session's own: a
session's tools may not take them. Which provider offers which, and how, is its wing's."""

from __future__ import annotations

# The model ends the call after its goodbye (a session with `hangup`).
END_CALL = "end_call"
# The model hands a phone call on to one of its route's targets.
TRANSFER_CALL = "transfer_call"
