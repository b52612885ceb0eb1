"""`switchboard eval run`: the project's example cases pass against the simulator, a case
written to fail fails with a readable report and JUnit XML, the lines may be typed through a
running gateway, and a stored call made into a case passes when run back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from switchboard.client import Client
from switchboard.services import Services
from switchboard.stack import Stack, wait_until
from tests.e2e.conftest import set_script

EVALS = Path(__file__).resolve().parents[2] / "evals"


def _switchboard(
    services: Services, *arguments: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard", *arguments],
        env={
            **os.environ,
            "SWITCHBOARD_DATABASE_URL": services.database_url,
            "SWITCHBOARD_REDIS_URL": services.redis_url,
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_example_cases_pass_against_the_simulator(services: Services, tmp_path: Path) -> None:
    junit = tmp_path / "evals.xml"
    ran = _switchboard(services, "eval", "run", str(EVALS), "--junit", str(junit))
    assert ran.returncode == 0, ran.stdout + ran.stderr[-2000:]
    assert "order-status: pass" in ran.stdout and "opening-hours: pass" in ran.stdout
    assert "ok   judged: Did the agent tell the caller when order 4417 arrives?: 1/1 (100%)" in ran.stdout
    assert ran.stdout.rstrip().endswith("2 of 2 cases passed")
    suites = ElementTree.parse(junit).getroot()
    assert sorted(suite.get("name") for suite in suites) == ["opening-hours", "order-status"]
    assert [suite.get("failures") for suite in suites] == ["0", "0"]


def test_a_case_written_to_fail_fails_with_a_readable_report(services: Services, tmp_path: Path) -> None:
    """Each expectation the call does not meet is named with what happened instead; five runs
    report each expectation's rate; the JUnit XML has the failures; exit 1."""
    case = json.loads((EVALS / "order_status.json").read_text())
    case["case"]["name"] = "written-to-fail"
    case["expect"] = {
        "tools": [{"name": "lookup_order", "arguments": {"order_id": "9999"}}],
        "says": ["Friday", "Saturday"],
        "ends": "agent_hung_up",
        "judged": [{"ask": "Did the agent offer a refund?", "evidence": ["refund"]}],
    }
    failing = tmp_path / "failing.json"
    failing.write_text(json.dumps(case))
    junit = tmp_path / "evals.xml"
    ran = _switchboard(services, "eval", "run", str(failing), "--repeat", "5", "--junit", str(junit))
    assert ran.returncode == 1, ran.stdout + ran.stderr[-2000:]
    report = ran.stdout
    assert "written-to-fail: FAIL" in report
    assert "FAIL calls lookup_order: 0/5 (0%)" in report
    assert 'arguments {"order_id": "4417"}, expected {"order_id": "9999"}' in report
    assert "ok   says 'Friday': 5/5 (100%)" in report
    assert "FAIL says 'Saturday': 0/5 (0%)" in report and 'the agent said: "Order 4417 has shipped' in report
    assert "FAIL ends agent_hung_up: 0/5 (0%)" in report and "it ended caller_hung_up" in report
    assert (
        "FAIL judged: Did the agent offer a refund?: 0/5 (0%)" in report
        and "the transcript lacks 'refund'" in report
    )
    assert report.rstrip().endswith("0 of 1 cases passed; failed: written-to-fail")
    [suite] = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("5", "4")


