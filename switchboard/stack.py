"""Run Switchboard's processes side by side: simulator, gateway and workers, each a real
process, as the demo, `replay`, the benchmarks and the end-to-end tests need them."""

from __future__ import annotations

import base64
import functools
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.privacy.sealing import DeploymentKey

# Process start-up (imports, connections) takes about a second; a loaded CI box is slower.
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0

_READY = re.compile(r"(\w+) ready(.*)")


# Why a call its stack's command left open was ended when the command stopped.
HOST_STOPPED = "host_stopped"


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[str]
    ready: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def kill(self) -> None:
        """kill -9: no cleanup, no goodbye."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()


class Stack:
    """A simulator, a gateway and N workers on the given services."""

    def __init__(
        self,
        database_url: str,
        redis_url: str,
        *,
        namespace: str | None = None,
        gateway_id: str | None = None,
        api_token: str = "switchboard-dev-token",
        webhook_secret: str | None = None,
        simulator_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
        echo: Callable[[str, str], None] | None = None,
        ends_its_calls: bool = False,
    ) -> None:
        self.namespace = namespace or f"sb-{uuid.uuid4().hex[:8]}"
        # A command's stack (demo, eval, replay) ends the calls still open when it stops.
        self.ends_its_calls = ends_its_calls
        self.gateway_id = gateway_id or f"gw-{uuid.uuid4().hex[:8]}"
        self.api_token = api_token
        # The secret the simulated provider signs phone calls' webhooks with.
        self.webhook_secret = webhook_secret or "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
        # The workers' shared metrics directory: the stack's own, gone with it.
        self._metrics_dir = tempfile.TemporaryDirectory(prefix="switchboard-metrics-")
        # This process's environment passes through whole: the standard OTEL_* variables (an
        # OTLP endpoint turns traces on, switchboard/tracing.py) reach every process of the stack.
        self.env = {
            **os.environ,
            **(extra_env or {}),
            "SWITCHBOARD_DATABASE_URL": database_url,
            "SWITCHBOARD_REDIS_URL": redis_url,
            "SWITCHBOARD_BROKER_NAMESPACE": self.namespace,
            "SWITCHBOARD_GATEWAY_ID": self.gateway_id,
            "SWITCHBOARD_API_TOKEN": api_token,
            "SWITCHBOARD_WEBHOOK_SECRET": self.webhook_secret,
            "SWITCHBOARD_PROVIDER": "simulated",
            "PYTHONUNBUFFERED": "1",
            # A stack's gateway stops at once unless a test asks it to drain (a single gateway
            # would wait the whole drain for a peer that never comes).
            "SWITCHBOARD_DRAIN_SECONDS": (extra_env or {}).get("SWITCHBOARD_DRAIN_SECONDS", "0"),
        }
        # Every process of a stack shares one deployment key: the one given (in the environment
        # or extra_env), else one of this Python process's own, the same for all its stacks.
        self.env.setdefault("SWITCHBOARD_DATA_KEY", process_data_key())
        if "SWITCHBOARD_METRICS_DIR" not in (extra_env or {}):
            self.env["SWITCHBOARD_METRICS_DIR"] = self._metrics_dir.name
        self._simulator_args = simulator_args
        self._echo = echo
        self.simulator: Process | None = None
        self.gateway: Process | None = None
        self.extra_gateways: list[Process] = []
        self.workers: list[Process] = []
        # Every process started, from the moment it is: a start interrupted half way (a signal,
        # a process that never became ready) leaves none of them running after `stop`.
        self._launched: list[Process] = []

    @property
    def api_url(self) -> str:
        assert self.gateway is not None
        return f"http://127.0.0.1:{self.gateway.ready['http']}"

    @property
    def live_url(self) -> str:
        assert self.gateway is not None
        # The live stream is served on the API's own port.
        return f"ws://127.0.0.1:{self.gateway.ready['http']}"

    @property
    def webhook_url(self) -> str:
        """Where the provider delivers the SIP door's webhooks."""
        return f"{self.api_url}/v1/webhooks/openai"

    @property
    def simulator_url(self) -> str:
        assert self.simulator is not None
        return self.simulator.ready["http"]

    def start(self, workers: int = 1) -> Stack:
        self.simulator = self._spawn(
            "simulator",
            [sys.executable, "-m", "simulator", "--http-port", "0", "--ws-port", "0", *self._simulator_args],
        )
        self.env["SWITCHBOARD_PROVIDER_BASE_URL"] = self.simulator.ready["http"]
        self.env["SWITCHBOARD_PROVIDER_WS_URL"] = self.simulator.ready["ws"]
        # The workers and the gateway need only the simulator: they start side by side (each
        # spends about a second importing), and the stack is ready when every one of them is.
        launched = [self._launch(self._worker_name(), self._worker_command()) for _ in range(workers)]
        self.workers += [process for process, _ready in launched]
        launched.append(self._launch("gateway", self._gateway_command()))
        self.gateway = launched[-1][0]
        for process, ready in launched:
            self._await(process, ready)
        return self

    def add_gateway(self, gateway_id: str | None = None) -> Process:
        """Another gateway beside the first, with its own id (its own control queue)."""
        name = gateway_id or f"gw-{uuid.uuid4().hex[:8]}"
        env = {**self.env, "SWITCHBOARD_GATEWAY_ID": name}
        process = self._spawn(f"gateway.{name}", self._gateway_command(), env=env)
        self.extra_gateways.append(process)
        return process

    def add_worker(self, *extra: str, env: dict[str, str] | None = None) -> Process:
        """Another worker on the stack's queues; `env` adds to the stack's environment."""
        worker = self._spawn(
            self._worker_name(), self._worker_command(*extra), env={**self.env, **env} if env else None
        )
        self.workers.append(worker)
        return worker

    def _worker_name(self) -> str:
        return f"worker.{len(self.workers) + 1}"

    def _worker_command(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "switchboard", "worker", *extra]

    def _gateway_command(self) -> list[str]:
        return [sys.executable, "-m", "switchboard", "gateway", "--port", "0"]

    def stop(self) -> None:
        """Stop every process: each is told at once (gateways first, the simulator last), and
        each is waited for; one that does not exit within STOP_TIMEOUT_S is killed. A stack that
        `ends_its_calls` first ends the calls still open, through its own API."""
        if self.ends_its_calls:
            self._end_open_calls()
        named = [self.gateway, *self.extra_gateways, *self.workers, self.simulator]
        processes = [*named, *(process for process in self._launched if process not in named)]
        running = [process for process in processes if process is not None and process.popen.poll() is None]
        for process in running:
            process.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in running:
            try:
                process.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
        self._metrics_dir.cleanup()

    def _end_open_calls(self) -> None:
        """End every session of the stack's deployment not over yet (`host_stopped`): once its
        processes are gone nothing would, and an interrupted demo, eval or replay left calls
        `listening` for ever. Best effort: a stack whose gateway or workers are gone already
        ends nothing."""
        if self.gateway is None or self.gateway.popen.poll() is not None or not self.workers:
            return
        from switchboard.client import Client

        client = Client(self.api_url, self.api_token)
        try:
            # One read of every status: a call moves from admitting to listening between two reads.
            listed = client.request("GET", "/v1/sessions?limit=500", timeout_s=10)[1]
            sessions = listed.get("sessions", []) if isinstance(listed, dict) else []
            for session in (each for each in sessions if each["status"] not in ("ended", "failed")):
                client.request(
                    "POST", f"/v1/sessions/{session['id']}/end", {"reason": HOST_STOPPED}, timeout_s=15
                )
        except OSError:
            return  # the gateway went meanwhile: nothing more can be ended

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Process:
        process, ready = self._launch(name, command, env)
        self._await(process, ready)
        return process

    def _launch(
        self, name: str, command: list[str], env: dict[str, str] | None = None
    ) -> tuple[Process, threading.Event]:
        popen = subprocess.Popen(
            command,
            env=env or self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            # A session of its own: a Ctrl-C at the terminal reaches the command that started the
            # stack (demo, eval, replay), which stops it in order (its calls ended first), not
            # every process at once mid-call.
            start_new_session=True,
        )
        process = Process(name, popen)
        self._launched.append(process)
        ready = threading.Event()
        threading.Thread(target=self._read, args=(process, ready), daemon=True).start()
        return process, ready

    def _await(self, process: Process, ready: threading.Event) -> None:
        if not ready.wait(READY_TIMEOUT_S) or process.popen.poll() is not None:
            process.kill()
            self.stop()
            tail = "\n".join(process.lines[-30:])
            raise RuntimeError(f"{process.name} did not become ready:\n{tail}")

    def _read(self, process: Process, ready: threading.Event) -> None:
        assert process.popen.stdout is not None
        for raw in process.popen.stdout:
            line = raw.rstrip("\n")
            process.lines.append(line)
            if self._echo is not None:
                self._echo(process.name, line)
            match = _READY.search(line)
            if match and not ready.is_set():
                process.ready = dict(part.split("=", 1) for part in match.group(2).split() if "=" in part)
                ready.set()
        ready.set()


@functools.cache
def process_data_key() -> str:
    """A deployment key made for this Python process (a test run, a benchmark): its stacks'
    processes seal and wrap under it when no SWITCHBOARD_DATA_KEY is given."""
    return DeploymentKey.generate().text


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()
