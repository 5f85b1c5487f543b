"""Canonical dispatch: POST /api/mcp/tools/<tool_name>/ and POST /prism/{mega_tool}/{app}/{entity}/{operation}.

Both answer the PrismResponse envelope on every branch, rendered by `prism.edge.doors.ENVELOPE`. They are plain
ASGI apps behind the router and the edge: the caller and the headers come from the request's context, the body
from `receive`, and the answer goes to `send` without Request and Response objects.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from prism.dispatch.dispatcher import Call
from prism.dispatch.envelope import call_from_envelope, with_governance_headers
from prism.dispatch.response import success_envelope
from prism.edge.context import request_context
from prism.edge.doors import ENVELOPE
from prism.errors import PrismError
from prism.idempotency import key_from_headers
from prism.registry.mega_tools import tool_name as wire_name
from prism.web.requests import Receive, Scope, declared_length, parse_json, parse_json_object, read_body
from prism.web.responses import Send, dispatched_answer, send_json

# What a door answers: (JSON body, status, extra headers).
Answer = tuple[dict[str, Any], int, "dict[str, str] | None"]


async def _dispatch(scope: Scope, receive: Receive, tool_name: str, build: Callable[[bytes], Call]) -> Answer:
    """Read the body into a Call (`build`) and dispatch it for the edge's caller: the envelope of the outcome."""
    context = request_context(scope)
    try:
        auth = context.caller()
        key = key_from_headers(context.headers)
        call = with_governance_headers(build(await read_body(receive, declared_length(scope))), context.headers)
        call.idempotency_key = key
        _, data = await scope["app"].state.dispatcher.dispatch(auth, call)
    except PrismError as exc:  # a replayed refusal carries its Idempotent-Replayed header
        return ENVELOPE.body(exc, scope), exc.status, ENVELOPE.headers(exc, scope)
    data, headers = dispatched_answer(data)
    return success_envelope(data, tool_name), 200, headers


class _Door(ABC):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, *await self.answer(scope, receive))

    @abstractmethod
    def answer(self, scope: Scope, receive: Receive) -> Awaitable[Answer]:
        """The answer to send; an unexpected exception propagates to the route's entrance, which answers it in
        the envelope (503 for an unavailable database, 500 for anything else)."""


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
            # An empty body is no arguments; anything else must be a JSON object (null and [] are refused).
            arguments = {} if not body or body.isspace() else parse_json(body)
            return Call(tool_name=tool_name, door="prism_path", arguments=arguments,
                        operation=p["operation"], app=p["app"], entity=p["entity"])

        return _dispatch(scope, receive, tool_name, build)


call_tool = ToolDoor()
call_coordinate = CoordinateDoor()
