"""The privacy boundary: what a caller says is masked before Switchboard keeps any of it.

The gateway is where a provider frame first becomes Switchboard's: it numbers the frame into the
session's log (Redis, then PostgreSQL), hands it to the workers, and shows its words to the
people watching the call. `PrivateSideband` wraps a wing's sans-I/O `Sideband` there, so every
action the wing answers is redacted before it is carried out:

- `Submit`: the durable event, every string in it redacted (`Redactor.event`), so no queue, log,
  record, export or webhook downstream ever holds the clear value;
- `Delta`: the watchers' words, through a `DeltaGate` per line (a card number said digit by
  digit is held back until it is a card, and then masked);
- `Final`: the finished line, redacted whole (of a wing that writes a speaker's words down in
  pieces, the line so far: its watchers' gate goes on, since the next piece may go on the line);
- `Incident`: the summary and the quoted start of a bad frame, redacted (a quote cut in the
  middle of a value masks what it cut).

A wing that writes a speaker's words down in pieces while they speak (Live, `WritesDownInPieces`)
is told where a piece may end (`stream.open_tail`): never where its end could be the start of a
value said on, so that a card number said over a write-down is in one piece, redacted whole,
instead of two halves each too short to be a card.

Key presses are the one input no detector reads: a card keyed in arrives one digit an event.
A digit pressed is kept only when the call maps that key to an action (a menu's choice) and it
was pressed on its own (no digit in the `KEYPAD_RUN_S` before it); every other digit is logged
as "•", so a number keyed in leaves at most its first digit, which PCI DSS allows to be shown.

During a keypad collection (`collect`, from the workers' `collect_digits` directive) no press
leaves at all: they are kept here, in memory, until the end key or the entry's last digit, and
leave as one event, `switchboard.digits_collected`, with their count and the digits sealed for
the tool (`pipeline.keypad.capture` says what follows). A boundary that is closed or replaced meanwhile
takes the presses with it.

A tool's sensitive parameters (a payment tool's `card_number`) are not masked but sealed with
the session's public key (`pipeline.privacy.sealing`): the runner opens them in memory, and
nothing durable holds them readable. Without the session's key they are masked whole.

What the model heard is the provider's; what Switchboard keeps is masked. Pure: no I/O, no
clock (sealing draws its ephemeral keys and nonces from the OS).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pipeline.call.keypad import DIGITS_COLLECTED
from pipeline.call.sideband import (
    Action,
    Delta,
    Final,
    Incident,
    Sideband,
    Submit,
    Waited,
    WritesDownInPieces,
)
from pipeline.privacy.detect import (
    MASK,
    barriers,
    could_hold_any,
    could_hold_value,
    fail_closed,
    find,
    is_over_long,
    redact,
    segments,
)
from pipeline.privacy.policy import Kind, PrivacyPolicy
from pipeline.privacy.sealing import seal
from pipeline.privacy.stream import DeltaGate, open_tail

# Keys whose values are the protocol's own (types, ids, names of functions, enumerations), never
# what anybody said: left as they are, so an event keeps its shape and the workers' reading of it.
STRUCTURAL_KEYS = frozenset(
    {
        "type",
        "object",
        "id",
        "name",
        "role",
        "status",
        "code",
        "param",
        "model",
        "voice",
        "format",
        "metadata",
        "playback",
        "modalities",
        "output_modalities",
        "tool_choice",
        "speaker",
    }
)

# Texts redacted lately, remembered with their redaction: a session's instructions come back in
# every `session.updated`, and a response's transcript in its `.done`, its item's `.done` and
# the `response.done`.
REMEMBERED_TEXTS = 16
# ... when they are this long: looking a shorter one up costs about what reading it does.
REMEMBERED_FROM_CHARS = 64

# Lines of the transcript being gated for the watchers at once; beyond this the oldest is
# dropped (its held words are never shown, its final line still is).
OPEN_LINES = 64

Json = Any

KEYPAD_DIGITS = frozenset("0123456789")
# Digits pressed closer together than this are a number keyed in, not a choice from a menu
# (a caller keying a card in groups pauses between them for a second or two).
KEYPAD_RUN_S = 5.0


@dataclass(frozen=True, slots=True)
class Sealing:
    """What is sealed instead of masked: each tool's sensitive parameters, with the session's
    public key (None: the session has none, and they are masked whole)."""

    session_id: str
    public_key: bytes | None
    parameters: dict[str, frozenset[str]]


@dataclass(slots=True)
class Collection:
    """The presses kept for one keypad collection, in memory only."""

    number: int
    max: int
    end: str | None
    digits: list[str]


@dataclass(frozen=True, slots=True)
class Keypad:
    """How a wing reports a key press (the event's type; the key is its `event`), and the keys
    the call maps to an action."""

    press_type: str
    meaningful: frozenset[str] = frozenset()


def _is_structural(key: str) -> bool:
    return key in STRUCTURAL_KEYS or key.endswith(("_id", "_ids"))


class Redactor:
    """One session's redaction: the kinds its policy names, for texts, events and quotes."""

    def __init__(self, kinds: Iterable[Kind], *, region: str = "US", sealing: Sealing | None = None) -> None:
        self.kinds = frozenset(kinds)
        self.region = region
        self.sealing = sealing
        self._recent: OrderedDict[str, str] = OrderedDict()

    @classmethod
    def of(cls, policy: PrivacyPolicy) -> Redactor:
        return cls(policy.kinds)

    def text(self, value: str) -> str:
        """`value` with every value of the session's kinds masked (`detect.redact`)."""
        if len(value) < REMEMBERED_FROM_CHARS:
            # Most of what is said has too little a value is made of, and is passed over at once.
            return (
                redact(value, self.kinds, region=self.region) if could_hold_any(value, self.kinds) else value
            )
        remembered = self._recent.get(value)
        if remembered is not None:
            self._recent.move_to_end(value)
            return remembered
        redacted = (
            redact(value, self.kinds, region=self.region) if could_hold_any(value, self.kinds) else value
        )
        self._recent[value] = redacted
        if len(self._recent) > REMEMBERED_TEXTS:
            self._recent.popitem(last=False)
        return redacted

    def quote(self, head: str, *, cut: bool) -> str:
        """A text cut short (an incident's quote of a frame, what a cancelled response had said
        so far), redacted. When it was `cut`, its last stretch after a barrier may be the start
        of a value whose end was cut off ("card 4532 0151"): if that stretch holds anything a
        value is made of, its letters and digits are masked."""
        if not cut:
            return self.text(head)
        ends = [barrier.end() for barrier in barriers(head)]
        start = ends[-1] if ends else 0
        tail = head[start:]
        if not could_hold_value(tail):
            return self.text(head)
        return self.text(head[:start]) + fail_closed(tail)

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """The event with every string a person may have said redacted; the same object when
        nothing changed (most events), else a copy of what changed only."""
        redacted = self._value(event, None)
        assert isinstance(redacted, dict)
        return redacted

    def _value(self, value: Json, key: str | None, cut: bool = False) -> Json:
        if isinstance(value, str):
            if cut:
                return self.quote(value, cut=True)
            if key == "arguments":
                return self._arguments(value)
            return self.text(value)
        if isinstance(value, dict):
            # An item a cancelled response left "incomplete" was cut off where it stood: its
            # text ("card 4532 0151 ") may end in the start of a value nobody finished saying.
            cut = cut or value.get("status") == "incomplete"
            changed: dict[str, Any] | None = None
            for name, item in value.items():
                if _is_structural(name):
                    continue
                if name == "fragments":
                    new = self._fragments(item)
                elif name == "arguments" and isinstance(item, str):
                    new = self._arguments(item, self._sensitive_of(value.get("name")), cut)
                else:
                    new = self._value(item, name, cut)
                if new is not item:
                    if changed is None:
                        changed = dict(value)
                    changed[name] = new
            return value if changed is None else changed
        if isinstance(value, list):
            items = [self._value(item, key, cut) for item in value]
            return value if all(new is old for new, old in zip(items, value, strict=True)) else items
        return value

    def _sensitive_of(self, tool: object) -> frozenset[str]:
        if self.sealing is None or not isinstance(tool, str):
            return frozenset()
        return self.sealing.parameters.get(tool, frozenset())

    def _arguments(self, arguments: str, sensitive: frozenset[str] = frozenset(), cut: bool = False) -> str:
        """A function call's arguments (a JSON text): each value redacted as a value, so the
        arguments stay JSON a tool can read, and the tool's sensitive parameters sealed. A text
        that is no JSON was cut off, and is redacted as a quote cut short (a sensitive value in
        it masked whole)."""
        if cut:
            # A cancelled call's arguments were cut off: nothing runs with them.
            return fail_closed(arguments) if sensitive else self.quote(arguments, cut=True)
        if not sensitive and not could_hold_value(arguments):
            return arguments
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return fail_closed(arguments) if sensitive else self.quote(arguments, cut=True)
        if sensitive and isinstance(parsed, dict):
            sealed = {
                name: self._sealed(item) if name in sensitive else self._json_values(item)
                for name, item in parsed.items()
            }
            return json.dumps(sealed, ensure_ascii=False)
        redacted = self._json_values(parsed)
        return arguments if redacted is parsed else json.dumps(redacted, ensure_ascii=False)

    def _sealed(self, value: Json) -> Json:
        """A sensitive value sealed for the session's tool runner (masked whole when the session
        has no key, or it is no text: a tool's schema then refuses it)."""
        assert self.sealing is not None
        if isinstance(value, str) and self.sealing.public_key is not None:
            return seal(value, public_key=self.sealing.public_key, session_id=self.sealing.session_id)
        return fail_closed(value if isinstance(value, str) else json.dumps(value))

    def _json_values(self, value: Json) -> Json:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bool) or value is None or isinstance(value, float):
            return value
        if isinstance(value, int):
            # A card number given as a JSON number is a card number all the same.
            written = str(value)
            masked = self.text(written)
            return value if masked == written else masked
        if isinstance(value, dict):
            items = {name: self._json_values(item) for name, item in value.items()}
            return value if all(items[name] is value[name] for name in value) else items
        if isinstance(value, list):
            listed = [self._json_values(item) for item in value]
            return value if all(new is old for new, old in zip(listed, value, strict=True)) else listed
        return value

    def _fragments(self, fragments: Json) -> Json:
        """A transcript's fragments (one delta each, `text` the words), redacted together: a
        value said over several deltas is found in their joined words. A fragment is changed
        only where a value covers it: the mask is put in the fragment the value starts in, and
        the value's characters are taken out of every fragment it covers."""
        if not isinstance(fragments, list) or not all(
            isinstance(piece, dict) and isinstance(piece.get("text"), str) for piece in fragments
        ):
            return self._value(fragments, "fragments")
        texts = [piece["text"] for piece in fragments]
        joined, starts = _joined(fragments)
        if not could_hold_value(joined):
            return fragments
        covers = self._covers(joined)
        if not covers:
            return fragments
        result: list[Any] = []
        for piece, text, start in zip(fragments, texts, starts, strict=True):
            new = _masked_piece(text, start, covers)
            result.append(piece if new == text else {**piece, "text": new})
        return result

    def _covers(self, text: str) -> list[tuple[int, int, str, bool]]:
        """What redaction replaces in `text`: (start, end, replacement, character by character)."""
        covers: list[tuple[int, int, str, bool]] = []
        for start, end in segments(text):
            if is_over_long(text[start:end]):
                covers.append((start, end, fail_closed(text[start:end]), True))
        for finding in find(text, self.kinds, region=self.region):
            covers.append((finding.start, finding.end, finding.masked, False))
        return sorted(covers)


