"""Live call scripts: what the simulated caller says on a Live session, and the protocol switches.

A Live model holds the conversation itself (LIVE_PROTOCOL.md §1.1): it answers a caller line
on its own (the next `model` entry, "Okay." when they run out), or, for a line that
`delegate`s, hands the task to the host with `session.delegation.created` at the timeline
point of one of the line's words, speaks an automatic acknowledgement unless the host appends
thinking or commentary first, and then says whatever commentary the host appends. The caller
speaks each line `after_ms` after the model has answered the previous one (a delegating line
is answered by its commentary), or after `timing.answer_wait_ms` when no answer comes; with
`barge_in`, as soon as the model starts speaking instead, which stops the model.

On an outbound call (`simulator.live_dial`) the same script is the callee: its `caller` lines
are what the person who answers says, its `model` lines the model's answers.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from simulator.script import CallerHangsUp, CallerPresses, ModelSays


class _Strict(BaseModel):
    # A misspelt field in a hand-written script must fail loudly, not be ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class LiveTiming(_Strict):
    """How fast a simulated Live call goes, in milliseconds (of wall time and of the timeline)."""

    fragment_ms: int = Field(default=200, ge=1)
    """How long one word takes to say: one transcript fragment (and one reflected audio chunk)."""
    reply_after_ms: int = Field(default=100, ge=0)
    """After the caller's last word, the model starts its own answer to a line that does not delegate."""
    answer_wait_ms: int = Field(default=3000, ge=0)
    """How long the caller waits for an answer (or, barging in, for speech) before going on."""
    first_audio_ms: int = Field(default=0, ge=0, le=60_000)
    """How long the model takes to begin each thing it says (an answer, an acknowledgement, a
    commentary) once it has decided to: time on the timeline before its first words, beyond
    `reply_after_ms`. 0 by default so the tests stay fast; `--first-audio-ms` and the demo set a
    realistic one."""


class LiveSwitches(_Strict):
    """The simulator's protocol switches (LIVE_PROTOCOL.md §5.6), with their defaults."""

    session_started_on_attach: bool = False
    """Send `session.started` when a sideband attaches (the real sideband does not, §2.3)."""
    single_sideband: bool = True
    """Refuse a second sideband while one is attached (409 at the handshake)."""
    reflect_audio: bool = True
    """Reflect the caller's audio (`session.input_audio.append`) and the model's
    (`session.output_audio.delta`) to the sideband."""
    covering_fragment_lag_ms: int = Field(default=50, ge=-5_000, le=5_000)
    """When the fragment covering a delegation's offset arrives: this long after the delegation,
    or, negative, this long before it."""
    automatic_acknowledgement: bool = True
    """Speak an acknowledgement `acknowledgement_delay_ms` after a delegation unless thinking or
    commentary is appended first."""
    echo_client_event_id: bool = True
    """Carry a command's `event_id` as `client_event_id` on its acknowledgement (errors always
    carry it as `error.client_event_id`)."""
    usage_interval_ms: int = Field(default=60_000, ge=1)
    """How often `session.usage.updated` is sent while a sideband is attached."""
    redeliver_caller_deltas_after_ms: int | None = Field(default=None, ge=0, le=60_000)
    """Send each of the caller's transcript deltas a second time, with the same `event_id`,
    this long after the first (a provider that delivers an event twice); None: once."""
    reject_responses_in_client_mode: bool = True
    """Answer `response.create` / `response.item.create` with an error under client delegation
    (else they are ignored)."""
    outbound_waits_for_host: bool = True
    """On an outbound call, the model says nothing (no greeting, no answer, no delegation) until
    the host first appends instructions or commentary; then it answers the last callee line it
    heard and left unanswered, and goes on as usual. (Switchboard's instructions tell the model
    to wait while it decides whether a person or a machine answered: this model obeys.)"""


class LiveCallerSays(_Strict):
    """The caller says `say`, one transcript fragment a word; with `delegate`, the model
    delegates at the word `delegate_at_word` (an index; -1 = the last word)."""

    say: str = Field(min_length=1)
    after_ms: int = Field(default=0, ge=0)
    delegate: bool = False
    delegate_at_word: int = -1
    barge_in: bool = False


LiveCallerStep = LiveCallerSays | CallerHangsUp | CallerPresses


class LiveScript(_Strict):
    """One simulated Live call: the caller's steps, the model's own answers, and the switches."""

    name: str = "live_silent"
    acknowledgement: str = Field(default="Okay, checking now.", min_length=1)
    session_lifetime_s: int = Field(default=3_600, ge=1)
    """The session expires this long after it starts (`session.closed` with `expired`)."""
    timing: LiveTiming = LiveTiming()
    switches: LiveSwitches = LiveSwitches()
    caller: list[LiveCallerStep] = Field(default_factory=list)
    model: list[ModelSays] = Field(default_factory=list)


PACKAGED_SCRIPTS = resources.files("simulator") / "scripts"


def parse_live_script(text: str | bytes) -> LiveScript:
    """A Live call script from its JSON text (raises pydantic.ValidationError when it is not one)."""
    return LiveScript.model_validate_json(text)


def load_live_script(name_or_path: str | Path) -> LiveScript:
    """A Live call script from a file path, or by the name of a packaged one such as "live_lookup"."""
    path = Path(name_or_path)
    if path.is_file():
        return parse_live_script(path.read_bytes())
    packaged = PACKAGED_SCRIPTS / f"{path.stem}.json"
    if packaged.is_file():
        return parse_live_script(packaged.read_bytes())
    raise FileNotFoundError(f"no Live call script at {name_or_path!s} and none packaged by that name")
