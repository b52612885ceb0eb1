"""Sealed values and wrapped session keys: what makes a sensitive value durable yet erasable.

Each session has an X25519 key pair. Its **public** key is all the gateway holds: `seal` turns
a clear value into `sealed:v1:…` with it (an ephemeral X25519 exchange, HKDF-SHA256, AES-256-GCM
with the session's id as associated data), before the value is numbered into Redis or
PostgreSQL. Only the session's **private** key opens it (`open_sealed`), and a value sealed for
one session never opens as another's. The private key is kept in PostgreSQL *wrapped*
(`wrap`: AES-256-GCM under the deployment key, `SWITCHBOARD_DATA_KEY`, the session's id again as
associated data); `unwrap` takes the current key and the previous ones, so a rotation can
re-wrap without downtime. Destroying a session's wrapped private key makes every value sealed
for it unreadable wherever a copy lies (a backup, a dead letter, a Redis snapshot):
crypto-shredding.

Pure computation, like the rest of `pipeline/`: no files, sockets, clock or logging. The one
exception is the operating system's randomness (`os.urandom`, through `cryptography`), which
the key pairs, the ephemeral keys and the nonces are drawn from. Nothing here puts a clear
value, a key or a ciphertext into an exception's message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from pipeline.call.errors import Refusal

SEALED_PREFIX = "sealed:v1:"
WRAPPED_PREFIX = "wrapped:v1:"
SECRET_PREFIX = "secret:v1:"
# The domain of the sealing key's derivation; the session's id follows it.
SEAL_INFO = b"switchboard sealed v1 "

KEY_BYTES = 32  # an X25519 key (either half), an AES-256 key, a deployment key
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_ID_CHARS = 8


class SealedValueUnreadable(ValueError):
    """A sealed value or a wrapped key that cannot be opened: malformed, tampered with, sealed
    for another session, or under a key that is not the one given (or was destroyed)."""


class SessionKeyDestroyed(SealedValueUnreadable, Refusal):
    """The session's private key is gone (erased) or was never made: nothing sealed for it
    opens again. A refusal, so a queue message that needs it is never retried."""

    code = "session_key_destroyed"


class BadDataKey(ValueError):
    """A deployment key that is not 32 bytes of base64; the message says which, never the key."""


# ── the session's key pair and sealed values ──


def new_session_key_pair() -> tuple[bytes, bytes]:
    """A fresh X25519 key pair, raw: (private 32 bytes, public 32 bytes)."""
    private = X25519PrivateKey.generate()
    return _raw_private(private), _raw_public(private.public_key())


def public_key_of(private_key: bytes) -> bytes:
    """The raw public half of a raw X25519 private key."""
    return _raw_public(_private(private_key).public_key())


def is_sealed(value: object) -> bool:
    """Whether `value` is a sealed value's text (by its prefix; `open_sealed` checks the rest)."""
    return isinstance(value, str) and value.startswith(SEALED_PREFIX)


def seal(clear: str, *, public_key: bytes, session_id: str) -> str:
    """`clear` sealed for the session whose public key this is: `sealed:v1:` and the unpadded
    urlsafe base64 of ephemeral public key ‖ nonce ‖ AES-GCM ciphertext (tag included)."""
    recipient = _public(public_key)
    ephemeral = X25519PrivateKey.generate()
    ephemeral_public = _raw_public(ephemeral.public_key())
    key = _sealing_key(ephemeral.exchange(recipient), ephemeral_public, public_key, session_id)
    nonce = os.urandom(NONCE_BYTES)
    # surrogatepass: a lone surrogate a provider's JSON may carry seals and opens unchanged.
    ciphertext = AESGCM(key).encrypt(nonce, clear.encode("utf-8", "surrogatepass"), session_id.encode())
    return SEALED_PREFIX + _encode(ephemeral_public + nonce + ciphertext)


