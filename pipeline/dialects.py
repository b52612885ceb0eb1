"""Which wing a session's provider is: the one place in the pipeline that maps a provider to
what it can do. The neutral rules ask `capabilities_of` and never which provider they serve; a
third provider is a third wing and one more line here."""

from __future__ import annotations

from pipeline.call.dialect import Capabilities
from pipeline.live.dialect import LIVE
from pipeline.realtime.dialect import REALTIME
from pipeline.state import Provider, SessionState

CAPABILITIES: dict[Provider, Capabilities] = {Provider.REALTIME: REALTIME, Provider.LIVE: LIVE}


def capabilities_of(state: SessionState) -> Capabilities:
    """What the session's provider can do."""
    return CAPABILITIES[state.provider]


def capabilities_for(provider: str) -> Capabilities:
    """What the provider a session spec names can do."""
    return CAPABILITIES[Provider(provider)]
