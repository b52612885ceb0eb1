"""`switchboard call`: place one call through a running gateway and watch it.

It creates a session, connects it with an SDP offer of its own (the simulator answers any
offer; `--sdp FILE` sends a real one), prints the live transcript as it is spoken and returns
when the call ends: by the caller hanging up, by `switchboard sessions end`, or by Ctrl-C here,
which ends the call through the API and waits for it to close.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from pipeline.session.ending import APP_ENDED
from switchboard.client import DEMO_SDP_OFFER, TERMINAL, ApiError, Client

# How long the end of a call may take to reach this terminal after Ctrl-C asked for it: the
# end route answers within 10 s, and the close follows the worker's apply.
CLOSE_WAIT_S = 30.0
WATCH_SLICE_S = 0.5
ROLES = {"user": "caller", "assistant": "agent"}


def place_call(
    client: Client,
    instructions: str,
    *,
    sdp: str = DEMO_SDP_OFFER,
    say: Any = print,
) -> int:
    """Create, connect and follow one call until it ends; 0 when it ended, 1 when it failed.
    `ApiError` and `OSError` (no gateway) reach the caller, which reports them."""
    _interrupt_on_stop()
    session = client.create_session(instructions)
    session_id = session["id"]
    say(f"session {session_id} created")
    closed = threading.Event()

    def show(message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "transcript.final":
            say(f"  {ROLES.get(message['role'], message['role']):>6} ▸ {message['text']}")
        elif kind == "session.closed":
            say(f"closed: {message['reason']}")
            closed.set()

    # Listening before connecting, so the call's first words are not missed.
    follower = client.follow_live(session_id, show)
    # From here on, Ctrl-C ends the session rather than leave it behind.
    try:
        try:
            answer = client.connect(session_id, sdp)
        except ApiError:
            # Not left waiting for its admission timeout: the session is over now.
            _end(client, session_id)
            raise
        say(
            f"connected: provider call {answer['call_id']}; the call ends when the caller hangs up,"
            f" with Ctrl-C here, or with `switchboard sessions end {session_id}`"
        )
        # In slices, so Ctrl-C is taken at once.
        while not closed.wait(WATCH_SLICE_S):
            # The live stream dropped (its gateway restarted): the record tells when it is over.
            if not follower.is_alive() and client.session(session_id)["status"] in TERMINAL:
                break
    except KeyboardInterrupt:
        say("ending the call …")
        _end(client, session_id)
        closed.wait(CLOSE_WAIT_S if follower.is_alive() else 0)
    record = client.wait_for_status(session_id, timeout_s=CLOSE_WAIT_S)
    say(f"session {session_id} {record['status']} ({record['end_reason']})")
    return 0 if record["status"] == "ended" else 1


def _interrupt_on_stop() -> None:
    """Ctrl-C and SIGTERM both end the call. Set here, not inherited: a process may start with
    SIGINT ignored (a shell without job control does that to a background command) or blocked
    (the mask of the thread that started it), and a process manager stops it with SIGTERM;
    either way the call would be left up."""
    if threading.current_thread() is not threading.main_thread():
        return
    stops = (signal.SIGINT, signal.SIGTERM)
    for signum in stops:
        signal.signal(signum, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)


def _end(client: Client, session_id: str) -> None:
    """End the call; one that ended meanwhile (409) is as good."""
    try:
        client.end(session_id, APP_ENDED)
    except ApiError as error:
        if error.status != 409:
            raise
