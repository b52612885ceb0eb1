"""The simulated judge: `POST /v1/chat/completions`, answered as a judge model answers an eval's
criterion (pipeline.records.evals.judge_prompt), from the transcript it is sent and the call script's
evidence for the question: yes when every piece of evidence is in the transcript, no otherwise.
So a case's judged criteria are checked against the call that really ran."""

from __future__ import annotations

import json
import time
from typing import Any

from simulator.script import JudgeEvidence


def judge_completion(
    body: dict[str, Any], evidence: list[JudgeEvidence], completion_id: str
) -> dict[str, Any]:
    """The chat completion answering a judge's request."""
    messages = body.get("messages")
    asked = messages[-1].get("content", "") if isinstance(messages, list) and messages else ""
    transcript, _, question = str(asked).rpartition("\nQuestion: ")
    known = next((item for item in evidence if item.ask == question.strip()), None)
    if known is None:
        verdict = {"answer": "no", "reason": f"the simulated judge has no evidence for {question.strip()!r}"}
    else:
        missing = [piece for piece in known.evidence if piece.casefold() not in transcript.casefold()]
        verdict = (
            {"answer": "no", "reason": f"the transcript lacks {', '.join(map(repr, missing))}"}
            if missing
            else {"answer": "yes", "reason": f"the transcript has {', '.join(map(repr, known.evidence))}"}
        )
    content = json.dumps(verdict)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "simulated-judge"),
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {
            "prompt_tokens": len(str(asked)) // 4,
            "completion_tokens": len(content) // 4,
            "total_tokens": 0,
        },
    }
