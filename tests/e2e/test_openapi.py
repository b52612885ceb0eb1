"""Schemathesis against a live gateway: generated requests to every operation of /openapi.json
get no 5xx, and every answer matches the operation's documented schema.

The module has its own stack (the e2e `stack` fixture is module-scoped, with its own broker
namespace), so the sessions it creates and ends touch no other test's calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from switchboard.client import Client
from switchboard.stack import Stack
from tests.e2e.conftest import set_script

# Bounded so the run stays near 15 s on two busy cores: a handful of examples per operation
# (about 250 requests in all), fuzzing only (the coverage phase's boundary values are many
# more), one worker, no shrinking, a fixed seed so a failure reproduces.
MAXIMUM_EXAMPLES = 5
SEED = 28
# A request answered after this is a failure in itself (a verb's reply timeout is 10 s).
REQUEST_TIMEOUT_S = 20
# The live stream is a WebSocket: a plain GET of it is not the operation it describes.
NOT_OVER_HTTP = "/v1/sessions/{session_id}/live"
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def test_generated_requests_get_no_server_error_and_answers_match_the_spec(
    stack: Stack, client: Client, tmp_path: Path
) -> None:
    """Every operation gets generated requests; none answers 5xx, every answer fits its schema."""
    # A session in a call that stays up (the caller says nothing and never hangs up), so the
    # verbs reach the worker and answer with their success shapes, not only 404 or 409.
    set_script(stack, {"name": "silent", "caller": [], "model": []})
    created = client.create_session("You answer questions about the API.")
    client.connect(created["id"])
    client.wait_for_status(created["id"], ("connected", "listening", "responding"), timeout_s=30)
    config, report = tmp_path / "schemathesis.toml", tmp_path / "run.json"
    config.write_text(f"[parameters]\nsession_id = {json.dumps(created['id'])}\n")
    finished = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(config),
            "run",
            f"{stack.api_url}/openapi.json",
            "--header",
            f"Authorization: Bearer {stack.api_token}",
            "--checks",
            "not_a_server_error,response_schema_conformance",
            "--phases",
            "fuzzing",
            "--max-examples",
            str(MAXIMUM_EXAMPLES),
            "--seed",
            str(SEED),
            "--workers",
            "1",
            "--no-shrink",
            "--request-timeout",
            str(REQUEST_TIMEOUT_S),
            "--exclude-path",
            NOT_OVER_HTTP,
            "--report",
            "json",
            "--report-json-path",
            str(report),
        ],
        # Its cache (.schemathesis/) goes to the test's own directory, not the checkout.
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode == 0, output
    run = json.loads(report.read_text())
    assert (run["failures"], run["errors"]) == ([], []), output
    status, document = client.request("GET", "/openapi.json")
    assert status == 200
    # Schemathesis leaves out the operation that serves the schema it loaded (the document
    # itself is checked by tests/gateway/test_openapi.py).
    described = {
        f"{method.upper()} {path}"
        for path, methods in document["paths"].items()
        for method in methods
        if path not in (NOT_OVER_HTTP, "/openapi.json")
    }
    # Every operation was sent requests (a filtered or errored one would be missing here).
    assert set(run["valid_rates"]) == described, output
    assert run["operations"]["tested"] == len(described), output
    print(output[output.find("SUMMARY") :])
