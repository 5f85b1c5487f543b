from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)


def json_response(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSON:
    return JSON(content, status_code=status, headers=headers)


def challenge_headers(status: int) -> dict[str, str] | None:
    """401 answers tell the client how to authenticate."""
    return {"WWW-Authenticate": 'Bearer realm="prism"'} if status == 401 else None


def error_headers(exc: Exception) -> dict[str, str] | None:
    """The headers a refusal carries: the 401 challenge, Retry-After (and RateLimit-*) on a 429."""
    extra: dict[str, str] | None = getattr(exc, "headers", None)
    return extra or challenge_headers(getattr(exc, "status", 500))
