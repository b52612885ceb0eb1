"""`SidebandsHeld`: the calls whose sideband this gateway holds, as the API and the metrics read
them (the directives open and close the sidebands; this only looks)."""

from __future__ import annotations

import time
from typing import Any

from gateway.sideband import SidebandSocket
from pipeline.privacy.boundary import PrivateSideband, Redactor


class SidebandsHeld:
    """The sidebands of the calls held here, by session, shared with the directives; each
    question answers None for a call held elsewhere, or by nobody."""

    def __init__(self, sockets: dict[str, SidebandSocket]) -> None:
        self._sockets = sockets

    def generation(self, session_id: str) -> int | None:
        """The generation of the call's sideband."""
        socket = self._sockets.get(session_id)
        return socket.generation if socket is not None else None

    def playback(self, session_id: str) -> dict[str, Any] | None:
        """What the caller is hearing now (None also when nothing plays)."""
        socket = self._sockets.get(session_id)
        return socket.playback(time.monotonic()) if socket is not None else None

    def redactor(self, session_id: str) -> Redactor | None:
        """The redaction of the call's privacy boundary: what an operator types into the call is
        masked as its caller's words are."""
        socket = self._sockets.get(session_id)
        boundary = socket.sideband if socket is not None else None
        return boundary.redactor if isinstance(boundary, PrivateSideband) else None

    def by_route(self) -> dict[str, int]:
        """How many calls are held here, by route. The route travels with the sideband's
        directive and lives on its socket, so it goes when the socket goes (however the call
        ended, or moved to a peer) and a peer that takes a call over counts it under its route
        too."""
        counted: dict[str, int] = {}
        for socket in list(self._sockets.values()):
            counted[socket.route_id] = counted.get(socket.route_id, 0) + 1
        return counted
