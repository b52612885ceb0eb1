"""A local provider speaking the OpenAI Realtime protocol, scripted by call scripts.

`Simulator` serves call control (REST) and the sideband (WebSocket); `oracle.wire_errors` is the
strict check every event it sends, and every control a host sends it, must pass. The Live API
(GPT-Live) is a second mode on the same ports (`simulator.live`, checked by `live_oracle`).
"""

from simulator.server import Simulator

__all__ = ["Simulator"]
