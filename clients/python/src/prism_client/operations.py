"""Each Prism endpoint as a request description; both clients send these and read the answers alike.

The calls that change something (canonical dispatch, the tool door, the sandbox call and webhook management's
POST, PATCH and DELETE, a delivery's resend included) are built by `_keyed`, which gives each its idempotency
key: Prism keeps their answers by key, so a retry of one cannot run it twice. A DELETE is repeatable without
one, but its repeat would answer 404 for the webhook the first attempt deleted; with the key it gets the first
attempt's 204.
"""

from __future__ import annotations

from typing import Any

from prism_client._core import Call, coordinate_path, tool_path, webhook_path
from prism_client.retries import IdempotencyKey, idempotency_key_for

DESCRIPTOR_PATH = "/.well-known/openapi.json"
PAGE_SIZE_MAX = 100  # the largest page Prism's lists answer: the fewest requests for an iteration
INTROSPECT_FIELDS = ("dimension", "mega_tool", "app", "entity", "operation", "query", "rerank", "from_node",
                     "to_node", "topic")


def ping() -> Call:
    return Call("GET", "/api/v1/dev/ping/")


def me() -> Call:
    return Call("GET", "/api/v1/dev/me/")


def tools(category: str | None, search: str | None, page: int | None, page_size: int | None) -> Call:
    return Call("GET", "/api/v1/dev/tools/", params={"category": category, "search": search, "page": page,
                                                     "page_size": page_size})


def introspect(params: dict[str, Any]) -> Call:
    unknown = sorted(set(params) - set(INTROSPECT_FIELDS))
    if unknown:
        raise TypeError(f"unknown introspect parameter {unknown[0]!r}; expected one of {INTROSPECT_FIELDS}")
    # GET, not POST with the same parameters: a read, so a gateway's 502/504 can be retried.
    return Call("GET", "/api/v1/dev/introspect/", params=params)


def sandbox_call(name: str, arguments: dict[str, Any] | None, key: IdempotencyKey) -> Call:
    return _keyed("POST", "/api/v1/dev/call/", key, json={"name": name, "arguments": arguments or {}})


def dispatch(mega_tool: str, app: str, entity: str, operation: str, arguments: dict[str, Any] | None,
             mission_id: str | None, key: IdempotencyKey) -> Call:
    headers = {"X-Prism-Mission": mission_id} if mission_id else {}
    return _keyed("POST", coordinate_path(mega_tool, app, entity, operation), key, json=arguments or {},
                  headers=headers)


def call_tool(tool_name: str, envelope: dict[str, Any], key: IdempotencyKey) -> Call:
    return _keyed("POST", tool_path(tool_name), key, json=envelope)


def descriptor(etag: str | None) -> Call:
    return Call("GET", DESCRIPTOR_PATH, headers={"If-None-Match": etag} if etag else {},
                ok_statuses=frozenset({304}))


def create_webhook(name: str, url: str, fields: dict[str, Any], key: IdempotencyKey) -> Call:
    return _keyed("POST", webhook_path(), key, json={"name": name, "url": url, **_present(fields)})


def list_webhooks(page: int | None, page_size: int | None, is_active: bool | None, name: str | None) -> Call:
    return Call("GET", webhook_path(), params={"page": page, "page_size": page_size, "is_active": is_active,
                                               "name": name})


def get_webhook(webhook_id: str) -> Call:
    return Call("GET", webhook_path(webhook_id))


def update_webhook(webhook_id: str, fields: dict[str, Any], key: IdempotencyKey) -> Call:
    return _keyed("PATCH", webhook_path(webhook_id), key, json=fields)


def delete_webhook(webhook_id: str, key: IdempotencyKey) -> Call:
    return _keyed("DELETE", webhook_path(webhook_id), key)


def list_deliveries(webhook_id: str, page: int | None, page_size: int | None, status: str | None,
                    event_type: str | None) -> Call:
    return Call("GET", webhook_path(webhook_id, "deliveries"), params={
        "page": page, "page_size": page_size, "status": status, "event_type": event_type})


def get_delivery(webhook_id: str, delivery_id: str) -> Call:
    return Call("GET", webhook_path(webhook_id, "deliveries", delivery_id))


def test_webhook(webhook_id: str, key: IdempotencyKey) -> Call:
    return _keyed("POST", webhook_path(webhook_id, "test"), key)


def resend_delivery(webhook_id: str, delivery_id: str, key: IdempotencyKey) -> Call:
    return _keyed("POST", webhook_path(webhook_id, "deliveries", delivery_id, "resend"), key)


def next_page(listed: dict[str, Any]) -> int | None:
    """The number of the page after this one, or None when this one is the last: Prism's lists page by offset
    (`page`, `page_size`) and say how many items there are in all (`total`)."""
    if not listed["items"] or listed["page"] * listed["page_size"] >= listed["total"]:
        return None
    return int(listed["page"]) + 1


def _keyed(method: str, path: str, key: IdempotencyKey, *, json: Any = None,
           headers: dict[str, str] | None = None) -> Call:
    # The key is drawn here, once per logical call: every retry of the call sends the same one.
    return Call(method, path, json=json, headers=headers or {}, idempotency_key=idempotency_key_for(key))


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}
