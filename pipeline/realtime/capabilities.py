"""What the Realtime API can do: everything Switchboard asks of a provider but delegations and
a seconds budget, which are Live's."""

from __future__ import annotations

from pipeline.call.capabilities import Ability, Capabilities

REALTIME = Capabilities(
    name="realtime",
    interrupt=True,
    typed_caller_text=True,
    tools=True,
    take_over=True,
    compaction=True,
    delegations=False,
    usage_in_seconds=False,
    idle_silences=True,
    outbound_calls=False,
    responses=True,
    append_tokens=None,
    reasons={
        Ability.DELEGATIONS: 'live settings are for a session with "provider": "live"',
        Ability.OUTBOUND_CALLS: (
            "the Realtime API places no calls: its calls come in (WebRTC, or SIP to its number); "
            'place outbound calls on a session with "provider": "live"'
        ),
        Ability.USAGE_IN_SECONDS: (
            "limits.usage_budget_seconds is a Live budget; a Realtime one is usage_budget_tokens"
        ),
    },
)
