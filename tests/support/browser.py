"""Headless Chromium driven over the DevTools protocol (CDP) with the websockets library: open a
page, run JavaScript in it, wait for what it shows, take screenshots. Debian's `chromium` (the
project's `make test` installs it when missing); nothing downloads a browser build."""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

# The flags the machine's browser needs here: no sandbox as root, and no calls home (this
# network refuses them, many at a time, and Chromium retries them at every start).
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1400,1000",
)
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# How often closing tries to remove the profile, 0.1 s apart.
PROFILE_REMOVAL_TRIES = 30


class Browser:
    def __init__(self) -> None:
        executable = chromium()
        if executable is None:
            raise RuntimeError("chromium is not installed (make test installs it: apt-get install chromium)")
        self._profile = tempfile.TemporaryDirectory(prefix="switchboard-chromium-")
        self._process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        browser_url = self._wait_for_devtools()
        port = browser_url.split(":")[2].split("/")[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            pages = [t for t in json.loads(response.read()) if t["type"] == "page"]
        self._socket: ClientConnection = connect(pages[0]["webSocketDebuggerUrl"], max_size=None)
        self._ids = itertools.count(1)
        self.errors: list[str] = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _wait_for_devtools(self) -> str:
        assert self._process.stderr is not None
        found: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert self._process.stderr is not None
            for line in self._process.stderr:
                matched = _LISTENING.search(line)
                if matched and not ready.is_set():
                    found.append(matched.group(1))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(30) or not found:
            raise RuntimeError("chromium did not start its DevTools endpoint")
        return found[0]

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message_id = next(self._ids)
        self._socket.send(json.dumps({"id": message_id, "method": method, "params": params or {}}))
        while True:
            message = json.loads(self._socket.recv(timeout=30))
            if message.get("method") == "Runtime.exceptionThrown":
                self.errors.append(json.dumps(message["params"]["exceptionDetails"])[:500])
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def goto(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"the page never showed: {expression}")

    def screenshot(self, path: Path) -> Path:
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self._socket.close()
        finally:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._remove_profile()

    def _remove_profile(self) -> None:
        """Chromium's helper processes outlive the browser by a moment and may still write into
        the profile while it is removed ("Directory not empty"): try again, then let it be (a
        temporary directory of no one's)."""
        for _ in range(PROFILE_REMOVAL_TRIES):
            try:
                self._profile.cleanup()
                return
            except OSError:
                time.sleep(0.1)
        shutil.rmtree(self._profile.name, ignore_errors=True)
