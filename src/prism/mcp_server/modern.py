"""The 2026-07-28 request rules: one request per POST, its revision in `params._meta` and in the headers.

A request's envelope is checked in the specification's order, the first failure answering:

1. `params._meta` carries the protocol version and the client's capabilities (else -32602);
2. `MCP-Protocol-Version` equals that version, `Mcp-Method` the method, `Mcp-Name` the tool name (else -32020,
   each routing header at most once): intermediaries route on the headers, Prism acts on the body, so both
   must say the same;
3. the version is one Prism serves per request (else -32022 naming every revision we speak: a client that
   also speaks a handshake revision falls back to `initialize`).
"""

from __future__ import annotations

import base64
from typing import Any

from starlette.datastructures import Headers

from prism.mcp_server import jsonrpc, revisions
from prism.mcp_server.jsonrpc import Message, RpcError

HEADER_MISMATCH = -32020
_ROUTING_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name")
_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
# The HTTP status of each JSON-RPC error code on this revision's wire; any other error travels with 200.
_STATUS = {jsonrpc.PARSE_ERROR: 400, jsonrpc.INVALID_REQUEST: 400, jsonrpc.INVALID_PARAMS: 400,
           HEADER_MISMATCH: 400, -32021: 400, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION: 400,
           jsonrpc.METHOD_NOT_FOUND: 404, jsonrpc.PAYLOAD_TOO_LARGE: 413}


def http_status(code: int) -> int:
    return _STATUS.get(code, 200)


def unsupported(requested: str) -> RpcError:
    return RpcError(jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                    data={"supported": list(revisions.SUPPORTED), "requested": requested})


def carries_envelope(message: Message | RpcError) -> bool:
    """Whether a message carries the per-request envelope (its protocol version in `params._meta`)."""
    if isinstance(message, RpcError):
        return False
    meta = message.params.get("_meta")
    return isinstance(meta, dict) and revisions.PROTOCOL_VERSION_META in meta


def single(messages: list[Message | RpcError], batch: bool) -> Message:
    """The one message of a 2026-07-28 POST: a request or a notification, never a batch or a response."""
    if batch:
        raise RpcError(jsonrpc.INVALID_REQUEST, "JSON-RPC batches are not part of MCP 2026-07-28: send one "
                       "request per POST", data={"error": "batch_not_supported"},
                       request_id=jsonrpc.sole_request_id(messages))
    message = messages[0]
    if isinstance(message, RpcError):
        raise message
    if message.method is None:
        raise RpcError(jsonrpc.INVALID_REQUEST, "a 2026-07-28 POST carries a request or a notification, not a "
                       "response", data={"error": "invalid_body"})
    return message


def check_envelope(message: Message, headers: Headers) -> str:
    """The request's revision, once its envelope and routing headers agree and we serve it."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict) or revisions.PROTOCOL_VERSION_META not in meta \
            or revisions.CLIENT_CAPABILITIES_META not in meta:
        raise RpcError(jsonrpc.INVALID_PARAMS, f"params._meta must carry {revisions.PROTOCOL_VERSION_META!r} and "
                       f"{revisions.CLIENT_CAPABILITIES_META!r} (MCP 2026-07-28 requests carry their own "
                       "envelope)", data={"error": "invalid_envelope"})
    version: Any = meta[revisions.PROTOCOL_VERSION_META]
    for name in _ROUTING_HEADERS:
        if len(headers.getlist(name)) > 1:
            raise _mismatch(f"the {name} header appears more than once")
    if headers.get("mcp-protocol-version") != version:
        raise _mismatch("the MCP-Protocol-Version header does not match params._meta's protocol version")
    if headers.get("mcp-method") != message.method:
        raise _mismatch("the Mcp-Method header does not match the request's method")
    name_param = _NAME_PARAM.get(message.method or "")
    if name_param is not None:
        named = message.params.get(name_param)
        if named is not None and _decoded(headers.get("mcp-name")) != named:
            raise _mismatch(f"the Mcp-Name header does not match params.{name_param}")
    if not isinstance(version, str):
        raise RpcError(jsonrpc.INVALID_PARAMS, "the protocol version in params._meta must be a string",
                       data={"error": "invalid_envelope"})
    if version not in revisions.MODERN:
        raise unsupported(version)
    return version


def _decoded(value: str | None) -> str | None:
    """A header value as the client meant it: values that are not plain printable ASCII travel as
    `=?base64?<base64 of the UTF-8>?=`."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode()
    except ValueError:  # not base64 (binascii.Error), not ASCII to begin with, or not UTF-8 once decoded
        return None


def _mismatch(message: str) -> RpcError:
    return RpcError(HEADER_MISMATCH, message, data={"error": "header_mismatch"})
