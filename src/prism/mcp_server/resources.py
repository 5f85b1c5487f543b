"""Documents as MCP resources: the `resource_link` a tool result carries when its handler answers a document
(2025-06-18 on), and `resources/read` of that link, which reads the document through the dispatcher (door
"mcp": authorized and audited like the tool call it stands for).

    prism://documents/document/<id>     the document's text, with its content type
"""

from __future__ import annotations

from typing import Any

from prism.auth.context import AuthContext
from prism.dispatch.dispatcher import Dispatcher
from prism.dispatch.envelope import call_from_envelope
from prism.errors import InvalidArguments, PrismError
from prism.mcp_server import revisions
from prism.mcp_server.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, RATE_LIMITED, RpcError, invalid_params
from prism.registry.model import Handler

RESOURCE_NOT_FOUND = -32002  # revisions before 2026-07-28
PREFIX = "prism://documents/document/"
TEMPLATE = {"uriTemplate": PREFIX + "{id}", "name": "document", "title": "Document",
            "description": "A document's text (the id comes from a documents tool result)."}


def link_for(handler: Handler | None, data: Any) -> dict[str, Any] | None:
    """The resource_link of a handler's answer when it is a document, else None."""
    if handler is None or handler.coordinate.app != "documents" or handler.coordinate.entity != "document":
        return None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("title"), str):
        return None
    link = {"type": "resource_link", "uri": PREFIX + data["id"], "name": data["title"], "title": data["title"]}
    if isinstance(data.get("content_type"), str):
        link["mimeType"] = data["content_type"]
    return link


def reading_refusal(exc: PrismError, uri: str, version: str) -> RpcError:
    """The reading's refusal as a JSON-RPC error: the caller's mistake (4xx) as invalid params or not found; a
    limit or Prism's own failure (429, 5xx: the database busy, say) as such, with when to retry, so that a client
    retries rather than taking it for its own error."""
    data: dict[str, Any] = {"error": exc.code, "uri": uri}
    if exc.status == 404:
        return RpcError(not_found_code(version), exc.message, data=data)
    if exc.status == 429 or exc.status >= 500:
        retry_after = (getattr(exc, "headers", None) or {}).get("Retry-After")
        if retry_after is not None:
            data["retry_after"] = int(retry_after)
        return RpcError(RATE_LIMITED if exc.status == 429 else INTERNAL_ERROR, exc.message, data=data)
    return RpcError(INVALID_PARAMS, exc.message, data=data)


def not_found_code(version: str) -> int:
    """The error code of a resource that does not exist: 2026-07-28 makes it -32602 (invalid params, its "Error
    Handling"); the earlier revisions' servers answer -32002, which their clients expect."""
    return INVALID_PARAMS if revisions.at_least(version, "2026-07-28") else RESOURCE_NOT_FOUND


async def read(dispatcher: Dispatcher, auth: AuthContext, params: dict[str, Any], version: str) -> dict[str, Any]:
    uri = params.get("uri")
    if not isinstance(uri, str):  # never echoed: a value nested deeper than an answer can be written (a 500)
        raise invalid_params(InvalidArguments("params.uri: must be a string", field="params.uri"))
    if not uri.startswith(PREFIX) or not uri[len(PREFIX):]:
        raise RpcError(not_found_code(version), f"Resource not found: {uri!r} (Prism's resources are {PREFIX}<id>, as "
                       "linked from documents tool results)", data={"error": "resource_not_found", "uri": uri})
    call = call_from_envelope("prism_entity_crud", {"app": "documents", "entity": "document", "operation": "read",
                                                    "arguments": {"id": uri[len(PREFIX):]}}, door="mcp")
    try:
        _, data = await dispatcher.dispatch(auth, call)
    except PrismError as exc:
        raise reading_refusal(exc, uri, version) from None
    return {"contents": [{"uri": uri, "mimeType": data.get("content_type") or "text/plain",
                          "text": data.get("content") or ""}]}
