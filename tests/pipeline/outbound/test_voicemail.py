"""Telling a person from a machine by what the callee says first: a machine's words in four
languages, a greeting that runs on, a person's few words; and when a greeting is over."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.outbound.voicemail import (
    DECISION_DEADLINE_MS,
    GREETING_END_SILENCE_MS,
    MACHINE_WORDS,
    PHRASES,
    RUN_ON_MS,
    SETTLE_SILENCE_MS,
    TONE_SILENCE_MS,
    Heard,
    greeting_over,
    listen,
    settle,
    settle_due_ms,
    shape_of,
    words_of,
)


def _said(*pieces: tuple[str, int, int]) -> list[Heard]:
    return [Heard(text=text, start_ms=start, end_ms=end) for text, start, end in pieces]


def _one(text: str, start_ms: int = 500, words_per_second: int = 5) -> list[Heard]:
    """`text` said without a pause, in pieces of a second, as the transcriber writes them."""
    words = text.split()
    per_piece = words_per_second
    return [
        Heard(
            text=" ".join(words[index : index + per_piece]),
            start_ms=start_ms + index * 1_000 // words_per_second,
            end_ms=start_ms + min(index + per_piece, len(words)) * 1_000 // words_per_second,
        )
        for index in range(0, len(words), per_piece)
    ]


@pytest.mark.parametrize(
    ("text", "phrase", "language"),
    [
        ("Hi, you've reached Dana.", "you've reached", "en"),
        ("Please leave a message.", "leave … message", "en"),
        ("Leave me a quick message.", "leave … message", "en"),
        ("Sorry, I can't come to the phone.", "can't come to the phone", "en"),
        ("At the BEEP, go.", "at the beep", "en"),
        ("This is my VOICEMAIL", "voicemail", "en"),
        ("Deja tu mensaje, gracias.", "deja … mensaje", "es"),
        ("Buzon de voz de Ana", "buzón de voz", "es"),
        ("Hable despues del tono", "después del tono", "es"),
        ("Laissez-moi un message", "laissez … message", "fr"),
        ("Vous êtes sur mon RÉPONDEUR", "répondeur", "fr"),
        ("Parlez après le bip.", "après le bip", "fr"),
        ("Bitte hinterlassen Sie eine Nachricht", "hinterlassen … nachricht", "de"),
        ("Sie haben Anna Schulz erreicht", "sie haben … erreicht", "de"),
        ("Ich bin nicht verfugbar", "nicht verfügbar", "de"),
    ],
)
def test_a_machine_s_words_say_machine_at_once(text: str, phrase: str, language: str) -> None:
    """A phrase in any of the four languages, any case, with or without accents and
    punctuation, is a machine as soon as it is heard, naming the phrase and its language."""
    verdict = listen(_said((text, 500, 1_500)))
    assert verdict is not None
    assert verdict.answered_by == "machine"
    assert (verdict.evidence["rule"], verdict.evidence["phrase"], verdict.evidence["language"]) == (
        "phrase",
        phrase,
        language,
    )


def test_a_phrase_is_heard_across_pieces() -> None:
    """The transcriber's cut between "leave a" and "message" does not hide it."""
    verdict = listen(_said(("Please leave a", 500, 1_300), ("message now.", 1_300, 1_700)))
    assert verdict is not None
    assert verdict.evidence["phrase"] == "leave … message"


@pytest.mark.parametrize("text", ["Check my mailboxes", "Reached you", "Leave it to me, my message is long"])
def test_a_phrase_matches_whole_words_only(text: str) -> None:
    """Part of a word, words out of order, or too many words between are no phrase."""
    assert listen(_said((text, 500, 1_300))) is None


@pytest.mark.parametrize(
    "text", ["Hello?", "Yes, who is this?", "Dana speaking.", "¿Diga?", "Allô ?", "Müller."]
)
def test_a_person_s_few_words_wait_for_settle_then_are_a_person(text: str) -> None:
    """A person says a few words and stops: listen waits, settle says human, with the shape."""
    heard = _said((text, 600, 1_400))
    assert listen(heard) is None
    verdict = settle(heard)
    assert verdict.answered_by == "human"
    assert verdict.evidence == {
        "rule": "few_words",
        "words": len(words_of(text)),
        "speech_ms": 800,
        "longest_run_ms": 800,
        "longest_run_words": len(words_of(text)),
        "pauses": 0,
    }


def test_a_greeting_that_runs_on_is_a_machine_before_it_ends() -> None:
    """Speech without a pause for RUN_ON_MS, with none of the phrases, is a machine then."""
    greeting = _one("Thank you for calling Riverside Dental our office is closed today and all weekend long")
    seen = [listen(greeting[: count + 1]) for count in range(len(greeting))]
    told_at = next(index for index, verdict in enumerate(seen) if verdict is not None)
    verdict = seen[told_at]
    assert verdict is not None
    assert verdict.evidence["rule"] == "runs_on"
    assert verdict.evidence["longest_run_ms"] >= RUN_ON_MS
    assert greeting[told_at - 1].end_ms - greeting[0].start_ms < RUN_ON_MS


