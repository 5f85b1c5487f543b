"""X-Request-ID: the client's when it is well formed, else a new one; echoed on every answer by the edge."""

from __future__ import annotations

import re
import secrets

REQUEST_ID_HEADER = b"x-request-id"
# Short, printable, safe in a log line and a header: 1-128 of letters, digits and . _ : -
_WELL_FORMED = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id_of(sent: str | None) -> str:
    if sent is not None and _WELL_FORMED.fullmatch(sent):
        return sent
    return secrets.token_hex(16)  # 128 random bits as 32 hex digits; a uuid4 object costs four times as much
