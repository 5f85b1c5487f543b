"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import httpx

from prism_client import operations as ops
from prism_client._core import Call, check, connection_error, default_headers, unwrap
from prism_client.deadline import DeadlineTransport, deadline_after
from prism_client.errors import PrismTimeoutError
from prism_client.retries import GENERATED_KEY, IdempotencyKey, RetryPolicy
from prism_client.types import (
    Delivery,
    DeliveryList,
    Descriptor,
    Identity,
    Ping,
    ToolCatalog,
    ToolDescriptor,
    Webhook,
    WebhookList,
)


class PrismClient:
    """Prism over HTTP with a Bearer key (or OAuth access token).

        with PrismClient("https://acme.prism.example", api_key="ck_...") as prism:
            page = prism.dispatch("entity_crud", "finance", "invoice", "list", {"status": "approved"})

    A 429 is retried, and a 502, 503, 504 or broken connection when sending the call again cannot run it twice:
    a read, or a call carrying an idempotency key. Every call that changes something (`dispatch`, `call_tool`,
    `call`, and the webhooks' create, update, delete, test event and resend) sends one (a random UUID4, the same
    on each retry) unless given `idempotency_key` (a key of the caller's, or None for none). Retries:
    `max_retries`, Retry-After honoured up to `max_retry_after` (longer: raised at once, with `retry_after`).
    `timeout` bounds each attempt as a whole: connecting, sending, the headers and the body together.
    """

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 30.0, max_retries: int = 3,
                 backoff_base: float = 0.5, backoff_max: float = 30.0, max_retry_after: float = 120.0,
                 headers: dict[str, str] | None = None, transport: httpx.BaseTransport | None = None) -> None:
        self.retry = RetryPolicy(max_retries, backoff_base, backoff_max, max_retry_after)
        self.timeout = timeout
        # The timeout bounds the whole attempt through the transport's sockets; a transport of the caller's
        # bounds what it bounds itself (httpx's: each connect, read and write).
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout,
                                  transport=transport or DeadlineTransport(),
                                  headers=default_headers(api_key, headers), follow_redirects=False)

    def __enter__(self) -> PrismClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, call: Call) -> httpx.Response:
        """Send with the retry policy; the last answer (an error status included) is returned."""
        attempt = 0
        while True:
            try:
                response = self._attempt(call)
            except httpx.TimeoutException as exc:
                raise PrismTimeoutError(f"{call.method} {call.path}: no whole answer in {self.timeout} s") from exc
            except (httpx.UnsupportedProtocol, httpx.LocalProtocolError):
                # The request cannot be sent as built (a base URL that is not http(s), a header value HTTP cannot
                # carry): the caller's mistake, raised as it is, not a broken connection to retry.
                raise
            except httpx.TransportError as exc:
                wait = self.retry.wait_after_broken_connection(attempt=attempt, repeatable=call.repeatable)
                if wait is None:
                    raise connection_error(call, exc) from exc
            else:
                wait = self.retry.wait_after_answer(response, attempt=attempt, repeatable=call.repeatable)
                if wait is None:
                    return response
                response.close()
            time.sleep(wait)
            attempt += 1

    def _attempt(self, call: Call) -> httpx.Response:
        """One sending of the call, its answer read to the end within `timeout` seconds (see deadline.py)."""
        with deadline_after(self.timeout):
            return self._http.send(call.build(self._http))

    def _json(self, call: Call) -> Any:
        return check(self.request(call), call)

    # --- sandbox -------------------------------------------------------------------------------------

    def ping(self) -> Ping:
        return cast(Ping, self._json(ops.ping()))

    def me(self) -> Identity:
        return cast(Identity, self._json(ops.me()))

    def tools(self, *, category: str | None = None, search: str | None = None, page: int | None = None,
              page_size: int | None = None) -> ToolCatalog:
        return cast(ToolCatalog, self._json(ops.tools(category, search, page, page_size)))

    def introspect(self, **params: Any) -> dict[str, Any]:
        return cast(dict[str, Any], self._json(ops.introspect(params)))

    def call(self, name: str, arguments: dict[str, Any] | None = None, *,
             idempotency_key: IdempotencyKey = GENERATED_KEY) -> Any:
        """POST /api/v1/dev/call/: the bare tool result."""
        return self._json(ops.sandbox_call(name, arguments, idempotency_key))

    # --- canonical dispatch --------------------------------------------------------------------------

    def dispatch(self, mega_tool: str, app: str, entity: str, operation: str,
                 arguments: dict[str, Any] | None = None, *, mission_id: str | None = None,
                 idempotency_key: IdempotencyKey = GENERATED_KEY) -> Any:
        """POST /prism/{mega_tool}/{app}/{entity}/{operation}: the `data` of the envelope."""
        call = ops.dispatch(mega_tool, app, entity, operation, arguments, mission_id, idempotency_key)
        response = self.request(call)
        return unwrap(check(response, call), response.status_code)

    def call_tool(self, tool_name: str, *, app: str, entity: str, operation: str,
                  arguments: dict[str, Any] | None = None,
                  idempotency_key: IdempotencyKey = GENERATED_KEY) -> Any:
        """POST /api/mcp/tools/<tool_name>/ with the envelope: the `data` of the answer."""
        call = ops.call_tool(tool_name, {"app": app, "entity": entity, "operation": operation,
                                         "arguments": arguments or {}}, idempotency_key)
        response = self.request(call)
        return unwrap(check(response, call), response.status_code)

    def descriptor(self, *, etag: str | None = None) -> Descriptor:
        """The host's OpenAPI descriptor; with `etag`, `document` is None while it is unchanged."""
        call = ops.descriptor(etag)
        response = self.request(call)
        body = check(response, call)
        return {"etag": response.headers.get("etag"), "document": None if response.status_code == 304 else body}

    # --- webhooks ------------------------------------------------------------------------------------

    def create_webhook(self, name: str, url: str, *, idempotency_key: IdempotencyKey = GENERATED_KEY,
                         **fields: Any) -> Webhook:
        return cast(Webhook, self._json(ops.create_webhook(name, url, fields, idempotency_key)))

    def list_webhooks(self, *, page: int | None = None, page_size: int | None = None,
                      is_active: bool | None = None, name: str | None = None) -> WebhookList:
        return cast(WebhookList, self._json(ops.list_webhooks(page, page_size, is_active, name)))

    def get_webhook(self, webhook_id: str) -> Webhook:
        return cast(Webhook, self._json(ops.get_webhook(webhook_id)))

    def update_webhook(self, webhook_id: str, *, idempotency_key: IdempotencyKey = GENERATED_KEY,
                         **fields: Any) -> Webhook:
        return cast(Webhook, self._json(ops.update_webhook(webhook_id, fields, idempotency_key)))

    def delete_webhook(self, webhook_id: str, *, idempotency_key: IdempotencyKey = GENERATED_KEY) -> None:
        self._json(ops.delete_webhook(webhook_id, idempotency_key))

    def list_deliveries(self, webhook_id: str, *, page: int | None = None, page_size: int | None = None,
                        status: str | None = None, event_type: str | None = None) -> DeliveryList:
        return cast(DeliveryList, self._json(ops.list_deliveries(webhook_id, page, page_size, status, event_type)))

    def get_delivery(self, webhook_id: str, delivery_id: str) -> Delivery:
        return cast(Delivery, self._json(ops.get_delivery(webhook_id, delivery_id)))

    def send_test_event(self, webhook_id: str, *, idempotency_key: IdempotencyKey = GENERATED_KEY) -> Delivery:
        return cast(Delivery, self._json(ops.test_webhook(webhook_id, idempotency_key)))

    def resend_delivery(self, webhook_id: str, delivery_id: str, *,
                        idempotency_key: IdempotencyKey = GENERATED_KEY) -> Delivery:
        """A new delivery of the delivery's event (same bytes, fresh signature and id); the original stays."""
        return cast(Delivery, self._json(ops.resend_delivery(webhook_id, delivery_id, idempotency_key)))

    # --- every page of a list ------------------------------------------------------------------------

    def iter_tools(self, *, category: str | None = None, search: str | None = None,
                   page_size: int = ops.PAGE_SIZE_MAX) -> Iterator[ToolDescriptor]:
        """Every tool of the catalog, page after page."""
        return self._every(lambda page: ops.tools(category, search, page, page_size))

    def iter_webhooks(self, *, is_active: bool | None = None, name: str | None = None,
                      page_size: int = ops.PAGE_SIZE_MAX) -> Iterator[Webhook]:
        """Every webhook, newest first, page after page."""
        return self._every(lambda page: ops.list_webhooks(page, page_size, is_active, name))

    def iter_deliveries(self, webhook_id: str, *, status: str | None = None, event_type: str | None = None,
                        page_size: int = ops.PAGE_SIZE_MAX) -> Iterator[Delivery]:
        """Every delivery of a webhook, newest first, page after page."""
        return self._every(lambda page: ops.list_deliveries(webhook_id, page, page_size, status, event_type))

    def _every(self, list_page: Callable[[int], Call]) -> Iterator[Any]:
        page: int | None = 1
        while page is not None:
            listed = self._json(list_page(page))
            yield from listed["items"]
            page = ops.next_page(listed)

