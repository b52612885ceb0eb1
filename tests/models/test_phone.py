"""Phone calls in PostgreSQL: one call is one session and one answer, whoever asks and however
often; the answer's record and the sideband's attach commit together."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from models import phone
from models.sessions import locked_session
from pipeline.api.requests import RouteSpec
from pipeline.phone.sip import PhoneLine
from pipeline.platform.envelope import OpenSideband
from pipeline.session.state import Phase
from pipeline.session.wire import AdmissionBegun, CallAttached, HostInput, SessionCreated


def _ringing(call_id: str, namespace: str, request_id: str, dialled: str = "+18005551212") -> phone.Ringing:
    line = PhoneLine(caller="+14155550100", dialled=dialled)
    return phone.Ringing(f"wh_{request_id}", call_id, line, request_id, "gw1", namespace, maximum_calls=100)


def _session_for(route: phone.Route, line: PhoneLine) -> list[HostInput]:
    return [SessionCreated(instructions=route.spec["instructions"], phone=line), AdmissionBegun()]


def _namespace() -> str:
    namespace = f"phone-{uuid.uuid4().hex[:8]}"
    phone.add_route(
        namespace, RouteSpec.model_validate({"number": "+1800*", "session": {"instructions": "Hi."}})
    )
    return namespace


def test_a_call_is_decided_once_the_same_request_gets_the_same_answer_others_wait(database: Any) -> None:
    namespace = _namespace()
    call_id = f"rtc_{uuid.uuid4().hex}"

    first = phone.ring(_ringing(call_id, namespace, "req_a"), _session_for, 0.0)
    again = phone.ring(_ringing(call_id, namespace, "req_a"), _session_for, 0.0)
    other = phone.ring(_ringing(call_id, namespace, "req_b"), _session_for, 0.0)

    assert first.action == "accept" and first.session_id is not None
    assert (again.action, again.session_id, again.again) == ("accept", first.session_id, False)
    assert other.action == "busy"
    assert first.state is not None and first.state.phase is Phase.ADMITTING
    assert first.state.phone is not None and first.state.phone.route_id


def test_twenty_concurrent_deliveries_make_one_session(database: Any) -> None:
    namespace = _namespace()
    call_id = f"rtc_{uuid.uuid4().hex}"

    def ring(index: int) -> phone.Decision:
        from models.db import database as handle

        try:
            return phone.ring(_ringing(call_id, namespace, f"req_{index}"), _session_for, 0.0)
        finally:
            handle.close()

    with ThreadPoolExecutor(20) as pool:
        decisions = list(pool.map(ring, range(20)))

    accepted = [d for d in decisions if d.action == "accept"]
    assert len(accepted) == 1 and {d.action for d in decisions} <= {"accept", "busy"}
    sessions = database.execute_sql(
        "SELECT count(*) FROM sessions WHERE namespace = %s", (namespace,)
    ).fetchone()
    assert sessions[0] == 1


def test_an_unknown_number_is_rejected_once_and_counted(database: Any) -> None:
    namespace = _namespace()
    call_id = f"rtc_{uuid.uuid4().hex}"
    rejected = phone.ring(_ringing(call_id, namespace, "req_a", dialled="+4420"), _session_for, 0.0)
    assert (rejected.action, rejected.status_code, rejected.reason) == ("reject", 404, "unknown_number")
    assert phone.refusals(namespace) == {"unknown_number": 1}


def test_the_answer_and_the_attach_commit_together_and_only_once(database: Any) -> None:
    """The answer's record and the attach commit together, once; the attach's sideband
    directive names the call's route, which the gateway holding the sideband counts the call
    under (and keeps no longer than the sideband)."""
    namespace = _namespace()
    call_id = f"rtc_{uuid.uuid4().hex}"
    decision = phone.ring(_ringing(call_id, namespace, "req_a"), _session_for, 0.0)
    assert decision.session_id is not None

    attached = 0
    opened: list[OpenSideband] = []
    for claim in ("req_a", "req_a", "req_b"):
        session_id = phone.claimed_session(call_id, claim)
        if session_id is None:
            continue
        with locked_session(session_id) as session:
            if phone.mark_answered(session, call_id, claim, "accepted"):
                applied = session.apply_host(CallAttached(call_id=call_id, medium="sip"), 0.0)
                opened += [item for item in applied.to_gateway if isinstance(item, OpenSideband)]
                attached += 1

    assert attached == 1
    route_id = phone.phone_call(namespace, call_id)["route_id"]
    assert route_id.startswith("route_") and [item.route_id for item in opened] == [route_id]
    record = phone.phone_call(namespace, call_id)
    assert (record["outcome"], record["session_id"]) == ("accepted", decision.session_id)
    assert phone.ring(_ringing(call_id, namespace, "req_c"), _session_for, 0.0).action == "answered"