def _joined(fragments: list[dict[str, Any]]) -> tuple[str, list[int]]:
    """The fragments' words as one text for detection, and where each fragment starts in it.
    Two fragments that meet with no space between get one (a pause is no part of a value's
    digits either way, and digits run together would read as one longer number) — unless their
    timeline says they touch: that is a word split in two ("fo", "ur"), read whole, as the
    transcript's own text reads it."""
    joined = ""
    starts: list[int] = []
    previous: dict[str, Any] | None = None
    for fragment in fragments:
        text = fragment["text"]
        meets = joined and text and not joined[-1].isspace() and not text[0].isspace()
        if meets and not (previous is not None and _touches(previous, fragment)):
            joined += " "
        starts.append(len(joined))
        joined += text
        previous = fragment
    return joined, starts


def _touches(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether `after` begins on the timeline where `before` ends, or earlier (no pause between)."""
    end, start = before.get("end_ms"), after.get("start_ms")
    return isinstance(end, int) and isinstance(start, int) and start <= end


def _masked_piece(text: str, start: int, covers: list[tuple[int, int, str, bool]]) -> str:
    end = start + len(text)
    out: list[str] = []
    position = start
    for cover_start, cover_end, replacement, by_character in covers:
        if cover_end <= start or cover_start >= end:
            continue
        out.append(text[position - start : max(cover_start, position) - start])
        lo, hi = max(cover_start, start), min(cover_end, end)
        if by_character:
            out.append(replacement[lo - cover_start : hi - cover_start])
        elif cover_start >= start:
            out.append(replacement)
        position = hi
    out.append(text[position - start :])
    return "".join(out)


class PrivateSideband:
    """A wing's `Sideband` with every action it answers redacted (see the module docstring).

    `is_watched` says whether anybody watches the call now: a line that begins unwatched is not
    gated (nobody would see its words), and its final line is shown whole when it ends."""

    def __init__(
        self,
        inner: Sideband,
        redactor: Redactor,
        is_watched: Callable[[], bool],
        keypad: Keypad | None = None,
    ) -> None:
        self.inner = inner
        self.keypad = keypad
        self._last_digit_at: float | None = None
        self._collection: Collection | None = None
        self.redactor = redactor
        self.tick_every_s = inner.tick_every_s
        self.closed_by_provider_within_s = inner.closed_by_provider_within_s
        self._is_watched = is_watched
        self._lines: OrderedDict[str, DeltaGate] = OrderedDict()
        self._unwatched: OrderedDict[str, None] = OrderedDict()
        # A wing that writes words down in pieces ends none where a value may be going on, and
        # its finals are lines so far: their gates stay open for the next piece's words.
        self._lines_go_on = isinstance(inner, WritesDownInPieces)
        if isinstance(inner, WritesDownInPieces):
            inner.keep_open_tails(open_tail)

    def receive(self, frame: str | bytes, received_at: float, now: float) -> list[Action]:
        return self._private(self.inner.receive(frame, received_at, now))

    def tick(self, at: float) -> list[Action]:
        return self._private(self.inner.tick(at))

    def close(self, at: float) -> list[Action]:
        return self._private(self.inner.close(at))

    def playback(self, now: float) -> dict[str, Any] | None:
        return self.inner.playback(now)

    def collect(self, number: int, maximum: int, end: str | None) -> None:
        """Keep the presses of collection `number` from now on (a newer one replaces an older)."""
        if self._collection is not None and self._collection.number >= number:
            return  # the same directive again, or an older one late
        self._collection = Collection(number, max(1, maximum), end, [])

    def stop_collecting(self, number: int) -> None:
        """Forget collection `number` and whatever the caller typed for it."""
        if self._collection is not None and self._collection.number == number:
            self._collection = None

    @property
    def collecting(self) -> int | None:
        return self._collection.number if self._collection is not None else None

    def _private(self, actions: list[Action]) -> list[Action]:
        if not actions:
            return actions
        private: list[Action] = []
        for action in actions:
            if isinstance(action, Submit):
                if self._collection is not None and self._is_press(action.event):
                    private.extend(self._collected(action))
                    continue
                event = self.redactor.event(self._key_press(action.event, action.received_at))
                private.append(action if event is action.event else Submit(event, action.received_at))
            elif isinstance(action, Delta):
                shown = self._delta(action)
                if shown:
                    private.append(Delta(action.role, action.item_id, shown))
            elif isinstance(action, Final):
                if not self._lines_go_on:
                    private.extend(self._line_ended(action))
                private.append(Final(action.role, action.item_id, self.redactor.text(action.text)))
            elif isinstance(action, Waited):
                private.append(action)  # a duration: nothing a person said
            else:
                private.append(self._incident(action))
        return private

    def _line_ended(self, final: Final) -> list[Action]:
        """A finished line's gate flushed: the words it still held, redacted, before the final."""
        gate = self._lines.pop(final.item_id, None)
        self._unwatched.pop(final.item_id, None)
        rest = gate.flush() if gate is not None else ""
        return [Delta(final.role, final.item_id, rest)] if rest else []

    def _is_press(self, event: dict[str, Any]) -> bool:
        return self.keypad is not None and event.get("type") == self.keypad.press_type

    def _collected(self, press: Submit) -> list[Action]:
        """A press during a collection: kept, and nothing leaves until the entry is over."""
        collection = self._collection
        assert collection is not None
        key = press.event.get("event")
        if isinstance(key, str) and key in KEYPAD_DIGITS:
            collection.digits.append(key)
            if len(collection.digits) < collection.max:
                return []
            ended_by = "max"
        elif isinstance(key, str) and key == collection.end:
            ended_by = "end"
        else:
            return []  # another key (* or A-D) means nothing to the entry
        self._collection = None
        digits = "".join(collection.digits)
        sealing = self.redactor.sealing
        sealed = (
            seal(digits, public_key=sealing.public_key, session_id=sealing.session_id)
            if sealing is not None and sealing.public_key is not None
            else None
        )
        event = {
            "type": DIGITS_COLLECTED,
            "number": collection.number,
            "count": len(digits),
            "digits": sealed,
            "ended_by": ended_by,
        }
        return [Submit(event, press.received_at)]

    def _key_press(self, event: dict[str, Any], at: float) -> dict[str, Any]:
        """A digit pressed, masked unless it is a menu's choice pressed on its own."""
        if self.keypad is None or event.get("type") != self.keypad.press_type:
            return event
        key = event.get("event")
        if not isinstance(key, str) or key not in KEYPAD_DIGITS:
            return event  # *, # and A-D are no part of a number
        in_a_run = self._last_digit_at is not None and at - self._last_digit_at < KEYPAD_RUN_S
        self._last_digit_at = at
        if key in self.keypad.meaningful and not in_a_run:
            return event
        return {**event, "event": MASK}

    def _delta(self, delta: Delta) -> str:
        gate = self._lines.get(delta.item_id)
        if gate is None:
            if delta.item_id in self._unwatched:
                return ""
            if not self._is_watched():
                # Nobody sees this line's words: its final line will be shown whole.
                self._remember(self._unwatched, delta.item_id, None)
                return ""
            gate = DeltaGate(self.redactor.kinds, region=self.redactor.region)
            self._remember(self._lines, delta.item_id, gate)
        return gate.push(delta.text)

    @staticmethod
    def _remember(lines: OrderedDict[str, Any], item_id: str, value: Any) -> None:
        lines[item_id] = value
        if len(lines) > OPEN_LINES:
            lines.popitem(last=False)

    def _incident(self, incident: Incident) -> Incident:
        context = dict(incident.context)
        preview = context.pop("frame_preview", None)
        redacted = self.redactor.event(context)
        if isinstance(preview, str):
            size = context.get("bytes")
            cut = not isinstance(size, int) or size > len(preview.encode())
            redacted = {**redacted, "frame_preview": self.redactor.quote(preview, cut=cut)}
        return Incident(incident.code, self.redactor.text(incident.summary), redacted)
