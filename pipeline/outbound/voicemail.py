"""Telling a person from an answering machine by the first seconds of what the callee says.

On an outbound call the callee's speech is written down in pieces (`Heard`: the text, and where
it starts and ends on the call's timeline, in ms): a piece about every second while they speak,
and one at every pause of a second or more. Words come about five a second.

Two ways to tell, looked for in this order:

- **Words only a machine says**: "leave a message", "after the tone", "voicemail", "not
  available", "you've reached" … in English, Spanish, French and German (`PHRASES`). Case,
  accents, apostrophes and punctuation do not matter; a phrase matches whole words, anywhere in
  what was heard (across pieces), and a few may have words between them ("leave *me a quick*
  message").
- **The shape of the speech**: a person who picks up says a few words ("Hello?", "Yes, who is
  this?", "Dana speaking.") and stops, waiting for the caller; a greeting runs on. So
  `MACHINE_WORDS` words heard, or `RUN_ON_MS` of speech without a pause, is a machine.

`listen(heard)` is asked after each piece: a verdict as soon as either says machine, else None
(wait). `settle(heard)` is asked when no piece has come for `SETTLE_SILENCE_MS`, or at
`DECISION_DEADLINE_MS` after the answer (`settle_due_ms` says when): the same rules, and
otherwise a person, since they said a few words and stopped. Nothing heard at all is
`unknown`: a person waiting for the caller to speak first, or a machine that only beeps, and
nobody can tell which.

Silence is counted from when the last piece *arrived*, on the worker's clock, not from the
`end_ms` it carries: while someone speaks a piece arrives about every second, even across a
breath, so only a real pause leaves more than a second without one. Counted from `end_ms`, a
breath just after a piece was cut would look like up to two seconds of silence.

What this cannot tell (docs/outbound.md measures it): a person who answers with a long
monologue, or who answers for someone else with a machine's words ("she's not available, can I
take a message?"); a short greeting with none of the phrases ("Hey, it's Dana, text me"), or in
a language it does not know; a greeting that pauses a long while after a few words (a person,
by the time it goes on); a machine that only beeps.

`greeting_over(heard, silent_for_ms)` says when a machine's greeting has ended, so a message
left on it is recorded whole: it has been silent for `GREETING_END_SILENCE_MS`, or it just said
"after the tone" (or the like) and has been silent for `TONE_SILENCE_MS`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.outbound.outcomes import AnsweredBy

# ── thresholds ──────────────────────────────────────────────────────────────────────────

# Speech without a pause this long is a greeting, not a person answering. Twilio's detector,
# which has only the length of speech to go on, takes 2,400 ms; a person's longest usual
# answer, a receptionist's "Good afternoon, Acme Dental, this is Rachel, how can I help you?",
# is 11 words, 2.2 s at five a second. The phrases catch most greetings before this, so it can
# wait past both.
RUN_ON_MS = 3_000
# This many words heard, with or without pauses, is a greeting: 3 s of words at five a second.
# A person who gets no answer says "Hello? … Hello?", not fifteen words.
MACHINE_WORDS = 15
# A gap this long between two pieces is a pause. The transcriber writes a piece about every
# second while someone speaks (the gap between two is then a word's gap, under 300 ms) and cuts
# one at a pause of a second or more: anything between the two tells them apart.
PAUSE_MS = 700
# No piece for this long settles the verdict: they said their words and are waiting. Pieces
# come about every second while someone speaks, so it must be longer than that; Twilio's
# end-of-speech threshold is the same 1,200 ms, short enough that a person is not left waiting.
SETTLE_SILENCE_MS = 1_200
# The verdict is settled this long after the answer whatever was heard: a person who has heard
# nothing for six seconds hangs up.
DECISION_DEADLINE_MS = 6_000
# A machine's greeting is over after no piece for this long: longer than the second between
# pieces while it speaks (so a breath between its sentences is no end), short enough that the
# message starts soon after the beep.
GREETING_END_SILENCE_MS = 1_500
# After "after the tone" the tone comes within half a second and lasts about half a second: a
# message started this long after the piece that said so arrived is not spoken over it.
TONE_SILENCE_MS = 1_000
# "After the tone" counts as the end of a greeting when it is among its last words: "after the
# tone, please say your name and number" goes on.
TONE_LAST_WORDS = 6
# Words between two parts of a phrase written with "…" ("leave … message").
MAXIMUM_GAP_WORDS = 3

# ── what machines say ───────────────────────────────────────────────────────────────────

# The tone a greeting ends with: also a machine's words.
TONE_PHRASES: dict[str, tuple[str, ...]] = {
    "en": (
        "after the tone",
        "after the beep",
        "at the tone",
        "at the beep",
        "after the signal",
        "hear the tone",
        "hear the beep",
    ),
    "es": (
        "después del tono",
        "después de la señal",
        "después del pitido",
        "tras la señal",
        "tras el tono",
        "al oír la señal",
    ),
    "fr": ("après le bip", "après le signal", "après la tonalité", "au bip", "au signal sonore"),
    "de": ("nach dem signalton", "nach dem ton", "nach dem piepton", "nach dem piep", "nach dem signal"),
}

# Phrases a person picking up would not say, by language. "…" stands for up to
# MAXIMUM_GAP_WORDS words. Left out on purpose, because a person answering says them too:
# "call you back", "not here right now" (said for someone else), "out of the office",
# "get back to you", "ahora no puedo", "je vous rappelle", "vous êtes bien chez".
PHRASES: dict[str, tuple[str, ...]] = {
    "en": (
        *TONE_PHRASES["en"],
        "leave … message",
        "leave your name",
        "leave your number",
        "not available",
        "unavailable",
        "isn't available",
        "can't come to the phone",
        "cannot come to the phone",
        "can't get to the phone",
        "can't take your call",
        "cannot take your call",
        "unable to take your call",
        "can't answer",
        "unable to answer",
        "can't pick up",
        "away from the phone",
        "away from my phone",
        "missed your call",
        "mailbox",
        "voicemail",
        "voice mail",
        "voice messaging",
        "record your message",
        "finished recording",
        "you have reached",
        "you've reached",
        "you reached",
        "the person you are calling",
        "the person you're calling",
        "the number you have dialed",
        "the number you have dialled",
        "the number you dialed",
        "subscriber you have called",
        "is not accepting calls",
        "press pound",
        "hang up or press",
    ),
    "es": (
        *TONE_PHRASES["es"],
        "deje … mensaje",
        "deja … mensaje",
        "dejar … mensaje",
        "dejes … mensaje",
        "deje … recado",
        "deja … recado",
        "deje su nombre",
        "no está disponible",
        "no se encuentra disponible",
        "no puede atender",
        "no puedo atender",
        "no puedo atenderte",
        "no puedo atenderle",
        "no podemos atender",
        "no podemos atenderle",
        "no puedo contestar",
        "buzón de voz",
        "buzón",
        "contestador",
        "mensaje de voz",
        "grabe su mensaje",
        "ha llamado a",
        "has llamado a",
        "se ha comunicado con",
        "te has comunicado con",
        "fuera de cobertura",
        "el número que usted marcó",
        "la persona a la que llama",
    ),
    "fr": (
        *TONE_PHRASES["fr"],
        "laissez … message",
        "laisser … message",
        "laisse … message",
        "laissez vos coordonnées",
        "messagerie vocale",
        "messagerie",
        "répondeur",
        "n'est pas disponible",
        "pas disponible",
        "indisponible",
        "ne peux pas vous répondre",
        "ne peut pas vous répondre",
        "pas joignable",
        "injoignable",
        "votre correspondant",
    ),
    "de": (
        *TONE_PHRASES["de"],
        "hinterlassen … nachricht",
        "hinterlasse … nachricht",
        "hinterlass … nachricht",
        "nachricht … hinterlassen",
        "sprechen sie nach dem",
        "sprich nach dem",
        "mailbox",
        "sprachbox",
        "anrufbeantworter",
        "sprachnachricht",
        "nicht erreichbar",
        "nicht verfügbar",
        "nicht zu erreichen",
        "der gewünschte gesprächspartner",
        "sie haben … erreicht",
        "du hast … erreicht",
    ),
}

_GAP = "…"


def words_of(text: str) -> list[str]:
    """The words of `text` as phrases are matched: case folded, accents and apostrophes
    dropped ("can't" is "cant"), anything but letters and digits a space."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    bare = "".join(char for char in folded if not unicodedata.combining(char))
    return re.findall(r"[^\W_]+", re.sub(r"['’ʼ‘`´]", "", bare))