def open_sealed(sealed: str, *, private_key: bytes, session_id: str) -> str:
    """The clear value of a value sealed for this session; `SealedValueUnreadable` otherwise
    (not a sealed value, malformed, another session's, another key's, or tampered with)."""
    if not is_sealed(sealed):
        raise SealedValueUnreadable(f"not a sealed value (it does not start with {SEALED_PREFIX!r})")
    body = _decode(sealed[len(SEALED_PREFIX) :], what="sealed value")
    if len(body) < KEY_BYTES + NONCE_BYTES + TAG_BYTES:
        raise SealedValueUnreadable("sealed value is too short to hold a key, a nonce and a tag")
    ephemeral_public = body[:KEY_BYTES]
    nonce = body[KEY_BYTES : KEY_BYTES + NONCE_BYTES]
    ciphertext = body[KEY_BYTES + NONCE_BYTES :]
    private = _private(private_key)
    try:
        shared = private.exchange(X25519PublicKey.from_public_bytes(ephemeral_public))
    except ValueError as error:  # a low-order point gives an all-zero secret, which is refused
        raise SealedValueUnreadable("sealed value carries an unusable ephemeral key") from error
    key = _sealing_key(shared, ephemeral_public, public_key_of(private_key), session_id)
    try:
        clear = AESGCM(key).decrypt(nonce, ciphertext, session_id.encode())
    except InvalidTag:
        raise SealedValueUnreadable(
            f"sealed value does not open for session {session_id!r}: another session's or key's, or altered"
        ) from None
    return clear.decode("utf-8", "surrogatepass")


def _sealing_key(shared: bytes, ephemeral_public: bytes, recipient_public: bytes, session_id: str) -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(),
        length=KEY_BYTES,
        salt=ephemeral_public + recipient_public,
        info=SEAL_INFO + session_id.encode(),
    ).derive(shared)


# ── the deployment key and wrapped private keys ──


@dataclass(frozen=True)
class DeploymentKey:
    """`SWITCHBOARD_DATA_KEY` decoded: 32 bytes, and the id a wrapped key names it by (the first
    8 hex digits of its SHA-256, safe to print). The key itself is kept out of the repr."""

    key_id: str
    key: bytes = field(repr=False)

    @classmethod
    def of(cls, key: bytes) -> DeploymentKey:
        if len(key) != KEY_BYTES:
            raise BadDataKey(f"is {len(key)} bytes; it must be {KEY_BYTES}")
        return cls(key_id=hashlib.sha256(key).hexdigest()[:KEY_ID_CHARS], key=key)

    @classmethod
    def generate(cls) -> DeploymentKey:
        return cls.of(os.urandom(KEY_BYTES))

    @property
    def text(self) -> str:
        """The key as `SWITCHBOARD_DATA_KEY` holds it: standard base64 (44 characters)."""
        return base64.b64encode(self.key).decode()


def parse_deployment_key(text: str) -> DeploymentKey:
    """A deployment key from its standard or urlsafe base64 (padded or not, surrounding blanks
    ignored); `BadDataKey` saying whether it is empty, not base64, or not 32 bytes."""
    stripped = text.strip()
    if not stripped:
        raise BadDataKey("is empty")
    urlsafe = "-" in stripped or "_" in stripped
    if urlsafe and ("+" in stripped or "/" in stripped):
        raise BadDataKey("is not base64 (it mixes the standard and the urlsafe alphabets)")
    padded = stripped + "=" * (-len(stripped) % 4)
    try:
        key = base64.b64decode(padded, altchars=b"-_" if urlsafe else None, validate=True)
    except (binascii.Error, ValueError):
        raise BadDataKey("is not base64") from None
    if len(key) != KEY_BYTES:
        raise BadDataKey(
            f"decodes to {len(key)} bytes; it must be {KEY_BYTES} (make one with `openssl rand -base64 32`)"
        )
    return DeploymentKey.of(key)


def wrap(private_key: bytes, key: DeploymentKey, session_id: str) -> str:
    """A session's private key encrypted under the deployment key: `wrapped:v1:<key id>:` and
    the unpadded urlsafe base64 of nonce ‖ AES-GCM ciphertext (the session's id authenticated)."""
    if len(private_key) != KEY_BYTES:
        raise ValueError(f"a session's private key is {KEY_BYTES} bytes")
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(key.key).encrypt(nonce, private_key, session_id.encode())
    return f"{WRAPPED_PREFIX}{key.key_id}:{_encode(nonce + ciphertext)}"


def wrapped_key_id(wrapped: str) -> str:
    """The id of the deployment key a wrapped key is under (`SealedValueUnreadable` if it is
    not a wrapped key)."""
    if not wrapped.startswith(WRAPPED_PREFIX):
        raise SealedValueUnreadable(f"not a wrapped key (it does not start with {WRAPPED_PREFIX!r})")
    key_id, separator, _ = wrapped[len(WRAPPED_PREFIX) :].partition(":")
    if not separator or len(key_id) != KEY_ID_CHARS:
        raise SealedValueUnreadable("wrapped key names no deployment key id")
    return key_id


