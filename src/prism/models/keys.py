from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class ApiKey(OrgScoped, Base):
    """An API key: only its SHA-256 is stored; `lookup` (the first characters) finds the row."""

    __tablename__ = "api_keys"

    id: Mapped[str] = id_column()
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    prefix: Mapped[str] = mapped_column(String(8))
    lookup: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = created_column()
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Governance (prism.governance): the persona whose policy applies, the AI system it acts for.
    persona_id: Mapped[str | None] = mapped_column(String(36))
    ai_system_id: Mapped[str | None] = mapped_column(String(36))
    # The MCP tool surface this key asks for ("mega", "split"); None: the deployment's PRISM_MCP_TOOL_SURFACE.
    tool_surface: Mapped[str | None] = mapped_column(String(8))
