"""A raw HTTP request to a gateway's API: any method, body bytes and headers, the answer as
(status, decoded JSON body) whatever the status — for the tests that send what no client would."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def raw_request(
    base: str, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, Any]:
    request = urllib.request.Request(f"{base}{path}", data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
