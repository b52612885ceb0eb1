"""Sealed values and wrapped keys: what is sealed for a session opens with its private key and
nothing else; any altered character, another session or another key is refused; deployment
keys are parsed strictly and never echoed."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.privacy.sealing import (
    SEALED_PREFIX,
    BadDataKey,
    DeploymentKey,
    SealedValueUnreadable,
    is_sealed,
    new_session_key_pair,
    open_sealed,
    parse_deployment_key,
    public_key_of,
    seal,
    unwrap,
    wrap,
    wrapped_key_id,
)

PRIVATE, PUBLIC = new_session_key_pair()
SESSION = "sess_1"
CARD = "4111 1111 1111 1111"
session_ids = st.text(min_size=1, max_size=40)
B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _body(sealed: str) -> bytes:
    text = sealed.removeprefix(SEALED_PREFIX)
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sealed_from(body: bytes) -> str:
    return SEALED_PREFIX + base64.urlsafe_b64encode(body).decode().rstrip("=")


# ── sealing ──


def test_a_key_pair_is_two_raw_32_byte_halves_that_belong_together() -> None:
    private, public = new_session_key_pair()
    assert len(private) == len(public) == 32
    assert public_key_of(private) == public
    assert new_session_key_pair() != (private, public)


@given(clear=st.text(st.characters(codec=None, exclude_categories=()), max_size=300), session_id=session_ids)
def test_any_text_sealed_for_a_session_opens_with_its_private_key(clear: str, session_id: str) -> None:
    """Any text at all, lone surrogates included (json.loads makes them from a provider's frame)."""
    sealed = seal(clear, public_key=PUBLIC, session_id=session_id)
    assert is_sealed(sealed)
    assert open_sealed(sealed, private_key=PRIVATE, session_id=session_id) == clear


def test_the_sealed_form_is_the_prefix_and_unpadded_urlsafe_base64_of_key_nonce_and_ciphertext() -> None:
    sealed = seal(CARD, public_key=PUBLIC, session_id=SESSION)
    text = sealed.removeprefix(SEALED_PREFIX)
    assert sealed.startswith("sealed:v1:") and set(text) <= set(B64URL)
    # Ephemeral public key (32) ‖ nonce (12) ‖ ciphertext (as long as the text) ‖ GCM tag (16).
    assert len(_body(sealed)) == 32 + 12 + len(CARD.encode()) + 16
    assert CARD not in sealed and "1111" not in sealed


def test_sealing_the_same_value_twice_gives_different_texts() -> None:
    """A fresh ephemeral key and nonce each time: equal values cannot be told apart by their
    sealed forms."""
    first = seal(CARD, public_key=PUBLIC, session_id=SESSION)
    second = seal(CARD, public_key=PUBLIC, session_id=SESSION)
    assert first != second
    assert _body(first)[:32] != _body(second)[:32]


@settings(max_examples=200)
@given(clear=st.text(max_size=40), data=st.data())
def test_altering_any_byte_of_a_sealed_value_makes_it_unreadable(clear: str, data: st.DataObject) -> None:
    body = bytearray(_body(seal(clear, public_key=PUBLIC, session_id=SESSION)))
    index = data.draw(st.integers(0, len(body) - 1), label="index")
    body[index] ^= data.draw(st.integers(1, 255), label="xor")
    with pytest.raises(SealedValueUnreadable):
        open_sealed(_sealed_from(bytes(body)), private_key=PRIVATE, session_id=SESSION)


@settings(max_examples=200)
@given(clear=st.text(max_size=40), data=st.data())
def test_altering_any_character_of_a_sealed_text_makes_it_unreadable(clear: str, data: st.DataObject) -> None:
    """Characters too, even the last one, whose low bits base64 would otherwise ignore."""
    sealed = seal(clear, public_key=PUBLIC, session_id=SESSION)
    index = data.draw(st.integers(0, len(sealed) - 1), label="index")
    replacement = data.draw(st.sampled_from(B64URL + "=+/ :").filter(lambda c: c != sealed[index]))
    altered = sealed[:index] + replacement + sealed[index + 1 :]
    with pytest.raises(SealedValueUnreadable):
        open_sealed(altered, private_key=PRIVATE, session_id=SESSION)


@given(clear=st.text(max_size=60), sealed_for=session_ids, opened_as=session_ids)
def test_a_value_sealed_for_one_session_does_not_open_as_another_s(
    clear: str, sealed_for: str, opened_as: str
) -> None:
    """Even holding the right private key: the session's id is authenticated with the value."""
    if sealed_for == opened_as:
        opened_as += "x"
    sealed = seal(clear, public_key=PUBLIC, session_id=sealed_for)
    with pytest.raises(SealedValueUnreadable):
        open_sealed(sealed, private_key=PRIVATE, session_id=opened_as)


def test_another_session_s_private_key_does_not_open_it() -> None:
    other_private, _ = new_session_key_pair()
    sealed = seal(CARD, public_key=PUBLIC, session_id=SESSION)
    with pytest.raises(SealedValueUnreadable) as raised:
        open_sealed(sealed, private_key=other_private, session_id=SESSION)
    assert sealed.removeprefix(SEALED_PREFIX) not in str(raised.value)
    assert SESSION in str(raised.value)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("4111 1111 1111 1111", "not a sealed value"),
        ("sealed:v2:AAAA", "not a sealed value"),
        ("sealed:v1:", "too short"),
        ("sealed:v1:!!!!", "not urlsafe base64"),
        ("sealed:v1:AAAA====", "not canonical"),
        ("sealed:v1:" + "A" * 58 + "B", "not canonical"),
        ("sealed:v1:" + "B" * 80, "does not open"),
        ("sealed:v1:" + "A" * 20, "too short"),
    ],
)
def test_a_malformed_sealed_value_is_refused_with_a_reason(text: str, says: str) -> None:
    with pytest.raises(SealedValueUnreadable, match=says):
        open_sealed(text, private_key=PRIVATE, session_id=SESSION)


