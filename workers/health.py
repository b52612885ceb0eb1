"""A worker's probes, on a port of its own (`SWITCHBOARD_WORKER_HEALTH_PORT`): what a process
manager asks before it stops the next worker of a rolling deploy, and what a container's
readiness and liveness probes read.

- `GET /healthz`: 200 while the process serves (liveness).
- `GET /readyz`: 200 `ready` while the worker takes messages and reaches Redis and a PostgreSQL
  primary; 503 `draining` from SIGTERM until it exits (it finishes the messages it holds and
  takes no new one), 503 `redis_unreachable` or `database_unreachable` while one is away.

The port is the worker's own, not the machine's metrics port (which one worker serves for all):
each worker on a machine needs its own, or 0 for any free one (printed when it is ready)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

logger = logging.getLogger(__name__)


class WorkerHealth:
    """The probes of one worker. `redis_reachable` and `database_answers` are asked on each
    `/readyz` (the first is the worker's Redis watch, the second a query on the probe's own
    connection, bounded by the connection's timeouts)."""

    def __init__(self, redis_reachable: Callable[[], bool], database_answers: Callable[[], bool]) -> None:
        self._redis_reachable = redis_reachable
        self._database_answers = database_answers
        self._draining = threading.Event()
        self._server: HTTPServer | None = None

    def readiness(self) -> str:
        """Why the worker is not ready, or `ready`."""
        if self._draining.is_set():
            return "draining"
        if not self._redis_reachable():
            return "redis_unreachable"
        if not self._database_answers():
            return "database_unreachable"
        return "ready"

    def drain(self) -> None:
        """The worker is stopping: not ready from now on."""
        self._draining.set()

    def serve(self, host: str, port: int) -> int:
        """Serve the probes on `host:port` (0: any free port); answers the port."""
        health = self

        class Handler(BaseHTTPRequestHandler):
            # A client that sends nothing holds the one probe thread no longer than this.
            timeout = 5

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/healthz":
                    self._answer(200, {"status": "ok"})
                elif path == "/readyz":
                    status = health.readiness()
                    self._answer(200 if status == "ready" else 503, {"status": status})
                else:
                    self._answer(404, {"error": {"code": "not_found", "message": f"no route {path}"}})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status == 503:
                    self.send_header("Retry-After", "1")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:
                return

        # One thread answers every probe, so the database check reuses one connection instead of
        # opening one per request.
        server = HTTPServer((host, port), Handler)
        self._server = server
        threading.Thread(target=server.serve_forever, name="worker-health", daemon=True).start()
        return int(server.server_address[1])

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