def test_a_case_s_lines_typed_through_a_running_gateway(
    services: Services, stack: Stack, client: Client, tmp_path: Path
) -> None:
    """`--gateway`: a deployment's own provider (here the stack's simulator) hears the lines
    typed, each answer timed; the judge is whatever `--judge-base-url` names."""
    case = json.loads((EVALS / "order_status.json").read_text())
    set_script(
        stack, {"name": "typed", "caller": [], "model": case["model"], "judge": case["expect"]["judged"]}
    )
    ran = _switchboard(
        services,
        "eval",
        "run",
        str(EVALS / "order_status.json"),
        "--gateway",
        stack.api_url,
        "--judge-base-url",
        stack.simulator_url,
        env={"SWITCHBOARD_API_TOKEN": stack.api_token},
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr[-2000:]
    assert "order-status: pass" in ran.stdout and "ok   latency p95 ≤ 1500 ms: 1/1 (100%)" in ran.stdout
    without_judge = _switchboard(
        services,
        "eval",
        "run",
        str(EVALS / "order_status.json"),
        "--gateway",
        stack.api_url,
        env={"OPENAI_API_KEY": ""},
    )
    assert without_judge.returncode == 2
    assert "judged criteria need a judge" in without_judge.stderr


def test_a_stored_call_made_into_a_case_passes_when_run_back(
    services: Services, stack: Stack, client: Client, tmp_path: Path
) -> None:
    """`sessions export ID --as-case`: the caller's lines (redacted: a card number never reaches
    the file), the model's answers and the tool it called become a case that passes."""
    set_script(
        stack,
        {
            "name": "stored",
            "timing": {"delta_interval_ms": 5, "chars_per_delta": 24, "speech_ms": 150},
            "caller": [
                {"say": "Where is order 4417? My card was 4111 1111 1111 1111.", "after_ms": 150},
                {"say": "Thanks.", "after_ms": 200},
                {"hangup": True, "after_ms": 200},
            ],
            "model": [
                {"function_call": {"name": "lookup_order", "arguments": {"order_id": "4417"}}},
                {"say": "It ships Friday."},
                {"say": "Bye."},
            ],
        },
    )
    session = client.create_session("You are the order desk.", tools=["lookup_order"])
    client.connect(session["id"])
    assert client.wait_for_status(session["id"], timeout_s=60)["status"] == "ended"
    exported = _switchboard(services, "sessions", "export", session["id"], "--as-case")
    assert exported.returncode == 0, exported.stderr[-2000:]
    case: dict[str, Any] = json.loads(exported.stdout)
    assert "4111" not in exported.stdout
    assert case["expect"] == {
        "tools": [{"name": "lookup_order", "arguments": {"order_id": "4417"}}],
        "ends": "caller_hung_up",
    }
    assert [entry.get("say") for entry in case["model"][1:]] == ["It ships Friday.", "Bye."]
    path = tmp_path / "stored.json"
    path.write_text(exported.stdout)
    ran = _switchboard(services, "eval", "run", str(path))
    assert ran.returncode == 0, ran.stdout + ran.stderr[-2000:]
    assert f"{session['id']}: pass" in ran.stdout


def test_a_call_the_app_ended_made_into_a_case_expects_no_end_a_run_cannot_make(
    services: Services, stack: Stack, client: Client, tmp_path: Path
) -> None:
    """A call the app ended (`POST …/end`) made into a case: a run of the case ends as its caller
    does, never as the app did, so the case expects no end (its description says how the call
    ended) and passes when run back; the tools and lines are expected as ever."""
    set_script(
        stack,
        {
            "name": "ended-by-the-app",
            "timing": {"delta_interval_ms": 5, "chars_per_delta": 24, "speech_ms": 150},
            "caller": [
                {"say": "Is my order 4417 on its way?", "after_ms": 150},
                {"say": "Hello?", "after_ms": 5_000},
                {"hangup": True, "after_ms": 200},
            ],
            "model": [{"say": "It ships Friday."}, {"say": "Yes?"}],
        },
    )
    session = client.create_session("You are the order desk.")
    client.connect(session["id"])

    def answered() -> bool:
        record = client.session(session["id"])
        return any(line["role"] == "assistant" for line in record["transcript"])

    assert wait_until(answered, 30)
    client.end(session["id"])
    record = client.wait_for_status(session["id"], timeout_s=60)
    assert (record["status"], record["end_reason"]) == ("ended", "app_ended")
    exported = _switchboard(services, "sessions", "export", session["id"], "--as-case")
    assert exported.returncode == 0, exported.stderr[-2000:]
    case: dict[str, Any] = json.loads(exported.stdout)
    assert case["expect"] == {"tools": []}
    assert "it ended app_ended" in case["case"]["description"]
    assert case["caller"] == ["Is my order 4417 on its way?"]
    path = tmp_path / "ended_by_the_app.json"
    path.write_text(exported.stdout)
    ran = _switchboard(services, "eval", "run", str(path))
    assert ran.returncode == 0, ran.stdout + ran.stderr[-2000:]
    assert f"{session['id']}: pass" in ran.stdout
