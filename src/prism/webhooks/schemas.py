"""Wire shapes of the webhook management API, with every validation rule of SPEC.md "Webhook".

Invalid input is one error shape: 400 `invalid_arguments`, `message` listing every problem and
`details.errors[]` with `{field, message}` each.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from prism.events.catalog import EVENT_TYPE_NAMES
from prism.kit.header_values import sendable
from prism.kit.paging import Paging
from prism.kit.secret import URL_WITH_SECRETS, WRITE_ONLY
from prism.kit.validation import validated

SECRET_PREFIX = "whk_secret_"  # noqa: S105 -- a prefix, not a secret
MAX_RETRIES = 4  # retries after the first attempt: at most 5 attempts (SPEC.md "Limits")
FILTER_KEYS = ("ai_system_ids", "risk_levels", "decision_types")
# Prism sets these itself on every delivery; a custom header may not replace them.
RESERVED_HEADERS = frozenset({"content-type", "host", "content-length", "user-agent", "transfer-encoding",
                              "connection"})
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}\Z")  # an RFC 9110 token

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]


def _check_events(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    unknown = sorted({e for e in value if e not in EVENT_TYPE_NAMES})
    if unknown:
        raise ValueError(f"unknown event types {unknown}; see entity_crud/core/webhook_event/list")
    return list(dict.fromkeys(value))


def _check_filters(value: dict[str, Any] | None) -> dict[str, list[str]] | None:
    if value is None:
        return None
    unknown = sorted(set(value) - set(FILTER_KEYS))
    if unknown:
        raise ValueError(f"unknown filter keys {unknown}; allowed: {', '.join(FILTER_KEYS)}")
    clean: dict[str, list[str]] = {}
    for key, items in value.items():
        if not isinstance(items, list) or not all(isinstance(i, str) and i and len(i) <= 255 for i in items):
            raise ValueError(f"{key} must be an array of non-empty strings")
        if len(items) > 100:
            raise ValueError(f"{key} may list at most 100 values")
        if items:
            clean[key] = list(dict.fromkeys(items))
    return clean


def _check_headers(value: dict[str, Any] | None) -> dict[str, str] | None:
    if value is None:
        return None
    if len(value) > 20:
        raise ValueError("at most 20 custom headers")
    seen: set[str] = set()
    for name, header_value in value.items():
        if not _HEADER_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid header name")
        lowered = name.lower()
        if lowered in RESERVED_HEADERS or lowered.startswith("x-governance-"):
            raise ValueError(f"{name} is set by Prism and cannot be overridden")
        if lowered in seen:
            raise ValueError(f"{name} is given twice")
        seen.add(lowered)
        if not isinstance(header_value, str):
            raise ValueError(f"the value of {name} must be a string")
        if not sendable(header_value) or len(header_value) > 4096:
            raise ValueError(f"the value of {name} must be one line of at most 4096 characters, without control "
                             "characters (a tab is allowed)")
    return dict(value)


class _Fields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(default=None, max_length=2000)
    events: list[str] | None = None
    filters: dict[str, Any] | None = None
    custom_headers: dict[str, Any] | None = Field(default=None, json_schema_extra=WRITE_ONLY)  # values masked when read
    retry_delay_seconds: int | None = Field(default=None, ge=1, le=3600)
    timeout_seconds: int | None = Field(default=None, ge=1, le=60)
    max_retries: int | None = Field(default=None, ge=0, le=MAX_RETRIES)

    _events = field_validator("events")(_check_events)
    _filters = field_validator("filters")(_check_filters)
    _headers = field_validator("custom_headers")(_check_headers)


class WebhookCreate(_Fields):
    name: Name
    # Receivers often take a key in the URL's query: reviewers of a held call see it withheld (prism.governance).
    url: str = Field(max_length=2048, json_schema_extra=URL_WITH_SECRETS)


class WebhookUpdate(_Fields):
    name: Name | None = None
    url: str | None = Field(default=None, max_length=2048, json_schema_extra=URL_WITH_SECRETS)
    secret: str | None = Field(default=None, min_length=len(SECRET_PREFIX) + 24, max_length=255,
                               json_schema_extra=WRITE_ONLY)
    is_active: bool | None = None

    @field_validator("secret")
    @classmethod
    def _secret_shape(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith(SECRET_PREFIX) or any(c.isspace() for c in value)):
            raise ValueError(f"must start with {SECRET_PREFIX} and contain no whitespace")
        return value


class DeliveryQuery(Paging):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    status: str | None = Field(default=None, pattern="^(pending|retrying|success|failed)$")
    event_type: str | None = Field(default=None, max_length=64)


class WebhookQuery(Paging):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    is_active: bool | None = None
    name: str | None = Field(default=None, max_length=255)


M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], data: Any, *, whole: str = "body") -> M:
    """The model, or InvalidArguments naming every bad field (never a 500 for client input)."""
    return validated(model, data, whole=whole)
