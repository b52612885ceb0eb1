"""The delta gate: held while a value could still be forming, released once it cannot."""

from __future__ import annotations

from pipeline.privacy.detect import Kind, redact
from pipeline.privacy.stream import MAXIMUM_HELD_CHARS, DeltaGate


def _pushed(gate: DeltaGate, deltas: list[str]) -> list[str]:
    return [gate.push(delta) for delta in deltas]


def test_a_card_spoken_over_many_deltas_is_never_shown_in_part() -> None:
    """Digit words are held until the number is whole, then released masked."""
    gate = DeltaGate()
    words = ["four"] + ["one"] * 15
    released = _pushed(gate, ["the number is ", *(f"{word} " for word in words), "thanks ", "bye"])
    assert released[0] == "the number"
    assert "".join(released[1:-2]) == ""
    assert "one" not in "".join(released)
    assert "".join(released) + gate.flush() == "the number is •••• •••• •••• 1111 thanks bye"


def test_a_card_typed_across_deltas_is_caught() -> None:
    """'4111 1111' then '1111 1111' is one card, not two harmless halves."""
    gate = DeltaGate()
    released = _pushed(gate, ["card 4111 1111", " 1111 1111", " thanks."])
    assert "4111" not in "".join(released)
    assert "".join(released) + gate.flush() == "card •••• •••• •••• 1111 thanks."


def test_an_address_split_across_deltas_is_caught() -> None:
    """A partial address ("john.sm") is held until its domain has come."""
    gate = DeltaGate({Kind.EMAIL})
    released = _pushed(gate, ["write to john.sm", "ith@exam", "ple.com today"])
    assert "john" not in "".join(released)
    assert "".join(released) + gate.flush() == "write to j•••@example.com today"


def test_plain_speech_is_released_as_it_comes() -> None:
    """Between barrier words, only the words since the last one are held."""
    gate = DeltaGate()
    held = []
    for word in ("hello there, thanks for calling about your order today " * 200).split(" "):
        gate.push(word + " ")
        held.append(gate.held_chars)
    assert max(held) < 40


def test_a_long_run_with_no_barrier_is_released_masked_within_the_bound() -> None:
    """Text that never lets a barrier through is held at most the bound, then masked as it comes."""
    gate = DeltaGate()
    text = "ab 12 " * 2_000
    released = []
    for char in text:
        released.append(gate.push(char))
        assert gate.held_chars <= MAXIMUM_HELD_CHARS
    assert "".join(released) + gate.flush() == redact(text)
    assert set(redact(text)) == {"•", " "}


def test_a_barrier_word_at_the_end_is_held_until_the_next_character() -> None:
    """ "thanks" may yet be the start of "thanks@example.com", so it waits for one more character."""
    gate = DeltaGate({Kind.EMAIL})
    assert gate.push("4111 thanks") == ""
    assert gate.push("@example.com ") == ""
    assert gate.flush() == "4111 t•••@example.com "


def test_flush_releases_what_is_held_redacted() -> None:
    """At the final, whatever is held is released, redacted as the whole text would be."""
    gate = DeltaGate()
    assert gate.push("ssn 123-45-") == ""
    assert gate.push("6789") == ""
    assert gate.flush() == "ssn •••-••-6789"
    assert gate.held_chars == 0
