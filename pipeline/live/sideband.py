"""The Live sideband's rules, sans I/O: a frame in, the actions it calls for out
(LIVE_PROTOCOL.md §2, §5.2).

A Live frame is classified by `pipeline.live.frames.classify_live_frame`; a bad one is an incident.
Durable events are submitted as on Realtime. Transcript deltas go to the watchers at once and
are buffered here, then written down as durable `switchboard.live_transcript` events
(`pipeline.live.frames.buffer_fragment`), because Live sends no final transcript: the words exist
nowhere else. The buffer is flushed, besides its own rules, just before a delegation is
submitted (so the words before its offset are logged before it), as soon as the caller's
fragment covering a delegation's offset arrives (so its settle window rarely runs out), before
`session.closed` and when the sideband closes, and after `FLUSH_AFTER_MS` of wall time (checked
on every frame and on every `tick`, every `FLUSH_CHECK_S`).

A write-down by time (or at a piece's bound) lands wherever the speaker is, mid-value too. So
once the privacy boundary has said where a text's end could be the start of a value said on
(`keep_open_tails`), such a write-down of a speaker still speaking ends before it, and the rest
waits for the next piece (`pipeline.live.frames.keep_open_tail`): a card number said over the
moment is written down whole in one piece, and redacted whole.

The caller's wait for an answer (`Waited`, for the metric) is read off the call's timeline: from
the end of the caller's last words to the start of the agent's first words after them — the same
two moments the call log reads from the written-down pieces (`pipeline.records.call_log`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipeline.call.errors import BadInput
from pipeline.call.heard import waited_ms
from pipeline.call.sideband import Action, Delta, Final, OpenTail, Role, Submit, Waited, bad_frame
from pipeline.live.capabilities import LIVE
from pipeline.live.frames import (
    SPEAKER_OF_TYPE,
    TranscriptBuffer,
    buffer_fragment,
    classify_live_frame,
    flush_transcript,
    goes_on,
    is_flush_due,
    is_speaking,
    keep_open_tail,
    line_of,
)
from pipeline.session.state import SpokenLine
from pipeline.session.timeline import Speaker, TranscriptFragment
from pipeline.session.wire import FrameKind

# Whose words a speaker's follow: the one a turn passes from.
OTHER_SPEAKER = {Speaker.CALLER: Speaker.AGENT, Speaker.AGENT: Speaker.CALLER}

# How often a Live sideband's buffered words are checked for being due without a frame to
# check them on (a quiet line, with reflected audio off).
# A keypad press on a phone call (the privacy boundary masks its digits).
KEY_PRESS_TYPE = "transport.dtmf.received"
FLUSH_CHECK_S = 0.25
# A Live call ended by Switchboard sends `session.close`; the provider answers `session.closed`
# (with the final usage) and closes the sideband itself. It is closed from here after this.
LIVE_CLOSE_WAIT_S = 3.0

_ROLE: dict[Speaker, Role] = {Speaker.CALLER: "user", Speaker.AGENT: "assistant"}
# Before these the buffered words are written down: the words before a delegation are logged
# before it, the call's last words before its end.
_FLUSHED_BEFORE = frozenset({"session.delegation.created", "session.closed"})


class LiveSideband:
    """One Live sideband's protocol state: the words heard but not yet written down, and the
    delegation offsets whose covering words have not arrived (see the module's docstring)."""

    tick_every_s: float | None = FLUSH_CHECK_S
    closed_by_provider_within_s: float | None = LIVE_CLOSE_WAIT_S

    def __init__(self) -> None:
        # Each speaker's words not yet written down. When one speaker follows the other, the
        # words before are written down at once; when they talk over each other (a backchannel,
        # a barge-in), each speaker's words go on gathering on their own, so that the record
        # keeps what each said whole instead of alternating scraps of both.
        self.buffers = {Speaker.CALLER: TranscriptBuffer(), Speaker.AGENT: TranscriptBuffer()}
        # How far the caller's words have come on the timeline, as this socket saw them.
        self.heard_until_ms = 0
        self.awaiting: list[int] = []
        # Where the caller's words ended on the timeline, while the agent has said nothing since.
        self.caller_ended_ms: int | None = None
        # Each speaker's latest line as the workers store it (`line_of`, applied to the pieces in
        # the order they are written down) and its words so far: the watchers see the lines the
        # record keeps, under the same ids.
        self.lines: dict[Speaker, SpokenLine | None] = {Speaker.CALLER: None, Speaker.AGENT: None}
        self.line_texts = {Speaker.CALLER: "", Speaker.AGENT: ""}
        # Where a piece written down mid-speech must end (the privacy boundary's rule); None:
        # anywhere.
        self.open_tail: OpenTail | None = None

    def keep_open_tails(self, open_tail: OpenTail) -> None:
        self.open_tail = open_tail

    def receive(self, frame: str | bytes, received_at: float, now: float) -> list[Action]:
        try:
            classified = classify_live_frame(frame)
        except BadInput as error:
            return [bad_frame(frame, error.code, str(error))]
        if classified.is_transcript:
            return self._heard(classified.event, received_at)
        if classified.kind in (FrameKind.STREAMED, FrameKind.IGNORED):
            # Reflected audio arrives all through a call: the clock the buffer is flushed by.
            return self.tick(received_at)
        event = classified.event
        actions = self._flush(received_at) if classified.type in _FLUSHED_BEFORE else []
        if classified.type == "session.delegation.created":
            offset = int(event["offset_ms"])
            if self.heard_until_ms <= offset:
                self.awaiting.append(offset)
        actions.append(Submit(event, received_at))
        return actions

    def tick(self, at: float) -> list[Action]:
        due = [speaker for speaker, buffer in self.buffers.items() if is_flush_due(buffer, now=at)]
        return self._flush(at, due, by_time=True) if due else []

    def close(self, at: float) -> list[Action]:
        return self._flush(at)

    def playback(self, now: float) -> dict[str, Any] | None:
        # Live says nothing of what plays, and the host never cuts its speech.
        return None

    def _heard(self, event: dict[str, Any], received_at: float) -> list[Action]:
        # `classify_live_frame` checked the delta's shape: it is read here, not checked again.
        fragment = TranscriptFragment(
            speaker=SPEAKER_OF_TYPE[event["type"]],
            event_id=event["event_id"],
            start_ms=event["start_ms"],
            end_ms=event["end_ms"],
            text=event["delta"],
        )
        own = self.buffers[fragment.speaker]
        if own.holds(fragment.event_id):
            # Delivered again: its words are buffered or written down already, and watchers
            # have them.
            return []
        other = OTHER_SPEAKER[fragment.speaker]
        followed: tuple[dict[str, Any], ...] = ()
        if self.buffers[other].fragments and fragment.start_ms > self.buffers[other].end_ms:
            # A turn: the other speaker's words are over before these begin. Deltas come in
            # windows of one grid (200 ms): while both speak, one speaker's window can start
            # where the other's last one ended before the other's next one has arrived, so
            # words that begin exactly at the other's end are an overlap, not a turn.
            closed = flush_transcript(self.buffers[other])
            self.buffers[other], followed = closed.buffer, closed.written
        coalesced = buffer_fragment(own, fragment, now=received_at, open_tail=self.open_tail)
        self.buffers[fragment.speaker] = coalesced.buffer
        written = self._written((*followed, *coalesced.written), received_at)
        # The line these words are shown on: the one their piece went on if it was written down
        # just now, else the one it would go on if written down now.
        buffered, line = coalesced.buffer, self.lines[fragment.speaker]
        if buffered.fragments and not (
            line is not None and goes_on(line, self.lines[other], buffered.start_ms, buffered.end_ms)
        ):
            item_id = buffered.fragments[0].event_id
        else:
            assert line is not None, "a fragment neither buffered nor written down"
            item_id = line.item_id
        actions: list[Action] = [Delta(_ROLE[fragment.speaker], item_id, fragment.text), *written]
        actions.extend(self._waited(fragment))
        if fragment.speaker is Speaker.CALLER:
            self.heard_until_ms = max(self.heard_until_ms, fragment.end_ms)
            if any(fragment.end_ms > offset for offset in self.awaiting):
                # The words a waiting delegation's task needs: written down now, not in a second.
                self.awaiting = [offset for offset in self.awaiting if fragment.end_ms <= offset]
                actions.extend(self._flush(received_at))
                return actions
        actions.extend(self.tick(received_at))
        return actions

    def _waited(self, fragment: TranscriptFragment) -> list[Action]:
        """The agent's first words after the caller's: how long the caller waited for them."""
        if fragment.speaker is Speaker.CALLER:
            self.caller_ended_ms = max(self.caller_ended_ms or 0, fragment.end_ms)
            return []
        ended, self.caller_ended_ms = self.caller_ended_ms, None
        wait_ms = waited_ms(ended, fragment.start_ms, per_second=1000) if ended is not None else None
        return [Waited(LIVE.name, wait_ms)] if wait_ms is not None else []

    def _flush(
        self, at: float, speakers: Iterable[Speaker] = tuple(Speaker), by_time: bool = False
    ) -> list[Action]:
        """Write down what these speakers' buffers hold, the words that began first first; `by_time`,
        a speaker still speaking keeps back the open tail of their words."""
        held = sorted(
            (speaker for speaker in speakers if self.buffers[speaker].fragments),
            key=lambda speaker: self.buffers[speaker].start_ms,
        )
        written: list[dict[str, Any]] = []
        for speaker in held:
            buffer = self.buffers[speaker]
            if by_time and self.open_tail is not None and is_speaking(buffer, now=at):
                flushed = keep_open_tail(buffer, self.open_tail, now=at)
            else:
                flushed = flush_transcript(buffer)
            self.buffers[speaker] = flushed.buffer
            written.extend(flushed.written)
        return self._written(tuple(written), at)

    def _written(self, written: tuple[dict[str, Any], ...], received_at: float) -> list[Action]:
        """Each durable transcript event submitted, then shown to the watchers as its line so
        far, under the line's id."""
        actions: list[Action] = []
        for event in written:
            speaker = Speaker(event["speaker"])
            item_id = event["fragments"][0]["event_id"]
            own, other = self.lines[speaker], self.lines[OTHER_SPEAKER[speaker]]
            line, going_on = line_of(own, other, item_id, event["start_ms"], event["end_ms"])
            text = self.line_texts[speaker] + event["text"] if going_on else event["text"]
            self.lines[speaker], self.line_texts[speaker] = line, text
            actions.append(Submit(event, received_at))
            actions.append(Final(_ROLE[speaker], line.item_id, text))
        return actions
