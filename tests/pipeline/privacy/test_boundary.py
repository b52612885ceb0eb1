"""The privacy boundary, driven without a socket: a wing's actions in, redacted actions out."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pipeline.call.sideband import Action, Delta, Final, Incident, Submit, bad_frame
from pipeline.live.sideband import LiveSideband
from pipeline.privacy.boundary import Keypad, PrivateSideband, Redactor, Sealing
from pipeline.privacy.detect import ALL_KINDS, Kind, could_hold_any, redact
from pipeline.privacy.policy import PrivacyPolicy
from pipeline.privacy.sealing import new_session_key_pair, open_sealed
from pipeline.realtime.sideband import RealtimeSideband
from tests.pipeline.events import function_call

CARD = "4111 1111 1111 1111"
CARD_MASK = "•••• •••• •••• 1111"
SSN = "123-45-6789"
EMAIL = "john.smith@example.com"
T0 = 1_700_000_000.0

EVERY_KIND = Redactor(ALL_KINDS)


def _clear_values(text: str) -> list[str]:
    return [value for value in (CARD, "4111111111111111", SSN, EMAIL) if value in text]


class _Scripted:
    """A wing that answers what it is told to (the boundary is what is under test)."""

    tick_every_s: float | None = None
    closed_by_provider_within_s: float | None = 3.0

    def __init__(self) -> None:
        self.next: list[Action] = []

    def receive(self, frame: str | bytes, received_at: float, now: float) -> list[Action]:
        answered, self.next = self.next, []
        return answered

    def tick(self, at: float) -> list[Action]:
        return []

    def close(self, at: float) -> list[Action]:
        return []

    def playback(self, now: float) -> dict[str, Any] | None:
        return {"item_id": "item_1", "played_ms": 5}


def test_an_event_is_returned_as_it_is_when_nobody_said_a_value() -> None:
    event = {
        "type": "response.done",
        "response": {"id": "resp_1", "output": [{"content": [{"text": "Hello"}]}]},
    }
    assert EVERY_KIND.event(event) is event


def test_every_string_a_person_said_is_masked_and_the_protocol_s_own_are_kept() -> None:
    event = {
        "type": "conversation.item.input_audio_transcription.completed",
        "event_id": "event_4111111111111111",
        "item_id": "item_4111111111111111",
        "transcript": f"my card is {CARD} and my e-mail {EMAIL}",
        "nested": [{"text": f"ssn {SSN}"}, 4, None, {"name": "4111111111111111"}],
    }
    redacted = EVERY_KIND.event(event)
    assert redacted["transcript"] == f"my card is {CARD_MASK} and my e-mail j•••@example.com"
    assert redacted["nested"][0] == {"text": "ssn •••-••-6789"}
    # Ids and names are the protocol's: the workers match on them.
    assert redacted["event_id"] == event["event_id"] and redacted["item_id"] == event["item_id"]
    assert redacted["nested"][3] == {"name": "4111111111111111"}
    assert redacted["nested"][1:3] == [4, None]
    # The original is not changed (the wing may still hold it).
    assert event["transcript"].startswith("my card is 4111")


def test_a_function_call_s_arguments_stay_json_with_each_value_masked() -> None:
    arguments = json.dumps({"card_number": CARD, "digits": 4111111111111111, "count": 2, "note": "hi"})
    event = {"type": "response.function_call_arguments.done", "call_id": "call_1", "arguments": arguments}
    redacted = json.loads(EVERY_KIND.event(event)["arguments"])
    assert redacted == {"card_number": CARD_MASK, "digits": "•••• •••• •••• 1111", "count": 2, "note": "hi"}
    unparsable = {"type": "x", "arguments": f'{{"card": "{CARD}"'}
    assert CARD not in EVERY_KIND.event(unparsable)["arguments"]


def test_the_policy_names_what_else_is_masked_and_cards_and_ssns_always_are() -> None:
    cards_only = Redactor(PrivacyPolicy().kinds)
    said = f"{CARD}, {SSN}, {EMAIL}"
    assert cards_only.text(said) == f"{CARD_MASK}, •••-••-6789, {EMAIL}"
    assert Redactor(PrivacyPolicy(redact=(Kind.EMAIL,)).kinds).text(said).endswith("j•••@example.com")


def test_a_value_said_over_several_fragments_is_masked_in_them_and_other_fragments_are_kept() -> None:
    pieces = [
        "Hi",
        " there.",
        " my card is four one one one",
        " one one one one",
        " one one one one",
        " one one one one",
        " thanks",
    ]
    fragments = [
        {
            "speaker": "caller",
            "event_id": f"ev_{index}",
            "start_ms": index * 200,
            "end_ms": index * 200 + 200,
            "text": text,
        }
        for index, text in enumerate(pieces)
    ]
    event = {"type": "switchboard.live_transcript", "text": "".join(pieces), "fragments": fragments}
    redacted = EVERY_KIND.event(event)
    texts = [fragment["text"] for fragment in redacted["fragments"]]
    assert texts[:2] == ["Hi", " there."]
    assert redacted["fragments"][0] is fragments[0]
    assert texts[-1] == " thanks"
    joined = "".join(texts)
    assert "one one one" not in joined and CARD_MASK in joined
    assert [f["event_id"] for f in redacted["fragments"]] == [f["event_id"] for f in fragments]
    assert CARD_MASK in redacted["text"]


@given(st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=8))
def test_a_card_split_anywhere_over_fragments_is_never_left_readable(cuts: list[int]) -> None:
    said = f"please take {CARD} now"
    pieces, position = [], 0
    for cut in cuts:
        pieces.append(said[position : position + cut])
        position += cut
    pieces.append(said[position:])
    fragments = [{"speaker": "caller", "event_id": f"e{i}", "text": text} for i, text in enumerate(pieces)]
    redacted = EVERY_KIND.event({"type": "t", "fragments": fragments})["fragments"]
    joined = "".join(fragment["text"] for fragment in redacted)
    assert redact(joined) == joined
    assert "1111 1111" not in joined.replace("•••• •••• •••• 1111", "")
    assert "please take" in joined and joined.endswith("now")


def test_a_word_split_over_fragments_that_touch_on_the_timeline_is_read_whole() -> None:
    """Live splits a word over two deltas with no pause between ("fo", "ur"): the fragments are
    read as the transcript's text reads them, so a card said in digit words split that way is
    masked in the fragments too, not read as "fo ur" and left whole."""
    said = "card four five three two zero one five one one two eight three zero three six six ok"
    pieces = [said[index : index + 3] for index in range(0, len(said), 3)]
    fragments = [
        {"speaker": "caller", "event_id": f"e{i}", "start_ms": i * 200, "end_ms": i * 200 + 200, "text": text}
        for i, text in enumerate(pieces)
    ]
    redacted = EVERY_KIND.event({"type": "t", "text": said, "fragments": fragments})
    joined = "".join(fragment["text"] for fragment in redacted["fragments"])
    assert joined == redacted["text"] == "card •••• •••• •••• 0366 ok"
    # Without a timeline, fragments meeting with no space are two words, as before.
    untimed = [{"text": "card 4111 1111 1111 1111"}, {"text": "5 ok"}]
    [first, _] = EVERY_KIND.event({"type": "t", "fragments": untimed})["fragments"]
    assert first["text"] == f"card {CARD_MASK}"


def test_a_quote_cut_short_masks_the_start_of_a_value_it_cut() -> None:
    # "card" is too short a word to be a barrier: what follows "transcript" may be a value.
    quoted = EVERY_KIND.quote('{"transcript": "my card is 4111 1111 11', cut=True)
    assert quoted == '{"transcript": "•• •••• •• •••• •••• ••'
    assert EVERY_KIND.quote("nothing sensitive here whatsoever", cut=True).startswith(
        "nothing sensitive here"
    )
    assert EVERY_KIND.quote(f"card {CARD}", cut=False) == f"card {CARD_MASK}"


def _private(inner: Any, watched: bool = True) -> PrivateSideband:
    return PrivateSideband(inner, Redactor(ALL_KINDS), is_watched=lambda: watched)


def test_submits_finals_and_incidents_are_redacted_and_the_wing_s_rules_kept() -> None:
    inner = _Scripted()
    boundary = _private(inner)
    assert boundary.closed_by_provider_within_s == 3.0
    assert boundary.playback(0.0) == {"item_id": "item_1", "played_ms": 5}
    frame = f'{{"type": "x", "transcript": "{CARD}"}}'
    inner.next = [
        Submit({"type": "x", "transcript": CARD}, T0),
        Final("user", "item_1", f"it is {CARD}"),
        bad_frame(frame * 20, "malformed_frame", f"cannot read {EMAIL}"),
    ]
    submitted, final, incident = boundary.receive("frame", T0, 0.0)
    assert isinstance(submitted, Submit) and submitted.event["transcript"] == CARD_MASK
    assert submitted.received_at == T0
    assert isinstance(final, Final) and final.text == f"it is {CARD_MASK}"
    assert isinstance(incident, Incident) and incident.summary == "cannot read j•••@example.com"
    assert _clear_values(json.dumps(incident.context, ensure_ascii=False)) == []
    assert incident.context["bytes"] == len(frame * 20)


def test_a_watched_line_s_deltas_hold_back_a_card_until_it_is_one() -> None:
    inner = _Scripted()
    boundary = _private(inner)
    shown: list[str] = []
    for delta in [
        "my number is",
        " four one one one",
        " one one one one",
        " one one one one",
        " one one one one",
        " okay thanks",
    ]:
        inner.next = [Delta("user", "item_1", delta)]
        shown.extend(action.text for action in boundary.receive("f", T0, 0.0) if isinstance(action, Delta))
    inner.next = [
        Final(
            "user",
            "item_1",
            "my number is four one one one one one one one one one one one one one one one okay thanks",
        )
    ]
    actions = boundary.receive("f", T0, 0.0)
    shown.extend(action.text for action in actions if isinstance(action, Delta))
    assert "".join(shown) == "my number is •••• •••• •••• 1111 okay thanks"
    assert (
        isinstance(actions[-1], Final) and actions[-1].text == "my number is •••• •••• •••• 1111 okay thanks"
    )


def test_a_line_begun_while_nobody_watched_streams_nothing_but_its_final() -> None:
    watched = [False]
    inner = _Scripted()
    boundary = PrivateSideband(inner, Redactor(ALL_KINDS), is_watched=lambda: watched[0])
    inner.next = [Delta("user", "item_1", "four one one one")]
    assert boundary.receive("f", T0, 0.0) == []
    watched[0] = True
    inner.next = [Delta("user", "item_1", " one one one one")]
    assert boundary.receive("f", T0, 0.0) == []
    inner.next = [Final("user", "item_1", CARD)]
    assert boundary.receive("f", T0, 0.0) == [Final("user", "item_1", CARD_MASK)]


def test_the_realtime_wing_behind_the_boundary_logs_no_clear_value() -> None:
    boundary = _private(RealtimeSideband())
    frames = [
        {
            "type": "conversation.item.input_audio_transcription.delta",
            "item_id": "item_1",
            "delta": f"card {CARD} ",
        },
        {
            "type": "conversation.item.input_audio_transcription.completed",
            "event_id": "ev_2",
            "item_id": "item_1",
            "transcript": f"card {CARD} and {SSN}",
        },
        function_call("call_1", "resp_1", name="pay", arguments=json.dumps({"card": CARD})),
        # A line another client typed into the conversation is kept, so it is masked too.
        {
            "type": "conversation.item.added",
            "event_id": "ev_4",
            "item": {
                "id": "item_2",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"my card is {CARD}"}],
            },
        },
    ]
    actions = [action for frame in frames for action in boundary.receive(json.dumps(frame), T0, 0.0)]
    assert _clear_values(repr(actions)) == []
    submitted = [action.event for action in actions if isinstance(action, Submit)]
    assert [event["type"] for event in submitted] == [frames[1]["type"], frames[2]["type"], frames[3]["type"]]
    assert json.loads(submitted[1]["arguments"]) == {"card": CARD_MASK}
    assert submitted[2]["item"]["content"][0]["text"] == f"my card is {CARD_MASK}"
    assert Final("user", "item_2", f"my card is {CARD_MASK}") in actions


def test_the_live_wing_behind_the_boundary_writes_down_no_clear_value() -> None:
    boundary = _private(LiveSideband())
    words = ["Hi there.", " my card is", " 4111", " 1111", " 1111", " 1111.", " And my SSN is 123-45-6789."]
    actions: list[Action] = []
    for index, word in enumerate(words):
        frame = {
            "type": "session.input_transcript.delta",
            "event_id": f"ev_{index}",
            "start_ms": index * 200,
            "end_ms": index * 200 + 200,
            "delta": word,
        }
        actions += boundary.receive(json.dumps(frame), T0 + index * 0.2, 0.0)
    actions += boundary.close(T0 + 10)
    assert _clear_values(repr(actions)) == []
    assert "1111 1111" not in repr(actions).replace(CARD_MASK, "")
    written = [action.event for action in actions if isinstance(action, Submit)]
    assert written[0]["fragments"][0]["text"] == "Hi there."
    said = " ".join(event["text"] for event in written)
    assert CARD_MASK in said and "•••-••-6789" in said


def test_what_a_cancelled_response_had_begun_to_say_of_a_value_is_masked() -> None:
    """A barge-in cancels a response mid-word: its incomplete items end in what was said so far,
    which may be the first digits of a card that no detector can call a card yet."""
    event = {
        "type": "response.done",
        "response": {
            "id": "resp_1",
            "status": "cancelled",
            "output": [
                {"type": "function_call", "status": "incomplete", "arguments": '{"text": "card 4532 0151 '},
                {
                    "type": "message",
                    "status": "incomplete",
                    "content": [{"transcript": "Certainly, your card number ends in 45"}],
                },
                {
                    "type": "message",
                    "status": "incomplete",
                    "content": [{"transcript": "Sure, I can help with"}],
                },
                {"type": "message", "status": "completed", "content": [{"transcript": "order 4417"}]},
            ],
        },
    }
    output = EVERY_KIND.event(event)["response"]["output"]
    assert "4532" not in output[0]["arguments"] and "0151" not in output[0]["arguments"]
    assert output[1]["content"][0]["transcript"] == "Certainly, your card number •••• •• ••"
    assert output[2] is event["response"]["output"][2]
    assert output[3]["content"][0]["transcript"] == "order 4417"


def test_a_number_keyed_in_is_logged_masked_and_a_menu_s_choice_pressed_alone_is_kept() -> None:
    inner = _Scripted()
    boundary = PrivateSideband(
        inner,
        Redactor(ALL_KINDS),
        is_watched=lambda: False,
        keypad=Keypad("input_audio_buffer.dtmf_event_received", frozenset({"0"})),
    )

    def press(key: str, at: float) -> str:
        inner.next = [
            Submit({"type": "input_audio_buffer.dtmf_event_received", "event": key, "received_at": 1}, at)
        ]
        [submitted] = boundary.receive("f", at, 0.0)
        assert isinstance(submitted, Submit)
        return str(submitted.event["event"])

    # The menu's key, pressed on its own, means what the route says.
    assert press("0", T0) == "0"
    # A card keyed in: every digit masked, the mapped ones too once they are part of a run.
    typed = [press(digit, T0 + 10 + index * 0.3) for index, digit in enumerate("4111111111111111" + "0")]
    assert typed == ["•"] * 17
    # A pause between groups of digits is still the same number.
    assert press("0", T0 + 10 + 17 * 0.3 + 4.0) == "•"
    assert press("#", T0 + 20) == "#"
    assert press("0", T0 + 30) == "0"
    # Another wing's events are not key presses.
    inner.next = [Submit({"type": "other", "event": "4"}, T0 + 40)]
    [other] = boundary.receive("f", T0 + 40, 0.0)
    assert isinstance(other, Submit) and other.event["event"] == "4"


PRESS = "input_audio_buffer.dtmf_event_received"


def _collecting_boundary(public: bytes | None) -> tuple[_Scripted, PrivateSideband]:
    inner = _Scripted()
    sealing = Sealing("sess_1", public, {"pay": frozenset({"card"})})
    boundary = PrivateSideband(
        inner, Redactor(ALL_KINDS, sealing=sealing), is_watched=lambda: False, keypad=Keypad(PRESS)
    )
    return inner, boundary


def _press(inner: _Scripted, boundary: PrivateSideband, key: str, at: float = T0) -> list[Action]:
    inner.next = [Submit({"type": PRESS, "event": key, "received_at": 1}, at)]
    return boundary.receive("f", at, 0.0)


def test_a_collection_keeps_every_press_and_hands_over_one_sealed_entry() -> None:
    private, public = new_session_key_pair()
    inner, boundary = _collecting_boundary(public)
    boundary.collect(1, 19, "#")

    # Not one press leaves while the caller types, nor * (no part of the entry).
    assert [action for key in "4111*111111111111" for action in _press(inner, boundary, key)] == []
    [entry] = _press(inner, boundary, "#", T0 + 9)

    assert isinstance(entry, Submit) and entry.received_at == T0 + 9
    assert {key: entry.event[key] for key in ("type", "number", "count", "ended_by")} == {
        "type": "switchboard.digits_collected",
        "number": 1,
        "count": 16,
        "ended_by": "end",
    }
    assert "4111111111111111" not in json.dumps(entry.event)
    assert open_sealed(entry.event["digits"], private_key=private, session_id="sess_1") == "4111111111111111"
    # The collection is over: the next press is an ordinary one, masked.
    [after] = _press(inner, boundary, "5", T0 + 30)
    assert isinstance(after, Submit) and after.event["event"] == "•"


def test_a_collection_ends_at_its_last_digit_and_one_stopped_forgets_what_it_held() -> None:
    private, public = new_session_key_pair()
    inner, boundary = _collecting_boundary(public)
    boundary.collect(2, 4, None)
    assert [a for key in "123" for a in _press(inner, boundary, key)] == []
    [entry] = _press(inner, boundary, "4")
    assert isinstance(entry, Submit) and entry.event["count"] == 4 and entry.event["ended_by"] == "max"
    assert open_sealed(entry.event["digits"], private_key=private, session_id="sess_1") == "1234"

    boundary.collect(3, 19, "#")
    boundary.collect(2, 19, "#")  # an older directive, late, changes nothing
    assert boundary.collecting == 3
    assert _press(inner, boundary, "9") == []
    boundary.stop_collecting(3)
    assert boundary.collecting is None
    # What was typed for it never leaves: the end key is an ordinary press now.
    [hash_key] = _press(inner, boundary, "#")
    assert isinstance(hash_key, Submit) and hash_key.event["type"] == PRESS


def test_a_collection_on_a_session_without_a_key_hands_over_its_count_only() -> None:
    inner, boundary = _collecting_boundary(None)
    boundary.collect(1, 19, "#")
    for key in "4111111111111111":
        _press(inner, boundary, key)

    [entry] = _press(inner, boundary, "#")

    assert isinstance(entry, Submit) and entry.event["count"] == 16 and entry.event["digits"] is None


def test_a_tool_s_sensitive_parameter_is_sealed_for_its_session_and_masked_without_a_key() -> None:
    private, public = new_session_key_pair()
    sealing = Sealing("sess_1", public, {"pay": frozenset({"card"})})
    redactor = Redactor(ALL_KINDS, sealing=sealing)
    arguments = json.dumps({"card": CARD, "note": f"for {EMAIL}", "cents": 1250})
    event = {
        "type": "response.done",
        "response": {
            "output": [{"type": "function_call", "name": "pay", "call_id": "c1", "arguments": arguments}]
        },
    }
    [item] = redactor.event(event)["response"]["output"]
    kept = json.loads(item["arguments"])
    assert kept["card"].startswith("sealed:v1:") and CARD not in item["arguments"]
    assert open_sealed(kept["card"], private_key=private, session_id="sess_1") == CARD
    assert kept["note"] == "for j•••@example.com" and kept["cents"] == 1250
    # Another tool's parameter of that name is only redacted; a session without a key masks it whole.
    other = json.loads(redactor.event({"type": "x", "name": "echo", "arguments": arguments})["arguments"])
    assert other["card"] == CARD_MASK
    keyless = Redactor(ALL_KINDS, sealing=Sealing("sess_1", None, {"pay": frozenset({"card"})}))
    masked = json.loads(keyless.event({"type": "x", "name": "pay", "arguments": arguments})["arguments"])
    assert masked["card"] == "•••• •••• •••• ••••"


_PIECES = st.sampled_from(
    [
        "four",
        "one",
        "double",
        "triple",
        "oh",
        "nine",
        "@",
        "x.y",
        "-",
        " ",
        ",",
        "order",
        "+1",
        "ssn",
        "DE89",
        "é",
    ]
)


@given(
    st.lists(st.one_of(_PIECES, st.text(alphabet="0123456789", min_size=1, max_size=5)), max_size=12),
    st.sets(st.sampled_from(sorted(ALL_KINDS)), min_size=1),
)
def test_a_text_passed_over_for_too_few_digits_is_one_redaction_leaves_as_it_is(
    pieces: list[str], kinds: set[Kind]
) -> None:
    """`could_hold_any` only ever skips a text that `redact` would not change."""
    text = "".join(pieces)
    if not could_hold_any(text, frozenset(kinds)):
        assert redact(text, kinds) == text