def test_many_words_across_pauses_are_a_machine() -> None:
    """MACHINE_WORDS words, each stretch short, are a greeting with pauses."""
    stretches = [("one two three four five", 500 + 2_000 * i, 1_500 + 2_000 * i) for i in range(3)]
    verdict = settle(_said(*stretches))
    assert verdict.answered_by == "machine"
    assert verdict.evidence["rule"] == "many_words"
    assert verdict.evidence["words"] == MACHINE_WORDS
    assert verdict.evidence["pauses"] == 2


def test_nothing_heard_is_unknown() -> None:
    """No pieces, or pieces with no words in them: nobody can tell."""
    assert settle([]).answered_by == "unknown"
    verdict = settle(_said(("...", 500, 900), ("", 1_000, 1_000)))
    assert verdict.answered_by == "unknown"
    assert verdict.evidence["rule"] == "nothing_heard"


def test_a_piece_that_ends_before_it_starts_is_refused() -> None:
    """A piece's end is at or after its start, both on the call's timeline."""
    with pytest.raises(ValidationError, match="end_ms 100 is before start_ms 200"):
        Heard(text="hi", start_ms=200, end_ms=100)


def test_settle_is_due_after_silence_or_at_the_deadline() -> None:
    """SETTLE_SILENCE_MS after the last piece arrived, never past the deadline after the answer."""
    assert settle_due_ms(10_000, None) == 10_000 + DECISION_DEADLINE_MS
    assert settle_due_ms(10_000, 11_000) == 11_000 + SETTLE_SILENCE_MS
    assert settle_due_ms(10_000, 15_500) == 10_000 + DECISION_DEADLINE_MS


def test_a_greeting_is_over_after_a_long_silence_or_its_tone() -> None:
    """Silent GREETING_END_SILENCE_MS, or TONE_SILENCE_MS after "after the tone" among its last words."""
    plain = _said(("Hi, it's Dana, I'll call you back.", 500, 2_000))
    assert not greeting_over(plain, GREETING_END_SILENCE_MS - 1)
    assert greeting_over(plain, GREETING_END_SILENCE_MS)
    toned = _said(("Please leave a message after the tone.", 500, 2_000))
    assert not greeting_over(toned, TONE_SILENCE_MS - 1)
    assert greeting_over(toned, TONE_SILENCE_MS)
    going_on = _said(("After the tone, please say your name and your number.", 500, 2_500))
    assert not greeting_over(going_on, TONE_SILENCE_MS)
    assert not greeting_over([], 10_000)


def test_every_phrase_is_heard_as_written() -> None:
    """Each phrase in the table, as it is written (a gap as one word), is a machine by itself."""
    for language, phrases in PHRASES.items():
        for phrase in phrases:
            verdict = listen(_said((phrase.replace("…", "please"), 0, 1_000)))
            assert verdict is not None, phrase
            # A phrase two languages share ("mailbox") is named by the first that has it.
            said_in = {each for each, listed in PHRASES.items() if verdict.evidence["phrase"] in listed}
            assert verdict.evidence["language"] in said_in
            assert verdict.evidence["phrase"] != phrase or language in said_in


# ── properties ──────────────────────────────────────────────────────────────────────────

WORDS = st.sampled_from(
    [
        "hello",
        "hi",
        "yes",
        "Dana",
        "leave",
        "a",
        "message",
        "after",
        "the",
        "tone",
        "not",
        "available",
        "¿Diga?",
        ",",
        "",
    ]
)


@st.composite
def speech(draw: st.DrawFn) -> list[Heard]:
    """Pieces in time order: each a few words, after a gap of 0 to 2 s."""
    pieces = []
    at = draw(st.integers(0, 3_000))
    for _ in range(draw(st.integers(0, 10))):
        text = " ".join(draw(st.lists(WORDS | st.text(max_size=8), max_size=6)))
        length = draw(st.integers(0, 1_200))
        pieces.append(Heard(text=text, start_ms=at, end_ms=at + length))
        at += length + draw(st.integers(0, 2_000))
    return pieces


@settings(max_examples=300)
@given(speech())
def test_a_machine_stays_a_machine_as_more_is_heard(heard: list[Heard]) -> None:
    """Once listen says machine, it says so for every longer run of pieces: its words are still
    there and runs only grow."""
    told = False
    for count in range(1, len(heard) + 1):
        verdict = listen(heard[:count])
        if told:
            assert verdict is not None
            assert verdict.answered_by == "machine"
        told = verdict is not None


@settings(max_examples=300)
@given(speech(), st.data())
def test_settle_agrees_with_listen_and_is_unknown_only_with_no_words(
    heard: list[Heard], data: st.DataObject
) -> None:
    """settle gives listen's verdict when there is one; unknown exactly when no word was heard;
    the order pieces are given in does not matter; the evidence is JSON."""
    verdict = settle(heard)
    early = listen(heard)
    if early is not None:
        assert verdict == early
    assert (verdict.answered_by == "unknown") == (shape_of(heard).words == 0)
    assert settle(data.draw(st.permutations(heard))) == verdict
    assert json.loads(json.dumps(verdict.model_dump())) == verdict.model_dump()


@given(st.text())
def test_any_text_is_read_without_raising(text: str) -> None:
    """Whatever the transcriber writes, listen and settle answer."""
    heard = _said((text, 0, 500))
    assert settle(heard).answered_by in {"human", "machine", "unknown"}
    assert listen(heard) is None or listen(heard) == settle(heard)
