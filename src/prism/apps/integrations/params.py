"""Parameter models of the integrations app."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from prism.apps.params import ListParams, Params
from prism.kit.secret import QUERY_WITH_SECRETS, URL_WITH_SECRETS
from prism.kit.validation import Moment

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class EndpointList(ListParams):
    status: Literal["enabled", "disabled"] | None = Field(None, description="Only enabled or disabled endpoints.")


class EndpointCreate(Params):
    name: str = Field(..., min_length=1, max_length=255, description="Endpoint name, unique per organization.")
    description: str = Field("", max_length=5000, description="What the external system does.")
    base_url: str = Field(..., min_length=9, max_length=2048, description="HTTPS URL calls are sent to.",
                          json_schema_extra=URL_WITH_SECRETS)
    default_method: Method = Field("POST", description="HTTP method used when a call names none.")
    headers: dict[str, str] = Field(default_factory=dict, max_length=20,
                                    description="Extra non-secret headers sent with every call.")
    timeout_seconds: int = Field(10, ge=1, le=30, description="Seconds to wait for the response.")


class EndpointUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Endpoint id.")
    description: str | None = Field(None, max_length=5000, description="What the external system does.")
    base_url: str | None = Field(None, min_length=9, max_length=2048, description="HTTPS URL calls are sent to.",
                                 json_schema_extra=URL_WITH_SECRETS)
    default_method: Method | None = Field(None, description="HTTP method used when a call names none.")
    headers: dict[str, str] | None = Field(None, max_length=20, description="Extra non-secret headers.")
    timeout_seconds: int | None = Field(None, ge=1, le=30, description="Seconds to wait for the response.")


class CallLogList(ListParams):
    endpoint_id: str | None = Field(None, max_length=64, description="Only calls to this endpoint.")
    ok: bool | None = Field(None, description="Only successful (2xx) or failed calls.")
    method: Method | None = Field(None, description="Only calls with this method.")


class EndpointAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Endpoint id.")


class Call(EndpointAction):
    method: Method | None = Field(None, description="HTTP method (default: the endpoint's).")
    path: str = Field("", max_length=1024, pattern=r"^(/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?$",
                      description="Path appended to the endpoint's base URL, starting with /.")
    query: dict[str, str] = Field(default_factory=dict, max_length=50, description="Query-string parameters.",
                                  json_schema_extra=QUERY_WITH_SECRETS)
    body: Any = Field(None, description="JSON body to send (ignored for GET).")


class HealthParams(Params):
    since: Moment | None = Field(None, description="Only calls made after this time.")