@dataclass(frozen=True, slots=True)
class _Phrase:
    language: str
    written: str
    # Words, with None where up to MAXIMUM_GAP_WORDS other words may stand.
    words: tuple[str | None, ...]


def _compiled(table: dict[str, tuple[str, ...]]) -> tuple[_Phrase, ...]:
    return tuple(
        _Phrase(
            language,
            written,
            tuple(word for part in written.split() for word in _parts(part)),
        )
        for language, phrases in table.items()
        for written in phrases
    )


def _parts(part: str) -> list[str | None]:
    return [None] if part == _GAP else list(words_of(part))


_PHRASES = _compiled(PHRASES)
_TONES = _compiled(TONE_PHRASES)


def _matches_at(words: Sequence[str], at: int, phrase: Sequence[str | None]) -> int | None:
    """Where the phrase ends when it starts at `at`, or None."""
    for index, word in enumerate(phrase):
        if word is None:
            for skipped in range(MAXIMUM_GAP_WORDS + 1):
                end = _matches_at(words, at + skipped, phrase[index + 1 :])
                if end is not None:
                    return end
            return None
        if at >= len(words) or words[at] != word:
            return None
        at += 1
    return at


def _first_phrase(words: Sequence[str], phrases: Sequence[_Phrase]) -> tuple[int, int, _Phrase] | None:
    """The phrase heard first (the longest, of those starting at one word): start, end, phrase."""
    for at in range(len(words)):
        found = [
            (end, phrase) for phrase in phrases if (end := _matches_at(words, at, phrase.words)) is not None
        ]
        if found:
            end, phrase = max(found, key=lambda item: item[0])
            return at, end, phrase
    return None


