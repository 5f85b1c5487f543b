from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import moment, org_id, ref, status
from prism.models.base import Base, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Endpoint(OrgScoped, Base):
    """A configured outbound HTTPS endpoint of an external system."""

    __tablename__ = "integrations_endpoints"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    # Without its query values (`?api_key=********`); the URL as given is in `sealed_urls`.
    base_url: Mapped[str] = mapped_column(String(2048))
    default_method: Mapped[str] = mapped_column(String(8), default="POST")
    headers: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timeout_seconds: Mapped[int] = mapped_column(Integer, default=10)
    status: Mapped[str] = status("enabled")
    last_called_at: Mapped[datetime | None] = moment()
    last_status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = created_column()
    # The base URL as given, sealed (prism.apps.integrations.endpoint_urls); None when `base_url` is it whole.
    sealed_urls: Mapped[str | None] = mapped_column(Text, nullable=True)


class CallLog(OrgScoped, Base):
    """One outbound call: what was asked, what came back (first 1000 characters), how long it took."""

    __tablename__ = "integrations_call_logs"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    endpoint_id: Mapped[str] = ref("integrations_endpoints.id", cascade=True)
    method: Mapped[str] = mapped_column(String(8))
    # As the endpoint's `base_url` is kept: query values withheld, the URL as sent sealed in `sealed_urls`.
    url: Mapped[str] = mapped_column(String(4096))
    request_bytes: Mapped[int] = mapped_column(Integer, default=0)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ok: Mapped[bool] = mapped_column(Boolean, default=False)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(String(1000), default="")
    response_excerpt: Mapped[str] = mapped_column(Text, default="")
    actor_email: Mapped[str] = mapped_column(String(320), default="")
    created_at: Mapped[datetime] = created_column()
    sealed_urls: Mapped[str | None] = mapped_column(Text, nullable=True)
