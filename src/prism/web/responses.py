"""Answers: a Starlette Response for endpoints; for raw ASGI doors `send_json`, and `send_answer` under it, the one
function that writes a whole answer to `send` (the MCP door's answers go through it too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

import orjson
from starlette.responses import Response

from prism.idempotency import REPLAYED_HEADERS, Replay

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_CONTENT_TYPE = (b"content-type", b"application/json")


# For an answer that shows a secret (a new key, a webhook's signing secret): no cache on the way keeps a copy.
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def shows_a_secret(data: Any) -> bool:
    """Whether a handler's answer carries a secret shown once (a webhook's `secret`, on create and rotation)."""
    return isinstance(data, dict) and "secret" in data


def dispatched_answer(data: Any) -> tuple[Any, dict[str, str] | None]:
    """The dispatcher's data as a door answers it, with the answer's headers: a replay under an Idempotency-Key
    says so, and an answer that shows a secret is not to be stored, the first answer and its replay alike (every
    door that answers a handler's data decides this here, so none can forget a branch)."""
    replayed = type(data) is Replay
    if replayed:
        data = data.data
    headers = {**(REPLAYED_HEADERS if replayed else {}), **(NO_STORE if shows_a_secret(data) else {})}
    return data, headers or None


def render_json(content: Any) -> bytes:
    return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return render_json(content)


def json_response(content: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSON:
    return JSON(content, status_code=status, headers=headers)


async def send_json(send: Send, content: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
    """What `json_response(content, status, headers)` sends, header for header, without building a Response."""
    body = render_json(content)
    raw: list[tuple[bytes, bytes]]
    if not headers and status == 200:  # the usual answer
        raw = [(b"content-length", b"%d" % len(body)), _CONTENT_TYPE]
    else:
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()] if headers else []
        # Starlette's rules: Content-Length unless the status has no body; neither header twice.
        names = {name for name, _ in raw}
        if b"content-length" not in names and status >= 200 and status not in (204, 304):
            raw.append((b"content-length", str(len(body)).encode("latin-1")))
        if b"content-type" not in names:
            raw.append(_CONTENT_TYPE)
    await send_answer(send, status, body, raw)


async def send_answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    """A whole answer: its start with `headers` as given (names lower-case), then its body in one message."""
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def error_headers(exc: Exception) -> dict[str, str] | None:
    """The headers a refusal carries of its own: Retry-After (and RateLimit-*) on a 429 or a 503. The 401
    challenge is the door's (prism.oauth.challenge)."""
    extra: dict[str, str] | None = getattr(exc, "headers", None)
    return extra