# ── what was heard ──────────────────────────────────────────────────────────────────────


class Heard(BaseModel):
    """One piece of the callee's speech as written down: its text, and where it starts and
    ends on the call's timeline (ms)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    start_ms: int = Field(ge=0)
    end_ms: int = Field(ge=0)

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> Heard:
        if self.end_ms < self.start_ms:
            raise ValueError(f"end_ms {self.end_ms} is before start_ms {self.start_ms}")
        return self


class Verdict(BaseModel):
    """Who answered, and why it was decided so (JSON-safe: the rule, the phrase matched and its
    language, and the shape of the speech)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answered_by: AnsweredBy
    evidence: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Shape:
    """How the callee spoke: words, the span from the first word to the last (ms), the longest
    stretch without a pause (ms, and its words), and the pauses between stretches."""

    words: int
    speech_ms: int
    longest_run_ms: int
    longest_run_words: int
    pauses: int

    def as_evidence(self) -> dict[str, int]:
        return {
            "words": self.words,
            "speech_ms": self.speech_ms,
            "longest_run_ms": self.longest_run_ms,
            "longest_run_words": self.longest_run_words,
            "pauses": self.pauses,
        }


def _spoken(heard: Sequence[Heard]) -> list[Heard]:
    """The pieces with words in them, in the order they were said."""
    return sorted(
        (piece for piece in heard if words_of(piece.text)), key=lambda p: (p.start_ms, p.end_ms, p.text)
    )


