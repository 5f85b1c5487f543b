"""Canonical dispatch: POST /api/mcp/tools/<tool_name>/ and POST /prism/{mega_tool}/{app}/{entity}/{operation}.

Both answer the PrismResponse envelope on every branch.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from prism.dispatch.dispatcher import Call
from prism.dispatch.envelope import call_from_envelope, with_governance_headers
from prism.errors import PrismError
from prism.registry.mega_tools import tool_name as wire_name
from prism.web.requests import authenticate, read_json, read_json_object
from prism.web.responses import error_headers, json_response


def envelope_error(exc: PrismError, tool_name: str) -> Response:
    body: dict[str, Any] = {"success": False, "error": exc.code, "message": exc.message, "tool_name": tool_name}
    if exc.details:
        body["details"] = exc.details
    return json_response(body, exc.status, error_headers(exc))


async def _run(request: Request, tool_name: str, build: Any) -> Response:
    try:
        auth = await authenticate(request)
        call: Call = with_governance_headers(await build(), request.headers)
        _, data = await request.app.state.dispatcher.dispatch(auth, call)
    except PrismError as exc:
        return envelope_error(exc, tool_name)
    return json_response({"success": True, "data": data, "tool_name": tool_name})


async def call_tool(request: Request) -> Response:
    tool_name = request.path_params["tool_name"]

    async def build() -> Call:
        return call_from_envelope(tool_name, await read_json_object(request), door="rest")

    return await _run(request, tool_name, build)


async def call_coordinate(request: Request) -> Response:
    p = request.path_params
    tool_name = wire_name(p["mega_tool"])

    async def build() -> Call:
        arguments = await read_json(request, required=False)
        return Call(tool_name=tool_name, door="prism_path", arguments=arguments if arguments is not None else {},
                    operation=p["operation"], app=p["app"], entity=p["entity"])

    return await _run(request, tool_name, build)
