"""Typed shapes of Prism's answers (SPEC.md "Resources"), as TypedDicts: plain dicts at run time."""

from __future__ import annotations

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
    tools: list[ToolDescriptor]
    count: int


class Page(TypedDict):
    """The data of a list operation."""

    items: list[dict[str, Any]]
    page: int
    page_size: int
    total: int


class Webhook(TypedDict):
    id: str
    name: str
    url: str
    events: list[str]
    is_active: bool
    created_at: str
    description: NotRequired[str | None]
    filters: NotRequired[dict[str, Any] | None]
    custom_headers: NotRequired[dict[str, str] | None]
    max_retries: NotRequired[int]
    retry_delay_seconds: NotRequired[int]
    timeout_seconds: NotRequired[int]
    secret: NotRequired[str]


DeliveryStatus = Literal["pending", "retrying", "success", "failed"]


class Delivery(TypedDict):
    id: str
    event_type: str
    event_id: str
    status: DeliveryStatus
    response_status_code: int | None
    response_body: NotRequired[str | None]
    error_message: str | None
    attempt_count: int
    created_at: str
    delivered_at: str | None
    next_retry_at: str | None
    is_test: bool


class WebhookList(TypedDict):
    count: int
    results: list[Webhook]


class DeliveryList(TypedDict):
    count: int
    results: list[Delivery]


class Descriptor(TypedDict):
    """A fetched OpenAPI descriptor with its ETag; `document` is None when it had not changed (304)."""

    etag: str | None
    document: dict[str, Any] | None