def shape_of(heard: Sequence[Heard]) -> Shape:
    """The shape of what was heard (pieces with no words in them do not count)."""
    spoken = _spoken(heard)
    if not spoken:
        return Shape(0, 0, 0, 0, 0)
    words = pauses = longest_ms = longest_words = 0
    run_start, run_end, run_words = spoken[0].start_ms, spoken[0].end_ms, 0
    for piece in spoken:
        count = len(words_of(piece.text))
        words += count
        if piece.start_ms - run_end >= PAUSE_MS:
            pauses += 1
            run_start, run_words = piece.start_ms, 0
        run_end = max(run_end, piece.end_ms)
        run_words += count
        longest_ms = max(longest_ms, run_end - run_start)
        longest_words = max(longest_words, run_words)
    speech_ms = max(piece.end_ms for piece in spoken) - spoken[0].start_ms
    return Shape(words, speech_ms, longest_ms, longest_words, pauses)


def _all_words(heard: Sequence[Heard]) -> list[str]:
    return [word for piece in _spoken(heard) for word in words_of(piece.text)]


def _machine(heard: Sequence[Heard], shape: Shape) -> Verdict | None:
    """A machine's verdict when its words or the run of its speech say so."""
    found = _first_phrase(_all_words(heard), _PHRASES)
    if found is not None:
        _, _, phrase = found
        return Verdict(
            answered_by="machine",
            evidence={
                "rule": "phrase",
                "phrase": phrase.written,
                "language": phrase.language,
                **shape.as_evidence(),
            },
        )
    if shape.longest_run_ms >= RUN_ON_MS or shape.words >= MACHINE_WORDS:
        rule = "runs_on" if shape.longest_run_ms >= RUN_ON_MS else "many_words"
        return Verdict(answered_by="machine", evidence={"rule": rule, **shape.as_evidence()})
    return None


def listen(heard: Sequence[Heard]) -> Verdict | None:
    """A machine's verdict as soon as what was heard says so (its words, or a greeting running
    on); None while a person is still possible (wait for more, or for `settle`)."""
    return _machine(heard, shape_of(heard))


def settle(heard: Sequence[Heard]) -> Verdict:
    """The verdict with what there is, once the callee has been silent `SETTLE_SILENCE_MS` or the
    deadline has passed: a machine by its words or its run; else a person, who said a few words
    and stopped; `unknown` when nothing was said."""
    shape = shape_of(heard)
    if shape.words == 0:
        return Verdict(answered_by="unknown", evidence={"rule": "nothing_heard", **shape.as_evidence()})
    machine = _machine(heard, shape)
    if machine is not None:
        return machine
    return Verdict(answered_by="human", evidence={"rule": "few_words", **shape.as_evidence()})


def settle_due_ms(answered_ms: int, last_piece_ms: int | None) -> int:
    """When `settle` is due if no piece arrives before it: `SETTLE_SILENCE_MS` after the last
    piece arrived, never later than `DECISION_DEADLINE_MS` after the answer (both on the
    worker's clock: when each was received, not the call's timeline)."""
    deadline = answered_ms + DECISION_DEADLINE_MS
    if last_piece_ms is None:
        return deadline
    return min(last_piece_ms + SETTLE_SILENCE_MS, deadline)


def greeting_over(heard: Sequence[Heard], silent_for_ms: int) -> bool:
    """Whether a machine's greeting has ended, `silent_for_ms` after its last piece arrived:
    silent long enough, or it just said "after the tone" (or the like) and paused for the tone."""
    words = _all_words(heard)
    if not words:
        return False
    if silent_for_ms >= GREETING_END_SILENCE_MS:
        return True
    tail = words[-TONE_LAST_WORDS:]
    return silent_for_ms >= TONE_SILENCE_MS and _first_phrase(tail, _TONES) is not None