def unwrap(wrapped: str, keys: Sequence[DeploymentKey], session_id: str) -> bytes:
    """The session's private key, opened with whichever of `keys` (current first, then the
    previous ones) it was wrapped under; `SealedValueUnreadable` if none fits."""
    key_id = wrapped_key_id(wrapped)
    body = _decode(wrapped[len(WRAPPED_PREFIX) + KEY_ID_CHARS + 1 :], what="wrapped key")
    candidates = [key for key in keys if key.key_id == key_id]
    if not candidates:
        given = ", ".join(key.key_id for key in keys) or "none"
        raise SealedValueUnreadable(
            f"wrapped under deployment key {key_id}, which is not among those given ({given})"
        )
    if len(body) != NONCE_BYTES + KEY_BYTES + TAG_BYTES:
        raise SealedValueUnreadable("wrapped key has the wrong length")
    for candidate in candidates:
        try:
            return AESGCM(candidate.key).decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], session_id.encode())
        except InvalidTag:
            continue
    raise SealedValueUnreadable(
        f"wrapped key does not open for session {session_id!r} under deployment key {key_id}:"
        " another session's, or altered"
    )


# ── the deployment's own secrets (a trunk's password) ──


def encrypt_secret(clear: str, key: DeploymentKey, context: str) -> str:
    """A secret of the deployment's (a SIP trunk's password) encrypted under the deployment
    key: `secret:v1:<key id>:` and nonce ‖ AES-GCM ciphertext, `context` (what the secret
    belongs to) authenticated, so a ciphertext moved to another row does not open there."""
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(key.key).encrypt(nonce, clear.encode("utf-8", "surrogatepass"), context.encode())
    return f"{SECRET_PREFIX}{key.key_id}:{_encode(nonce + ciphertext)}"


def decrypt_secret(encrypted: str, keys: Sequence[DeploymentKey], context: str) -> str:
    """A secret `encrypt_secret` made, opened with whichever of `keys` it is under;
    `SealedValueUnreadable` (saying nothing of the secret) if none opens it."""
    if not encrypted.startswith(SECRET_PREFIX):
        raise SealedValueUnreadable(f"not an encrypted secret (it does not start with {SECRET_PREFIX!r})")
    key_id, separator, rest = encrypted[len(SECRET_PREFIX) :].partition(":")
    if not separator:
        raise SealedValueUnreadable("encrypted secret names no deployment key id")
    body = _decode(rest, what="encrypted secret")
    for candidate in (key for key in keys if key.key_id == key_id):
        try:
            clear = AESGCM(candidate.key).decrypt(body[:NONCE_BYTES], body[NONCE_BYTES:], context.encode())
        except InvalidTag:
            continue
        return clear.decode("utf-8", "surrogatepass")
    raise SealedValueUnreadable(f"the secret of {context} does not open under the deployment keys given")


def secret_key_id(encrypted: str) -> str:
    """The id of the deployment key a secret is under (for a rotation)."""
    return encrypted[len(SECRET_PREFIX) :].partition(":")[0]


# ── encoding ──


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(text: str, *, what: str) -> bytes:
    """Unpadded urlsafe base64, canonical only: a text that decodes but does not re-encode to
    itself (trailing bits changed, padding, stray characters) is refused, so no character of a
    sealed value can be altered unnoticed."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise SealedValueUnreadable(f"{what} is not urlsafe base64") from None
    if _encode(raw) != text:
        raise SealedValueUnreadable(f"{what} is not canonical urlsafe base64")
    return raw


def _private(raw: bytes) -> X25519PrivateKey:
    if len(raw) != KEY_BYTES:
        raise SealedValueUnreadable(f"a session's private key is {KEY_BYTES} bytes")
    return X25519PrivateKey.from_private_bytes(raw)


def _public(raw: bytes) -> X25519PublicKey:
    if len(raw) != KEY_BYTES:
        raise ValueError(f"a session's public key is {KEY_BYTES} bytes")
    return X25519PublicKey.from_public_bytes(raw)


def _raw_private(key: X25519PrivateKey) -> bytes:
    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def _raw_public(key: X25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)
