"""JSON-RPC 2.0 framing for the MCP door: reading messages, building results and errors.

Protocol errors (a malformed message, an unknown method) are JSON-RPC errors. A refused or failed tool
call is not one: it is a `tools/call` result with `isError: true` (see tools.py), except the scope step-up of an
OAuth token, which the transport answers with HTTP 403.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from prism.errors import BadRequest, InvalidArguments, PrismError
from prism.kit.nul import refuse_nul_in_json

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Server-defined range (-32000..-32099): transport-level refusals, each carrying Prism's error code in data.
UNAUTHORIZED = -32001
SESSION_REQUIRED = -32002
SESSION_NOT_FOUND = -32003
RATE_LIMITED = -32004
PAYLOAD_TOO_LARGE = -32005
INSUFFICIENT_SCOPE = -32006  # HTTP 403 with a step-up challenge (mcp_server/tools.ScopeChallenge)
# The code newer clients expect when they probe a protocol version we do not speak.
UNSUPPORTED_PROTOCOL_VERSION = -32022

RequestId = str | int


class RpcError(Exception):
    """A JSON-RPC error: `code` and `message` on the wire, Prism's own code in `data.error`. `request_id` is the
    id of the request refused while it was read, when the id itself could be read: JSON-RPC 2.0 answers null
    only when it could not, and clients match answers to requests by id."""

    def __init__(self, code: int, message: str, *, data: dict[str, Any] | None = None,
                 request_id: RequestId | None = None, of_notification: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.request_id = request_id
        # The refused message was a notification: within a batch it gets no answer (JSON-RPC 2.0: a server
        # never replies to a notification); alone, the HTTP status and this body say why it was refused.
        self.of_notification = of_notification

    def body(self, request_id: RequestId | None) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": request_id, "error": error}


@dataclass(frozen=True, slots=True)
class Message:
    """One incoming JSON-RPC message: a request (has an id), a notification, or a client response."""

    method: str | None
    id: RequestId | None
    params: dict[str, Any]
    is_request: bool

    @property
    def is_notification(self) -> bool:
        return self.method is not None and not self.is_request


# Each member of a batch gets an answer of its own (an error, for a malformed one): without a bound, a POST of a
# megabyte of `0,` asks for half a million answers, tens of megabytes built in memory and sent. Agents batch a
# few requests at a time.
MAX_BATCH = 100


def parse_body(body: bytes) -> tuple[list[Message | RpcError], bool]:
    """The messages of a POST body and whether it was a batch. A body that is not JSON-RPC at all raises
    RpcError; in a batch each malformed member becomes its own RpcError (answered with its `request_id`)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"body is not valid JSON: {exc}", data={"error": "invalid_json"}) from None
    try:
        refuse_nul_in_json(body, value)  # PostgreSQL cannot store it, and tool names reach the ledger
    except BadRequest as exc:
        raise invalid_params(exc) from None
    if isinstance(value, list):
        if not value:
            raise RpcError(INVALID_REQUEST, "an empty batch is not a JSON-RPC message",
                           data={"error": "invalid_body"})
        if len(value) > MAX_BATCH:
            raise RpcError(INVALID_REQUEST, f"a batch holds at most {MAX_BATCH} messages; send more in several "
                           "POSTs", data={"error": "batch_too_large"})
        return [_parse_or_error(item) for item in value], True
    return [parse_message(value)], False


def _parse_or_error(value: Any) -> Message | RpcError:
    try:
        return parse_message(value)
    except RpcError as exc:
        return exc


def parse_message(value: Any) -> Message:
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'each message must be a JSON object with "jsonrpc": "2.0"',
                       data={"error": "invalid_body"})
    method = value.get("method")
    has_id = "id" in value
    request_id = value.get("id")
    if has_id and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        raise RpcError(INVALID_REQUEST, "id must be a string or an integer", data={"error": "invalid_body"})
    if method is None:
        # A response from the client (to a server request we never send): acknowledged, ignored.
        if not has_id or ("result" not in value and "error" not in value):
            raise RpcError(INVALID_REQUEST, "a message needs a method, or a result or error with an id",
                           data={"error": "invalid_body"})
        return Message(None, request_id, {}, False)
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "method must be a non-empty string", data={"error": "invalid_body"})
    params = value.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise invalid_params(InvalidArguments("params: must be a JSON object", field="params"),
                             request_id=request_id, of_notification=not has_id)
    return Message(method, request_id, params, has_id)


def sole_request_id(messages: list[Message | RpcError]) -> RequestId | None:
    """The id of the one request of a POST (alone, or the only request of its batch), which a refusal of the whole
    POST names: JSON-RPC 2.0 answers null only when no id could be read, and several ids cannot share one answer."""
    requests = [m for m in messages if isinstance(m, Message) and m.is_request]
    return requests[0].id if len(requests) == 1 else None


def invalid_params(error: PrismError, *, request_id: RequestId | None = None,
                   of_notification: bool = False) -> RpcError:
    """A refusal of the call's input as JSON-RPC's invalid params, its details (`errors`: `{field, message}`
    each, as every door's 400) in `data`."""
    return RpcError(INVALID_PARAMS, error.message, data={"error": error.code, **error.details},
                    request_id=request_id, of_notification=of_notification)


def result(request_id: RequestId | None, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
