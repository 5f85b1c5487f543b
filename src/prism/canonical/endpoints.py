"""Canonical dispatch: POST /api/mcp/tools/<tool_name>/ and POST /prism/{mega_tool}/{app}/{entity}/{operation}.

Both answer the PrismResponse envelope on every branch. They are plain ASGI apps (routed by Starlette,
and the first also called directly by `PrismApp`): they read the scope's headers once, the body from
`receive`, and send the answer without Request and Response objects, which on this path would cost more
than authentication does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from prism.dispatch.dispatcher import Call
from prism.dispatch.envelope import call_from_envelope, with_governance_headers
from prism.errors import PrismError
from prism.registry.mega_tools import tool_name as wire_name
from prism.web.requests import Receive, Scope, authenticate_head, head_of, parse_json, parse_json_object, read_body
from prism.web.responses import Send, error_headers, send_json

# What a door answers: (JSON body, status, extra headers).
Answer = tuple[dict[str, Any], int, "dict[str, str] | None"]


def envelope_error(exc: PrismError, tool_name: str) -> Answer:
    body: dict[str, Any] = {"success": False, "error": exc.code, "message": exc.message, "tool_name": tool_name}
    if exc.details:
        body["details"] = exc.details
    return body, exc.status, error_headers(exc)


async def _dispatch(scope: Scope, receive: Receive, tool_name: str, build: Callable[[bytes], Call]) -> Answer:
    """Authenticate, read the body into a Call (`build`), dispatch: the envelope of the outcome."""
    head = head_of(scope)
    try:
        auth = await authenticate_head(scope, head)
        call = build(await read_body(receive, head.content_length))
        if head.governance:
            call = with_governance_headers(call, head.governance)
        _, data = await scope["app"].state.dispatcher.dispatch(auth, call)
    except PrismError as exc:
        return envelope_error(exc, tool_name)
    return {"success": True, "data": data, "tool_name": tool_name}, 200, None


class _Door(ABC):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, *await self.answer(scope, receive))

    @abstractmethod
    def answer(self, scope: Scope, receive: Receive) -> Awaitable[Answer]:
        """The answer to send; an unexpected exception propagates (the caller answers 500). Doors hand back
        `_dispatch`'s coroutine rather than awaiting it in one of their own."""


class ToolDoor(_Door):
    """POST /api/mcp/tools/<tool_name>/: the envelope `{operation, app, entity, arguments}` (or legacy flat)."""

    def answer(self, scope: Scope, receive: Receive) -> Awaitable[Answer]:
        tool_name: str = scope["path_params"]["tool_name"]

        def build(body: bytes) -> Call:
            return call_from_envelope(tool_name, parse_json_object(body), door="rest")

        return _dispatch(scope, receive, tool_name, build)


class CoordinateDoor(_Door):
    """POST /prism/{mega_tool}/{app}/{entity}/{operation}: the body holds the arguments (may be empty)."""

    def answer(self, scope: Scope, receive: Receive) -> Awaitable[Answer]:
        p = scope["path_params"]
        tool_name = wire_name(p["mega_tool"])

        def build(body: bytes) -> Call:
            arguments = parse_json(body, required=False)
            return Call(tool_name=tool_name, door="prism_path", arguments=arguments if arguments is not None else {},
                        operation=p["operation"], app=p["app"], entity=p["entity"])

        return _dispatch(scope, receive, tool_name, build)


call_tool = ToolDoor()
call_coordinate = CoordinateDoor()
