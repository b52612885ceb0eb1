"""What a SIP call announces: the numbers its headers name are kept in their E.164 form when
they are numbers (so a route, the do-not-call list and an erasure compare them as any other
number), else as they came; and which route's number answers the number dialled."""

from __future__ import annotations

from pipeline.phone.sip import PhoneLine, line_of, line_out, route_matches


def test_the_numbers_a_call_names_are_kept_in_their_e164_form() -> None:
    """A caller, a number dialled and an asserted identity written with separators or a trunk
    prefix inside are kept as E.164; a name or a number without its country code as it came."""
    line = line_of(
        (
            ("From", '"Ada" <sip:+44-020-7946-0177@carrier.example.com>;tag=1'),
            ("To", "<sip:+4402079460000@sip.example.com>"),
            ("P-Asserted-Identity", "<tel:+44.(0)20.7946.0177>"),
        ),
        "To",
    )
    assert (line.caller, line.dialled, line.asserted_identity) == (
        "+442079460177",
        "+442079460000",
        "+442079460177",
    )
    unknown = line_of((("From", "<sip:anonymous@anonymous.invalid>"), ("To", "<sip:2079460000@pbx>")), "To")
    assert (unknown.caller, unknown.dialled) == ("anonymous", "2079460000")


def test_a_route_s_number_answers_the_number_dialled_in_any_spelling() -> None:
    """A route stored with the trunk prefix inside its number (before numbers were kept in one
    spelling) still answers its calls; a prefix and `*` answer as before."""
    assert route_matches("+4402079460000", "+442079460000")
    assert route_matches("+442079460000", "+442079460000")
    assert not route_matches("+442079460001", "+442079460000")
    assert route_matches("+4420*", "+442079460000") and route_matches("*", "anonymous")
    assert route_matches("2079460000", "2079460000")  # a SIP user without a `+`, as written


def test_the_line_of_a_call_going_out_is_the_number_dialled_and_its_keys() -> None:
    """A call going out is on a line to the number dialled, with what its keypad presses do."""
    keys = {"9": "opt_out"}

    line = line_out("+12125550100", keys)

    assert line == PhoneLine(dialled="+12125550100", keys={"9": "opt_out"})
    assert line.keys is not keys
