"""Webhook management API under /api/v1/risk-assessment/governance/webhooks/ (SPEC.md "Webhook management").

Each request is dispatched as its handler, `config_manage/governance/webhook/...` or `.../webhook_delivery/...`
(prism.apps.governance.webhooks): the same dispatcher as every other door, so the same RBAC, persona policy,
oversight, mission budget, audit entry and idempotency keys apply. Only the shapes are this API's own: the
webhook or delivery object as the body (not the envelope), 201/202/204 where SPEC says so, and the list's
SPEC names (`count`, `results`) beside the envelope's.

Errors answer `{error, message}` (+ `details.errors[]` for validation) with the PrismError's status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.dispatch.dispatcher import Call
from prism.dispatch.envelope import with_governance_headers
from prism.edge.context import request_context
from prism.edge.doors import PLAIN, door_routes
from prism.errors import InvalidArguments, PrismError
from prism.idempotency import key_from_headers
from prism.kit.validation import from_query
from prism.registry.mega_tools import tool_name
from prism.web.requests import read_json
from prism.web.responses import dispatched_answer, json_response
from prism.webhooks.schemas import DeliveryQuery, WebhookQuery, parse

BASE = "/api/v1/risk-assessment/governance/webhooks"
TOOL = tool_name("config_manage")
WEBHOOK, DELIVERY = "webhook", "webhook_delivery"
SAFE_METHODS = ("GET", "HEAD")  # Starlette routes HEAD wherever GET goes


async def _dispatch(request: Request, entity: str, operation: str, arguments: Any, *, status: int = 200,
                    listed: bool = False) -> Response:
    """Dispatch the handler for the request's caller (headers as every door reads them) and render its data."""
    context = request_context(request.scope)
    try:
        auth = context.caller()
        # A door of its own (in the ledger, the metrics and idempotency keys' fingerprints): its answers have their
        # own shapes, so a key first used here is never replayed by the canonical door, nor the other way round.
        call = with_governance_headers(Call(tool_name=TOOL, door="webhooks", arguments=arguments, app="governance",
                                            entity=entity, operation=operation), context.headers)
        # Only a request that changes something is keyed (docs/idempotency.md, as Stripe's): a GET or HEAD ignores
        # the header, so a read answers what is there now, never a stored answer, and a key it carries is not read.
        if request.method not in SAFE_METHODS:
            call.idempotency_key = key_from_headers(context.headers)
        _, data = await request.app.state.dispatcher.dispatch(auth, call)
    except PrismError as exc:
        return PLAIN.response(exc, request.scope)
    data, headers = dispatched_answer(data)
    if status == 204:
        return Response(status_code=204, headers=headers)
    if listed:  # SPEC's names for the same list beside the envelope's
        data = {**data, "count": data["total"], "results": data["items"]}
    return json_response(data, status, headers)


async def _body(request: Request, **path: str) -> dict[str, Any]:
    """The JSON object sent, with the ids the path names (which the body may not name again). Read once the
    caller is authenticated: strangers learn nothing about its rules."""
    request_context(request.scope).caller()
    body = await read_json(request)
    if not isinstance(body, dict):
        raise InvalidArguments("the body must be a JSON object", field="body")
    for name in path:
        if name in body:
            raise InvalidArguments(f"{name}: given by the path, not the body", field=name)
    return {**body, **path}


def _query(request: Request, model: type[WebhookQuery] | type[DeliveryQuery]) -> dict[str, Any]:
    """The query's filters, read once the caller is authenticated (as `_body`)."""
    request_context(request.scope).caller()
    return parse(model, from_query(model, request.query_params), whole="query").model_dump()


async def collection(request: Request) -> Response:
    try:
        if request.method == "POST":
            return await _dispatch(request, WEBHOOK, "create", await _body(request), status=201)
        query = _query(request, WebhookQuery)
    except PrismError as exc:
        return PLAIN.response(exc, request.scope)
    return await _dispatch(request, WEBHOOK, "list", query, listed=True)


async def item(request: Request) -> Response:
    webhook_id = request.path_params["webhook_id"]
    if request.method in SAFE_METHODS:
        return await _dispatch(request, WEBHOOK, "read", {"id": webhook_id})
    if request.method == "DELETE":
        return await _dispatch(request, WEBHOOK, "delete", {"id": webhook_id}, status=204)
    try:
        body = await _body(request, id=webhook_id)
    except PrismError as exc:
        return PLAIN.response(exc, request.scope)
    return await _dispatch(request, WEBHOOK, "update", body)


async def deliveries(request: Request) -> Response:
    try:
        query = _query(request, DeliveryQuery)
    except PrismError as exc:
        return PLAIN.response(exc, request.scope)
    return await _dispatch(request, DELIVERY, "list", {**query, "webhook_id": request.path_params["webhook_id"]},
                           listed=True)


async def delivery(request: Request) -> Response:
    return await _dispatch(request, DELIVERY, "read", _delivery_of(request.path_params))


async def test_event(request: Request) -> Response:
    return await _dispatch(request, WEBHOOK, "test", {"id": request.path_params["webhook_id"]}, status=202)


async def resend(request: Request) -> Response:
    return await _dispatch(request, DELIVERY, "resend", _delivery_of(request.path_params), status=202)


def _delivery_of(path: Mapping[str, str]) -> dict[str, str]:
    return {"webhook_id": path["webhook_id"], "id": path["delivery_id"]}


def _both(path: str, endpoint: Callable[[Request], Awaitable[Response]], methods: list[str]) -> list[BaseRoute]:
    return door_routes(BASE + path, endpoint, methods, PLAIN)


def routes() -> list[BaseRoute]:
    from prism.webhooks import admin  # the browser page, served beside the API it drives

    return [
        *_both("/", collection, ["GET", "POST"]),
        *_both("/{webhook_id}/", item, ["GET", "PATCH", "DELETE"]),
        *_both("/{webhook_id}/test/", test_event, ["POST"]),
        *_both("/{webhook_id}/deliveries/", deliveries, ["GET"]),
        *_both("/{webhook_id}/deliveries/{delivery_id}/", delivery, ["GET"]),
        *_both("/{webhook_id}/deliveries/{delivery_id}/resend/", resend, ["POST"]),
        *admin.routes(),
    ]
