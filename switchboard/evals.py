"""`switchboard eval run PATH`: run eval cases (pipeline/records/evals.py) against fresh sessions, each
case `--repeat` times, and report each expectation's pass rate; JUnit XML with `--junit`; exit 1
when an expectation failed in any run, 2 when a case cannot be read.

Without `--gateway` it starts its own stack on the simulator (as `replay` does): the simulator
speaks the caller's lines (so the waits are what a caller hears), answers as the case's `model`
says, and stands in for the judge. With `--gateway URL` it runs against that deployment, on
whatever provider it is configured with: the caller's lines are typed into the call
(`POST …/caller/text`), each answer waited for and timed, and the judge is a model through the
`openai` package (`--judge-model`, `OPENAI_API_KEY`, `--judge-base-url`). `--typed` types the
lines on the simulator too."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.platform.config import Settings
from pipeline.platform.timestamps import epoch_seconds
from pipeline.records.evals import (
    EvalCase,
    Observed,
    Rate,
    Verdict,
    judge_answer,
    judge_prompt,
    junit_xml,
    observed_of,
    rates,
    verdicts,
)
from switchboard.client import ApiError, Client
from switchboard.services import resolve_services
from switchboard.stack import Stack

CALL_TIMEOUT_S = 120.0
# The judge `--gateway` asks unless `--judge-model` says otherwise (the `--help` names it too).
DEFAULT_JUDGE_MODEL = "gpt-4.1-mini"
# A typed line's answer is waited for this long.
ANSWER_TIMEOUT_S = 60.0
# Between the caller's spoken lines (the simulator's pace).
LINE_PAUSE_MS = 200


class CaseRefused(Exception):
    """A case file that is not a case."""


def load_cases(path: Path) -> list[tuple[Path, EvalCase]]:
    """The cases in a file, or in every `*.json` of a folder (sorted)."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise CaseRefused(f"{path}: no *.json case in the folder")
    cases = []
    for file in files:
        try:
            cases.append((file, EvalCase.model_validate_json(file.read_bytes())))
        except OSError as error:
            raise CaseRefused(f"{file}: {error}") from error
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the file"
            raise CaseRefused(f"{file}: {where}: {first['msg']}") from error
    return cases


def simulator_script(case: EvalCase) -> dict[str, Any]:
    """The simulator's call script for a case: the caller speaks its lines (unless they are
    typed), the model answers as the case says, the judge looks for the case's evidence."""
    return {
        "name": f"eval-{case.case.name}",
        "timing": {
            "delta_interval_ms": 5,
            "chars_per_delta": 24,
            "speech_ms": 150,
            "response_wait_ms": 20_000,
        },
        "caller": [{"say": line, "after_ms": LINE_PAUSE_MS} for line in case.caller]
        + [{"hangup": True, "after_ms": LINE_PAUSE_MS}],
        "model": list(case.model),
        "judge": [{"ask": item.ask, "evidence": list(item.evidence)} for item in case.expect.judged],
    }


def _typed_script(case: EvalCase) -> dict[str, Any]:
    script = simulator_script(case)
    script["caller"] = []  # the lines are typed through the API; the simulated caller is silent
    return script


@dataclass
class Judge:
    """A judge model behind an OpenAI-compatible chat completions endpoint."""

    model: str
    base_url: str | None
    api_key: str | None

    def answer(self, observed: Observed, case: EvalCase) -> list[tuple[bool, str]]:
        if not case.expect.judged:
            return []
        import openai

        client = openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key or "none", timeout=60, max_retries=2
        )
        answers = []
        for criterion in case.expect.judged:
            messages: Any = judge_prompt(observed, criterion)
            completion = client.chat.completions.create(
                model=self.model,
                messages=messages,
                response_format={"type": "json_object"},
                temperature=0,
            )
            answers.append(judge_answer(completion.choices[0].message.content or ""))
        return answers


def run_case(client: Client, case: EvalCase, judge: Judge, *, typed: bool) -> list[Verdict]:
    """One run of a case on a fresh session: the call, then every expectation's verdict."""
    session = client.create_session(**case.session)
    client.connect(session["id"])
    waits: list[float] = []
    if typed:
        waits = _type_lines(client, session["id"], case)
        # The caller, whose lines were typed, hangs up: the end stands in for theirs.
        client.end(session["id"], "caller_hung_up")
    record = client.wait_for_status(session["id"], timeout_s=CALL_TIMEOUT_S)
    full = client.session(record["id"], events=True)
    observed = observed_of(full, waits or heard_waits(full))
    return verdicts(case, observed, judge.answer(observed, case))


def _type_lines(client: Client, session_id: str, case: EvalCase) -> list[float]:
    """Type each caller line once the agent listens, and time its answer: from the request to
    the agent's answer in the record."""
    waits = []
    for line in case.caller:
        _wait_for(lambda: client.session(session_id)["status"] == "listening", ANSWER_TIMEOUT_S)
        answered = len(_agent_lines(client, session_id))
        started = time.monotonic()
        client.caller_text(session_id, line)
        _wait_for(lambda before=answered: len(_agent_lines(client, session_id)) > before, ANSWER_TIMEOUT_S)
        waits.append((time.monotonic() - started) * 1000)
    _wait_for(lambda: client.session(session_id)["status"] == "listening", ANSWER_TIMEOUT_S)
    return waits


