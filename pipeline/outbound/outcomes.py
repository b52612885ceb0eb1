"""How a contact's call ended, and what a failed call setup's code means.

An attempt ends in one of six outcomes; two more name a contact that was never dialled:

| outcome     | meaning                                                       | retried?         |
|-------------|---------------------------------------------------------------|------------------|
| `completed` | a person answered (or nobody could tell), and the call ran    | never            |
| `voicemail` | a machine answered                                            | by the policy    |
| `no_answer` | it rang out, or the far end was unreachable for now           | by the policy    |
| `busy`      | the far end said busy                                         | by the policy    |
| `failed`    | the call could not be set up (rejected, bad number, error)    | by the policy    |
| `cancelled` | the campaign or an operator stopped it                        | never            |
| `suppressed`| never dialled: the number is on the suppression list          | never            |
| `expired`   | never dialled: the campaign expired first                     | never            |

The Live API reports a failed outbound SIP setup as `transport.failed` with `error.code`. The
codes are not published, so `failure_outcome` maps what they can reasonably be: a word, or a
SIP status (RFC 3261 §21) written bare or as `sip_486` / `sip 486` / `SIP-486`. Case, spaces
and dashes do not matter:

| codes                                                                            | outcome     |
|----------------------------------------------------------------------------------|-------------|
| `busy`, `user_busy`, `busy_here`, `busy_everywhere`, SIP 486, 600                | `busy`      |
| `no_answer`, `not_answered`, `unanswered`, `no_response`, `timeout`,             | `no_answer` |
| `ringing_timeout`, `ring_timeout`, `request_timeout`, `temporarily_unavailable`, |             |
| `unavailable`, SIP 408, 480, 487 (the INVITE cancelled: ours, when it rang out)  |             |
| `rejected`, `declined`, `forbidden`, `not_found`, `invalid_number`, SIP 603, and |             |
| every other code, known or not                                                   | `failed`    |

An unknown code is `failed` and kept as it came (bounded), so it can be read later and the
table grown.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal


class Outcome(StrEnum):
    """How a contact's attempt ended (the first six), or why it was never dialled (the last two)."""

    COMPLETED = "completed"
    VOICEMAIL = "voicemail"
    NO_ANSWER = "no_answer"
    BUSY = "busy"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SUPPRESSED = "suppressed"
    EXPIRED = "expired"


# The outcomes an attempt can end in.
ATTEMPT_OUTCOMES = frozenset(
    {
        Outcome.COMPLETED,
        Outcome.VOICEMAIL,
        Outcome.NO_ANSWER,
        Outcome.BUSY,
        Outcome.FAILED,
        Outcome.CANCELLED,
    }
)
# The outcomes of a contact never dialled.
NEVER_DIALLED = frozenset({Outcome.SUPPRESSED, Outcome.EXPIRED})
# A retry policy says how often these are dialled again.
RETRYABLE = frozenset({Outcome.VOICEMAIL, Outcome.NO_ANSWER, Outcome.BUSY, Outcome.FAILED})
# Always a contact's last word: a call that ran is done, a stop is a stop, and a contact never
# dialled for a reason will not be dialled for it later either.
ALWAYS_FINAL = frozenset({Outcome.COMPLETED, Outcome.CANCELLED, *NEVER_DIALLED})

# A failure code is kept as it came for reading later, up to this many characters (the
# incidents table's code column holds 128; a provider's code is a short word).
MAXIMUM_FAILURE_CODE_CHARS = 128

_BUSY_WORDS = frozenset({"busy", "user_busy", "busy_here", "busy_everywhere"})
_NO_ANSWER_WORDS = frozenset(
    {
        "no_answer",
        "not_answered",
        "unanswered",
        "no_response",
        "timeout",
        "ringing_timeout",
        "ring_timeout",
        "request_timeout",
        "temporarily_unavailable",
        "unavailable",
    }
)
# 486 Busy Here, 600 Busy Everywhere.
_BUSY_STATUSES = frozenset({486, 600})
# 408 Request Timeout and 480 Temporarily Unavailable: nobody picked up, or the phone is off or
# out of reach for now. 487 Request Terminated: the INVITE was cancelled; an outbound leg is
# cancelled by its own ringing timeout, so it rang out.
_NO_ANSWER_STATUSES = frozenset({408, 480, 487})
_SIP_STATUS = re.compile(r"(?:sip_?)?([1-6][0-9]{2})")


def _normalised(code: str) -> str:
    return re.sub(r"[\s\-]+", "_", code.strip().casefold())


def failure_outcome(code: str) -> tuple[Outcome, str]:
    """The outcome of a `transport.failed` with this `error.code`, and the code as it came
    (bounded to `MAXIMUM_FAILURE_CODE_CHARS`). See the module docstring for the table."""
    kept = code[:MAXIMUM_FAILURE_CODE_CHARS]
    word = _normalised(code)
    status = _SIP_STATUS.fullmatch(word)
    if word in _BUSY_WORDS or (status is not None and int(status[1]) in _BUSY_STATUSES):
        return Outcome.BUSY, kept
    if word in _NO_ANSWER_WORDS or (status is not None and int(status[1]) in _NO_ANSWER_STATUSES):
        return Outcome.NO_ANSWER, kept
    return Outcome.FAILED, kept


AnsweredBy = Literal["human", "machine", "unknown"]


def answered_outcome(answered_by: AnsweredBy) -> Outcome:
    """The outcome of an answered call by who answered it: a machine's is `voicemail`; a
    person's, or one nobody could tell, is `completed` (the agent took the call)."""
    return Outcome.VOICEMAIL if answered_by == "machine" else Outcome.COMPLETED
