"""Imported integrations (deployment-wide, or owned by the organization that imported them), each
organization's connection to one, and the record of every upstream call."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import org_id, updated_column
from prism.models.base import Base, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class IntegrationApp(Base):
    """One imported service: its operations, compiled once at import (prism.integrations.openapi).

    Not organization-scoped: its handlers are in every process's registry. An integration imported through
    the CLI belongs to the deployment (`owner_organization_id` NULL) and any organization may connect to it;
    one imported through `config_manage` belongs to that organization, which alone may connect, re-import or
    remove it."""

    __tablename__ = "integration_apps"

    id: Mapped[str] = id_column()
    name: Mapped[str] = mapped_column(String(40), unique=True)
    kind: Mapped[str] = mapped_column(String(16), default="openapi")
    title: Mapped[str] = mapped_column(String(255), default="")
    description: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(String(2048), default="")
    spec_digest: Mapped[str] = mapped_column(String(64), default="")
    default_server: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    operations: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    revision: Mapped[int] = mapped_column(Integer, default=1)
    owner_organization_id: Mapped[str | None] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True, nullable=True)
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()
    # An upstream MCP server's integration: "ok" while its stored tool list is the one last read from the
    # upstream, "stale" once the upstream announced a change that was not stored (`last_error` says why; the
    # stored list still serves). prism.integrations.mcp_upstream.follow_tool_list.
    status: Mapped[str] = mapped_column(String(16), default="ok", server_default="ok")
    last_error: Mapped[str] = mapped_column(String(1000), default="", server_default="")
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # `source` and `default_server` as given, when their columns cannot keep them whole (a token in the query
    # string): prism.integrations.sealed_urls.
    sealed_urls: Mapped[str | None] = mapped_column(Text, nullable=True)


class IntegrationConnection(OrgScoped, Base):
    """How one organization reaches an integration: base URL and credential (encrypted, bound to the row)."""

    __tablename__ = "integration_connections"
    __table_args__ = (UniqueConstraint("organization_id", "integration_id"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    integration_id: Mapped[str] = mapped_column(ForeignKey("integration_apps.id", ondelete="CASCADE"), index=True)
    base_url: Mapped[str] = mapped_column(String(2048))
    auth_kind: Mapped[str] = mapped_column(String(32), default="none")
    # Non-secret parts of the credential: header name, user name, token URL, client id, scope.
    auth_settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secret_encrypted: Mapped[str | None] = mapped_column(Text, nullable=True)
    timeout_seconds: Mapped[int] = mapped_column(Integer, default=10)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()
    # `base_url` and the token URL as given, when their columns cannot keep them whole (a token in the query
    # string): prism.integrations.sealed_urls.
    sealed_urls: Mapped[str | None] = mapped_column(Text, nullable=True)


class IntegrationCall(OrgScoped, Base):
    """One request to an upstream: what the ledger entry (written before it left) cannot know."""

    __tablename__ = "integration_calls"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    coordinate: Mapped[str] = mapped_column(String(255), index=True)
    method: Mapped[str] = mapped_column(String(8))
    path: Mapped[str] = mapped_column(String(2048))
    arguments_digest: Mapped[str] = mapped_column(String(64))
    upstream_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    outcome: Mapped[str] = mapped_column(String(32))
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    duration_ms: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(String(1000), default="")
    actor_email: Mapped[str] = mapped_column(String(320), default="")
    created_at: Mapped[datetime] = created_column()


class IntegrationGeneration(Base):
    """One row whose number grows with every change of integrations or connections: each process compares it
    with the one its registry was built from (prism.integrations.runtime)."""

    __tablename__ = "integration_generation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
