"""Who owns each open legacy SSE stream, for deployments whose processes share PostgreSQL (prism.mcp_server.relay).

A row says: stream `id` is open in some process, for this tenant and credential, until `expires_at` (the
owning process pushes it forward while the stream is open and deletes the row when it closes; a process that
died leaves a row nobody refreshes, which stops counting at `expires_at` and is purged later).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime


class LegacyStreamClaim(Base):
    __tablename__ = "mcp_legacy_streams"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(36))
    credential_kind: Mapped[str] = mapped_column(String(16))
    credential_id: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
