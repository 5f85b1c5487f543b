"""Typed shapes of Prism's answers (SPEC.md "Resources"), as TypedDicts: plain dicts at run time.

The annotations are evaluated (no `from __future__ import annotations`), so that `__required_keys__` and
`__optional_keys__` tell a NotRequired field apart at run time too.
"""

from typing import Any, Literal, NotRequired, TypedDict


class Ping(TypedDict):
    service: str
    version: str
    status: str


class KeyInfo(TypedDict):
    prefix: str
    name: str
    created_at: str
    last_used_at: str | None
    scopes: list[str]


class UserInfo(TypedDict):
    id: str
    email: str


class TenantInfo(TypedDict):
    id: str
    name: str | None
    subdomain: str | None


class Identity(TypedDict):
    authenticated: bool
    key: KeyInfo
    user: UserInfo
    tenant: TenantInfo
    organization: NotRequired[dict[str, Any]]


class ToolDescriptor(TypedDict):
    name: str
    description: str
    category: str | None
    parameters: dict[str, Any]


class ToolCatalog(TypedDict):
    """One page of the catalog: SPEC's `tools` and `count`, and the same page and total as Prism's list envelope."""

    tools: list[ToolDescriptor]
    count: int
    items: list[ToolDescriptor]
    page: int
    page_size: int
    total: int


class Page(TypedDict):
    """The data of a list operation."""

    items: list[dict[str, Any]]
    page: int
    page_size: int
    total: int


class Webhook(TypedDict):
    id: str
    name: str
    description: str | None
    url: str
    events: list[str]
    filters: dict[str, Any]
    custom_headers: dict[str, str]  # names with their values masked: they often hold credentials
    max_retries: int
    retry_delay_seconds: int
    timeout_seconds: int
    is_active: bool
    deactivated_reason: str | None  # why Prism switched it off (a 410 Gone, consecutive failures), else None
    created_at: str
    updated_at: str
    secret: NotRequired[str]  # answered by create (and a replay of it) only


DeliveryStatus = Literal["pending", "retrying", "success", "failed"]


class Delivery(TypedDict):
    id: str
    webhook_id: str
    event_type: str
    event_id: str
    status: DeliveryStatus
    response_status_code: int | None
    response_body: str | None
    error_message: str | None
    attempt_count: int
    created_at: str
    delivered_at: str | None
    next_retry_at: str | None
    is_test: bool


class WebhookList(TypedDict):
    """One page: SPEC's `count` and `results`, and the same total and items as Prism's list envelope."""

    count: int
    results: list[Webhook]
    items: list[Webhook]
    page: int
    page_size: int
    total: int


class DeliveryList(TypedDict):
    """One page: SPEC's `count` and `results`, and the same total and items as Prism's list envelope."""

    count: int
    results: list[Delivery]
    items: list[Delivery]
    page: int
    page_size: int
    total: int


class Descriptor(TypedDict):
    """A fetched OpenAPI descriptor with its ETag; `document` is None when it had not changed (304)."""

    etag: str | None
    document: dict[str, Any] | None