def _agent_lines(client: Client, session_id: str) -> list[Any]:
    return [item for item in client.session(session_id)["transcript"] if item["role"] == "assistant"]


def _wait_for(condition: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the call did not get there within {timeout_s:g} s")
        time.sleep(0.05)


def heard_waits(record: dict[str, Any]) -> list[float]:
    """What the caller waited for each answer, as the gateway heard it: from the end of their
    speech to the answer's first audio (the `heard` stamp on each `response.done`)."""
    waits = []
    for entry in record.get("log", []):
        heard = (entry.get("payload") or {}).get("heard")
        if isinstance(heard, dict) and heard.get("speech_ended_at") and heard.get("first_audio_at"):
            started, first = epoch_seconds(heard["speech_ended_at"]), epoch_seconds(heard["first_audio_at"])
            waits.append(max(0.0, (first - started) * 1000))
    return waits


def report(name: str, case_rates: list[Rate], error: str | None) -> list[str]:
    lines = [
        f"{name}: {'ERROR' if error else ('pass' if all(r.passed == r.runs for r in case_rates) else 'FAIL')}"
    ]
    if error:
        lines.append(f"  the call could not be run: {error}")
    for rate in case_rates:
        mark = "ok  " if rate.passed == rate.runs else "FAIL"
        lines.append(f"  {mark} {rate.expectation}: {rate.passed}/{rate.runs} ({rate.rate:.0%})")
        if rate.passed < rate.runs and rate.failure:
            lines.append(f"       {rate.failure}")
    return lines


def run_evals(
    settings: Settings,
    path: Path,
    *,
    repeat: int,
    junit: Path | None,
    typed: bool,
    gateway: str | None,
    judge_model: str | None,
    judge_base_url: str | None,
) -> int:
    # The judge's HTTP client logs every request at INFO.
    for name in ("httpx", "httpx2", "openai"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        cases = load_cases(path)
    except CaseRefused as error:
        print(f"switchboard eval: {error}", file=sys.stderr)
        return 2
    if repeat < 1:
        print("switchboard eval: --repeat must be 1 or more", file=sys.stderr)
        return 2
    if gateway is not None:
        judged = any(case.expect.judged for _, case in cases)
        api_key = os.environ.get("OPENAI_API_KEY")
        if judged and not (api_key or judge_base_url):
            print(
                "switchboard eval: judged criteria need a judge: set OPENAI_API_KEY or --judge-base-url",
                file=sys.stderr,
            )
            return 2
        client = Client(gateway, settings.api_token or os.environ.get("SWITCHBOARD_API_TOKEN", ""))
        judge = Judge(judge_model or DEFAULT_JUDGE_MODEL, judge_base_url, api_key)
        return _run_all(cases, client, judge, repeat=repeat, junit=junit, typed=True, set_script=None)
    log = lambda message: print(f"switchboard: {message}", file=sys.stderr)  # noqa: E731
    services = resolve_services(settings.database_url, settings.redis_url, settings.data_dir, log=log)
    try:
        from models.db import connect
        from models.migrate import migrate

        migrate(connect(services.database_url))
        with Stack(services.database_url, services.redis_url, ends_its_calls=True) as stack:
            stack.start(workers=1)
            client = Client(stack.api_url, stack.api_token, stack.live_url)
            judge = Judge(
                judge_model or "simulated-judge", judge_base_url or stack.simulator_url, "simulated"
            )

            def set_script(case: EvalCase) -> None:
                script = _typed_script(case) if typed else simulator_script(case)
                request = urllib.request.Request(
                    f"{stack.simulator_url.removesuffix('/v1')}/_sim/script",
                    data=json.dumps(script).encode(),
                    method="PUT",
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(request, timeout=10):
                    pass

            return _run_all(
                cases, client, judge, repeat=repeat, junit=junit, typed=typed, set_script=set_script
            )
    finally:
        services.stop()


def _run_all(
    cases: list[tuple[Path, EvalCase]],
    client: Client,
    judge: Judge,
    *,
    repeat: int,
    junit: Path | None,
    typed: bool,
    set_script: Any,
) -> int:
    results: list[tuple[str, list[Rate], str | None]] = []
    for _file, case in cases:
        runs: list[list[Verdict]] = []
        error = None
        for _ in range(repeat):
            try:
                if set_script is not None:
                    set_script(case)
                runs.append(run_case(client, case, judge, typed=typed))
            except (ApiError, TimeoutError, OSError) as failure:
                error = f"{type(failure).__name__}: {failure}"
                break
        case_rates = rates(runs)
        results.append((case.case.name, case_rates, error))
        print("\n".join(report(case.case.name, case_rates, error)), flush=True)
    if junit is not None:
        junit.write_text(junit_xml(results))
    failed = [
        name for name, case_rates, error in results if error or any(r.passed < r.runs for r in case_rates)
    ]
    print(
        f"{len(results) - len(failed)} of {len(results)} cases passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0
