"""Webhook management API under /api/v1/risk-assessment/governance/webhooks/ (SPEC.md "Webhook management").

Errors answer `{error, message}` (+ `details.errors[]` for validation) with the PrismError's status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from prism.auth.context import AuthContext
from prism.edge.doors import PLAIN, door_routes
from prism.errors import PrismError
from prism.web.requests import caller, read_json
from prism.web.responses import json_response
from prism.webhooks import service
from prism.webhooks.schemas import DeliveryQuery, WebhookCreate, WebhookQuery, WebhookUpdate, parse

BASE = "/api/v1/risk-assessment/governance/webhooks"
Work = Callable[[AsyncSession, AuthContext, Any], Awaitable[Any]]


def _error(exc: PrismError, request: Request) -> Response:
    return PLAIN.response(exc, request.scope)


async def _answer(request: Request, work: Work, *, status: int = 200, read_only: bool = False,
                  body_model: type[BaseModel] | None = None) -> Response:
    """Authenticate, read the body (after authentication: strangers learn nothing about its rules), run the
    work in one transaction committed before answering, render."""
    try:
        auth = caller(request)
        body = parse(body_model, await read_json(request)) if body_model is not None else None
        db = request.app.state.db
        async with db.read() if read_only else db.write() as session:
            result = await work(session, auth, body)
    except PrismError as exc:
        return _error(exc, request)
    if status == 204:
        return Response(status_code=204)
    return json_response(result, status)


async def _listed(listing: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """The list envelope, with SPEC's names for the same list (`count`, `results`) beside it."""
    listed = await listing
    return {**listed, "count": listed["total"], "results": listed["items"]}


async def collection(request: Request) -> Response:
    settings = request.app.state.settings
    if request.method == "POST":
        return await _answer(request, lambda s, a, body: service.create_webhook(s, a, settings, body),
                             status=201, body_model=WebhookCreate)
    try:
        query = parse(WebhookQuery, dict(request.query_params), whole="query")
    except PrismError as exc:
        return _error(exc, request)
    return await _answer(request, lambda s, a, _: _listed(service.list_webhooks(s, a, query)), read_only=True)


async def item(request: Request) -> Response:
    webhook_id = request.path_params["webhook_id"]
    settings = request.app.state.settings
    if request.method in ("GET", "HEAD"):  # Starlette routes HEAD wherever GET goes
        return await _answer(request, lambda s, a, _: service.get_webhook(s, a, webhook_id), read_only=True)
    if request.method == "DELETE":
        return await _answer(request, lambda s, a, _: service.delete_webhook(s, a, webhook_id), status=204)
    return await _answer(request, lambda s, a, body: service.update_webhook(s, a, settings, webhook_id, body),
                         body_model=WebhookUpdate)


async def deliveries(request: Request) -> Response:
    webhook_id = request.path_params["webhook_id"]
    try:
        query = parse(DeliveryQuery, dict(request.query_params), whole="query")
    except PrismError as exc:
        return _error(exc, request)
    return await _answer(request, lambda s, a, _: _listed(service.list_deliveries(s, a, webhook_id, query)),
                         read_only=True)


async def delivery(request: Request) -> Response:
    webhook_id, delivery_id = request.path_params["webhook_id"], request.path_params["delivery_id"]
    return await _answer(request, lambda s, a, _: service.get_delivery(s, a, webhook_id, delivery_id),
                         read_only=True)


async def test_event(request: Request) -> Response:
    webhook_id = request.path_params["webhook_id"]
    return await _answer(request, lambda s, a, _: service.send_test_event(s, a, webhook_id), status=202)


async def resend(request: Request) -> Response:
    webhook_id, delivery_id = request.path_params["webhook_id"], request.path_params["delivery_id"]
    return await _answer(request, lambda s, a, _: service.resend_delivery(s, a, webhook_id, delivery_id),
                         status=202)


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
