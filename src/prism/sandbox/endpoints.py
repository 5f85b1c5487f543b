"""Developer sandbox: /api/v1/dev/ping|me|tools|introspect|call.

`call` answers the bare result on success and `{error, tool_name, message}` with a non-2xx status on
failure, `tool_name` being the `name` the body sent (a refusal for want of a credential too); the other
endpoints answer `{error, message}` on failure.

One rule for what a request may hold (docs/architecture.md "Parameters"): a query parameter or a top-level key
of `call`'s body that the endpoint does not take is refused, 400 `invalid_arguments` naming it, blank or not,
as a handler's unknown argument is (a typo such as `?serach=` must not answer the whole catalog as if it had
been applied); a parameter it takes sent blank (`?page=`, a form's empty field) is the same as one not sent.
`ping`, the liveness probe, reads nothing of the request.

`me` and `introspect` describe the caller to itself, so any valid key gets them whatever its scopes (as `tools`
does); they still run through the dispatcher (role, personas, audit), and introspection lists only what the key
may call. The tools behind them, `prism_whoami` and `prism_introspect`, called as tools (`call`, the canonical
doors, MCP), keep asking for `mcp:read`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from prism import API_VERSION, __version__
from prism.dispatch.dispatcher import Call
from prism.dispatch.envelope import call_from_envelope, with_governance_headers
from prism.edge.context import request_context
from prism.edge.doors import PLAIN, SANDBOX_CALL
from prism.errors import BadRequest, InvalidArguments, PrismError, problem_details
from prism.idempotency import key_from_headers
from prism.kit.validation import from_query, validated
from prism.registry.catalog import CatalogQuery, tool_catalog
from prism.registry.introspect import IntrospectParams
from prism.registry.params import Params
from prism.web.requests import caller, read_json_object
from prism.web.responses import dispatched_answer, json_response

# The top-level keys of `call`'s body (SPEC: `{name, arguments}`).
CALL_KEYS = frozenset({"name", "arguments"})


class NoQuery(Params):
    """`me`'s query: none (Params refuses every parameter it does not declare)."""


def _error(exc: PrismError, request: Request) -> Response:
    return PLAIN.response(exc, request.scope)


def _query(model: type[BaseModel], request: Request) -> dict[str, Any]:
    """The query string as `model`'s arguments: a blank value of a parameter the model takes is left out, as if
    not sent; any other parameter, blank or not, stays for the model to refuse if it does not take it."""
    return from_query(model, {name: value for name, value in request.query_params.items()
                              if value.strip() or name not in model.model_fields})


async def ping(request: Request) -> Response:
    return json_response({"service": "prism", "version": API_VERSION, "status": "ok", "build": __version__})


async def me(request: Request) -> Response:
    try:
        auth = caller(request)
        validated(NoQuery, _query(NoQuery, request), whole="query")
        _, data = await request.app.state.dispatcher.dispatch(
            auth, Call(tool_name="prism_whoami", door="sandbox", arguments={}, self_description=True))
    except PrismError as exc:
        return _error(exc, request)
    return json_response(data)


async def tools(request: Request) -> Response:
    try:
        auth = caller(request)
        query = validated(CatalogQuery, _query(CatalogQuery, request), whole="query")
    except PrismError as exc:
        return _error(exc, request)
    return json_response(tool_catalog(request.app.state.registry, auth, query))


async def introspect(request: Request) -> Response:
    try:
        auth = caller(request)
        if request.method == "POST":
            arguments: dict[str, Any] = await read_json_object(request, required=False)
        else:
            arguments = _query(IntrospectParams, request)
        _, data = await request.app.state.dispatcher.dispatch(
            auth, Call(tool_name="prism_introspect", door="sandbox", arguments=arguments, self_description=True))
    except PrismError as exc:
        return _error(exc, request)
    return json_response(data)


# The statuses SPEC gives the call endpoint besides 400 (and the server's own 5xx): every other refusal of the
# tool, a conflict (409) or a call held for oversight (202) included, is a "tool execution error", 400. The
# error code says which (`conflict`, `oversight_required` with its request in `details`). An idempotency key's
# refusals are about the request, not the tool (SPEC is silent on keys): they keep their 409.
_CALL_STATUSES = frozenset({400, 401, 403, 404, 413, 415, 429})
_KEY_REFUSALS = frozenset({"idempotency_key_reused", "idempotency_key_in_progress"})


def _call_status(error: PrismError) -> int:
    keep = error.status in _CALL_STATUSES or error.status >= 500 or error.code in _KEY_REFUSALS
    return error.status if keep else 400


async def call(request: Request) -> Response:
    try:
        auth = caller(request)
    except PrismError as exc:
        return _call_refusal(exc, request, await _tool_the_client_named(request))
    tool_name: str | None = None
    try:
        body = await read_json_object(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest("name: required, the tool to call (for example prism_entity_crud)",
                             code="missing_name", field="name")
        tool_name = name
        _refuse_unknown_keys(body)
        headers = request_context(request.scope).headers
        key = key_from_headers(headers)
        dispatched = with_governance_headers(call_from_envelope(name, body.get("arguments", {}), door="sandbox"),
                                             headers)
        dispatched.idempotency_key = key
        _, data = await request.app.state.dispatcher.dispatch(auth, dispatched)
    except PrismError as exc:
        return _call_refusal(exc, request, tool_name)
    data, answer_headers = dispatched_answer(data)
    return json_response(data, headers=answer_headers)


def _refuse_unknown_keys(body: dict[str, Any]) -> None:
    unknown = sorted(set(body) - CALL_KEYS)
    if unknown:
        problems = [{"field": key, "message": "not a field of the call; send the tool's parameters inside "
                                              "`arguments`"} for key in unknown]
        raise InvalidArguments("; ".join(f"{p['field']}: {p['message']}" for p in problems),
                               details={"errors": problems})


def _call_refusal(error: PrismError, request: Request, tool_name: str | None) -> Response:
    """The refusal in the call's shape and status; a replayed one keeps its Idempotent-Replayed header. A refusal
    of another status answered as 400 (a conflict, an oversight hold) takes every 400's `details` (a list of
    `errors`) beside its own (`oversight_request_id` ...), so a client reads every 400 the same way."""
    body = SANDBOX_CALL.body(error, request.scope, tool_name)
    status = _call_status(error)
    if status != error.status:
        body["details"] = problem_details(error.message, error.details, error.whole_input)
    return json_response(body, status, SANDBOX_CALL.headers(error, request.scope))


async def _tool_the_client_named(request: Request) -> str | None:
    """The `name` a caller without a credential sent, for the refusal's `tool_name` (SPEC: the tool the call
    targeted), or None when the body cannot be read (over the size cap, not a JSON object) or names none.

    Echoed as sent and never looked up: whether the refusal names a tool must tell nothing about which tools
    exist, or whom they would serve."""
    try:
        name = (await read_json_object(request)).get("name")
    except PrismError:
        return None
    return name if isinstance(name, str) and name else None