def test_an_ephemeral_key_of_low_order_is_refused_not_crashed_on() -> None:
    """An all-zero point would make an all-zero shared secret; X25519 refuses it, and so do we."""
    body = bytes(32) + bytes(12) + bytes(20)
    with pytest.raises(SealedValueUnreadable, match="unusable ephemeral key"):
        open_sealed(_sealed_from(body), private_key=PRIVATE, session_id=SESSION)


def test_is_sealed_asks_only_the_prefix_and_the_type() -> None:
    assert is_sealed("sealed:v1:anything")
    assert not any(is_sealed(value) for value in (None, 4111, b"sealed:v1:x", "sealed:v2:x", "", CARD))


def test_a_public_key_of_the_wrong_length_is_refused_when_sealing() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        seal(CARD, public_key=PUBLIC[:31], session_id=SESSION)


# ── deployment keys ──

RAW = bytes(range(32))
CURRENT = DeploymentKey.of(RAW)
PREVIOUS = DeploymentKey.of(bytes(range(1, 33)))


def test_a_deployment_key_is_parsed_from_standard_or_urlsafe_base64_padded_or_not() -> None:
    raw = bytes([0xFB, 0xFF] * 16)  # encodes with + and / (or - and _)
    standard = base64.b64encode(raw).decode()
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    assert "+" in standard and "-" in urlsafe
    for text in (standard, urlsafe, urlsafe.rstrip("="), f"  {standard}\n"):
        key = parse_deployment_key(text)
        assert key.key == raw
    assert parse_deployment_key(standard).key_id == __import__("hashlib").sha256(raw).hexdigest()[:8]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is empty"),
        ("   \n", "is empty"),
        ("not base64 at all!", "is not base64"),
        ("ab+c-d==", "mixes the standard and the urlsafe"),
        (base64.b64encode(bytes(16)).decode(), "decodes to 16 bytes; it must be 32"),
        (base64.b64encode(bytes(33)).decode(), "decodes to 33 bytes; it must be 32"),
    ],
)
def test_a_bad_deployment_key_says_what_is_wrong_and_never_echoes_it(text: str, says: str) -> None:
    with pytest.raises(BadDataKey, match=says) as raised:
        parse_deployment_key(text)
    assert isinstance(raised.value, ValueError)
    if text.strip():
        assert text.strip() not in str(raised.value)


def test_a_deployment_key_keeps_its_bytes_out_of_its_repr_and_round_trips_its_text() -> None:
    assert "key_id=" in repr(CURRENT) and repr(RAW) not in repr(CURRENT) and CURRENT.text not in repr(CURRENT)
    assert parse_deployment_key(CURRENT.text) == CURRENT
    generated = DeploymentKey.generate()
    assert len(generated.key) == 32 and generated != DeploymentKey.generate()


# ── wrapped private keys ──


@given(session_id=session_ids)
def test_a_wrapped_private_key_unwraps_under_its_deployment_key(session_id: str) -> None:
    wrapped = wrap(PRIVATE, CURRENT, session_id)
    assert wrapped.startswith(f"wrapped:v1:{CURRENT.key_id}:")
    assert wrapped_key_id(wrapped) == CURRENT.key_id
    assert unwrap(wrapped, [CURRENT], session_id) == PRIVATE


def test_unwrap_picks_the_key_by_its_id_among_the_current_and_previous_ones() -> None:
    old = wrap(PRIVATE, PREVIOUS, SESSION)
    assert unwrap(old, [CURRENT, PREVIOUS], SESSION) == PRIVATE
    with pytest.raises(SealedValueUnreadable, match=f"deployment key {PREVIOUS.key_id}, which is not among"):
        unwrap(old, [CURRENT], SESSION)


def test_a_wrapped_key_does_not_unwrap_for_another_session_or_altered() -> None:
    wrapped = wrap(PRIVATE, CURRENT, SESSION)
    with pytest.raises(SealedValueUnreadable, match="does not open for session 'sess_2'"):
        unwrap(wrapped, [CURRENT], "sess_2")
    head, _, body = wrapped.rpartition(":")
    flipped = ("B" if body[5] == "A" else "A").join([body[:5], body[6:]])
    with pytest.raises(SealedValueUnreadable):
        unwrap(f"{head}:{flipped}", [CURRENT], SESSION)
    with pytest.raises(SealedValueUnreadable, match="not a wrapped key"):
        unwrap(PRIVATE.hex(), [CURRENT], SESSION)
    with pytest.raises(SealedValueUnreadable, match="names no deployment key id"):
        unwrap("wrapped:v1:abc", [CURRENT], SESSION)


def test_a_deployment_key_with_the_same_id_but_other_bytes_does_not_unwrap() -> None:
    """The id only chooses; the tag decides."""
    impostor = DeploymentKey(key_id=CURRENT.key_id, key=PREVIOUS.key)
    with pytest.raises(SealedValueUnreadable, match="does not open"):
        unwrap(wrap(PRIVATE, CURRENT, SESSION), [impostor], SESSION)
