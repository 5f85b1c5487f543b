"""Each Prism endpoint as a request description; both clients send these and read the answers alike."""

from __future__ import annotations

from typing import Any

from prism_client._core import Call, coordinate_path, tool_path, webhook_path

DESCRIPTOR_PATH = "/.well-known/openapi.json"
INTROSPECT_FIELDS = ("dimension", "mega_tool", "app", "entity", "operation", "query", "rerank", "from_node",
                     "to_node", "topic")


def ping() -> Call:
    return Call("GET", "/api/v1/dev/ping/")


def me() -> Call:
    return Call("GET", "/api/v1/dev/me/")


def tools(category: str | None, search: str | None) -> Call:
    return Call("GET", "/api/v1/dev/tools/", params={"category": category, "search": search})


def introspect(params: dict[str, Any]) -> Call:
    unknown = sorted(set(params) - set(INTROSPECT_FIELDS))
    if unknown:
        raise TypeError(f"unknown introspect parameter {unknown[0]!r}; expected one of {INTROSPECT_FIELDS}")
    return Call("POST", "/api/v1/dev/introspect/", json={k: v for k, v in params.items() if v is not None})


def sandbox_call(name: str, arguments: dict[str, Any] | None) -> Call:
    return Call("POST", "/api/v1/dev/call/", json={"name": name, "arguments": arguments or {}})


def dispatch(mega_tool: str, app: str, entity: str, operation: str, arguments: dict[str, Any] | None,
             mission_id: str | None) -> Call:
    headers = {"X-Prism-Mission": mission_id} if mission_id else {}
    return Call("POST", coordinate_path(mega_tool, app, entity, operation), json=arguments or {}, headers=headers)


def call_tool(tool_name: str, envelope: dict[str, Any]) -> Call:
    return Call("POST", tool_path(tool_name), json=envelope)


def descriptor(etag: str | None) -> Call:
    return Call("GET", DESCRIPTOR_PATH, headers={"If-None-Match": etag} if etag else {},
                ok_statuses=frozenset({304}))


def create_webhook(name: str, url: str, fields: dict[str, Any]) -> Call:
    return Call("POST", webhook_path(), json={"name": name, "url": url, **_present(fields)})


def list_webhooks(page: int | None, page_size: int | None, is_active: bool | None, name: str | None) -> Call:
    return Call("GET", webhook_path(), params={"page": page, "page_size": page_size, "is_active": is_active,
                                               "name": name})


def get_webhook(webhook_id: str) -> Call:
    return Call("GET", webhook_path(webhook_id))


def update_webhook(webhook_id: str, fields: dict[str, Any]) -> Call:
    return Call("PATCH", webhook_path(webhook_id), json=fields)


def delete_webhook(webhook_id: str) -> Call:
    return Call("DELETE", webhook_path(webhook_id))


def list_deliveries(webhook_id: str, page: int | None, page_size: int | None, status: str | None,
                    event_type: str | None) -> Call:
    return Call("GET", webhook_path(webhook_id, "deliveries"), params={
        "page": page, "page_size": page_size, "status": status, "event_type": event_type})


def get_delivery(webhook_id: str, delivery_id: str) -> Call:
    return Call("GET", webhook_path(webhook_id, "deliveries", delivery_id))


def test_webhook(webhook_id: str) -> Call:
    return Call("POST", webhook_path(webhook_id, "test"))


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}
