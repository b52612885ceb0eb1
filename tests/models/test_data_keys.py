"""Session data keys on real PostgreSQL: made once, opened with the deployment key, destroyed for
good (what was sealed before stays unreadable), re-wrapped by a rotation."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from models.data_keys import (
    SessionKeyDestroyed,
    create_session_key,
    destroy_session_key,
    rotate,
    session_private_key,
    session_public_key,
)
from models.db import database
from models.sessions import new_session
from pipeline.call.errors import Refusal
from pipeline.privacy.sealing import (
    DeploymentKey,
    SealedValueUnreadable,
    open_sealed,
    public_key_of,
    seal,
    wrapped_key_id,
)
from pipeline.session.wire import SessionCreated
from tests.support.calls import GATEWAY, new_session_id

CARD = "4111 1111 1111 1111"
OLD = DeploymentKey.generate()
NEW = DeploymentKey.generate()


def _session(namespace: str = "") -> str:
    session_id = new_session_id()
    with new_session(session_id, GATEWAY, namespace) as session:
        session.apply_host(SessionCreated(instructions="Hi."), time.time())
    return session_id


def _row(session_id: str) -> tuple[Any, ...]:
    row = database.execute_sql(
        "SELECT public_key, wrapped_private, key_id, destroyed_at FROM session_data_keys"
        " WHERE session_id = %s",
        (session_id,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_a_session_s_key_is_made_once_and_opens_what_its_public_key_sealed(database: Any) -> None:
    session_id = _session()
    public = create_session_key(session_id, [NEW])
    assert len(public) == 32
    assert create_session_key(session_id, [NEW]) == public  # the second call finds the first's
    assert session_public_key(session_id) == public

    sealed = seal(CARD, public_key=public, session_id=session_id)
    private = session_private_key(session_id, [NEW])
    assert public_key_of(private) == public
    assert open_sealed(sealed, private_key=private, session_id=session_id) == CARD

    stored_public, wrapped, key_id, destroyed_at = _row(session_id)
    assert bytes(stored_public) == public and key_id == NEW.key_id and destroyed_at is None
    # What the table holds of the private half is wrapped, never the raw key.
    assert wrapped.startswith(f"wrapped:v1:{NEW.key_id}:") and private.hex() not in wrapped


def test_two_sessions_have_two_key_pairs(database: Any) -> None:
    first, second = _session(), _session()
    assert create_session_key(first, [NEW]) != create_session_key(second, [NEW])
    sealed = seal(CARD, public_key=session_public_key(first) or b"", session_id=first)
    with pytest.raises(SealedValueUnreadable):
        open_sealed(sealed, private_key=session_private_key(second, [NEW]), session_id=first)


def test_concurrent_creations_agree_on_one_key(database: Any) -> None:
    session_id = _session()
    answers: list[bytes] = []

    def create() -> None:
        try:
            answers.append(create_session_key(session_id, [NEW]))
        finally:
            database.close()

    threads = [threading.Thread(target=create) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 4 and len(set(answers)) == 1
    assert session_public_key(session_id) == answers[0]


def test_a_destroyed_key_is_gone_and_what_was_sealed_before_stays_unreadable(database: Any) -> None:
    session_id = _session()
    public = create_session_key(session_id, [NEW])
    sealed = seal(CARD, public_key=public, session_id=session_id)

    assert destroy_session_key(session_id) is True
    assert destroy_session_key(session_id) is False  # safe to repeat
    _, wrapped, _, destroyed_at = _row(session_id)
    assert wrapped is None and destroyed_at is not None
    assert session_public_key(session_id) is None

    with pytest.raises(SessionKeyDestroyed, match="destroyed at") as raised:
        session_private_key(session_id, [NEW])
    # A kind of unreadable value, and a refusal (a message needing it is never retried).
    assert isinstance(raised.value, SealedValueUnreadable) and isinstance(raised.value, Refusal)
    # Nothing in the database opens the sealed value any more: no private key is left.
    assert database.execute_sql(
        "SELECT count(*) FROM session_data_keys WHERE session_id = %s AND wrapped_private IS NOT NULL",
        (session_id,),
    ).fetchone() == (0,)
    # Nor is the key made again: an erased session stays erased.
    with pytest.raises(SessionKeyDestroyed):
        create_session_key(session_id, [NEW])
    assert sealed.startswith("sealed:v1:")


def test_a_session_without_a_key_has_none_to_give(database: Any) -> None:
    session_id = _session()
    assert session_public_key(session_id) is None
    assert destroy_session_key(session_id) is False
    with pytest.raises(SessionKeyDestroyed, match="has no data key"):
        session_private_key(session_id, [NEW])


def test_the_wrong_deployment_key_does_not_open_a_session_s_key(database: Any) -> None:
    session_id = _session()
    create_session_key(session_id, [NEW])
    with pytest.raises(SealedValueUnreadable, match=f"deployment key {NEW.key_id}, which is not among"):
        session_private_key(session_id, [OLD])
    impostor = DeploymentKey(key_id=NEW.key_id, key=OLD.key)
    with pytest.raises(SealedValueUnreadable, match="does not open"):
        session_private_key(session_id, [impostor])


def test_a_rotation_re_wraps_every_live_key_under_the_new_deployment_key(database: Any) -> None:
    """Old and new keys given: every live key under the old one is re-wrapped (in batches), its
    sealed values open with only the new key afterwards, a destroyed key stays destroyed, and a
    second rotation finds nothing to do."""
    namespace = f"keys-{uuid.uuid4().hex[:8]}"
    sessions = [_session(namespace) for _ in range(5)]
    sealed = {
        session_id: seal(CARD, public_key=create_session_key(session_id, [OLD]), session_id=session_id)
        for session_id in sessions
    }
    erased = sessions.pop()
    destroy_session_key(erased)
    already_new = _session(namespace)
    create_session_key(already_new, [NEW])
    elsewhere = _session(f"{namespace}-other")  # another deployment's, on the same database
    create_session_key(elsewhere, [OLD])

    assert rotate([NEW, OLD], namespace=namespace, batch=2) == len(sessions)
    for session_id in sessions:
        assert wrapped_key_id(_row(session_id)[1]) == NEW.key_id
        private = session_private_key(session_id, [NEW])
        assert open_sealed(sealed[session_id], private_key=private, session_id=session_id) == CARD
    assert _row(erased)[1] is None
    with pytest.raises(SessionKeyDestroyed):
        session_private_key(erased, [NEW, OLD])
    assert wrapped_key_id(_row(elsewhere)[1]) == OLD.key_id
    assert rotate([NEW, OLD], namespace=namespace) == 0
    assert rotate([NEW], namespace=namespace) == 0


def test_a_rotation_without_the_previous_key_stops_naming_it_and_loses_nothing(database: Any) -> None:
    lost = DeploymentKey.generate()
    namespace = f"keys-{uuid.uuid4().hex[:8]}"
    session_id = _session(namespace)
    create_session_key(session_id, [lost])
    before = _row(session_id)
    with pytest.raises(SealedValueUnreadable, match=lost.key_id):
        rotate([NEW, OLD], namespace=namespace)
    assert _row(session_id) == before
    assert rotate([NEW, lost], namespace=namespace) == 1
    assert wrapped_key_id(_row(session_id)[1]) == NEW.key_id


def test_a_rotation_skips_a_key_another_transaction_holds_and_the_next_run_takes_it(database: Any) -> None:
    """Without downtime: a row locked elsewhere (a destroy in progress) is not waited on."""
    namespace = f"keys-{uuid.uuid4().hex[:8]}"
    session_id = _session(namespace)
    create_session_key(session_id, [OLD])
    locked = threading.Event()
    release = threading.Event()

    def hold() -> None:
        try:
            with database.atomic():
                database.execute_sql(
                    "SELECT 1 FROM session_data_keys WHERE session_id = %s FOR UPDATE", (session_id,)
                )
                locked.set()
                release.wait(10)
        finally:
            database.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        started = time.monotonic()
        assert rotate([NEW, OLD], namespace=namespace) == 0
        assert time.monotonic() - started < 3  # it did not wait for the lock
        assert wrapped_key_id(_row(session_id)[1]) == OLD.key_id
    finally:
        release.set()
        holder.join()
    assert rotate([NEW, OLD], namespace=namespace) == 1
    assert wrapped_key_id(_row(session_id)[1]) == NEW.key_id
