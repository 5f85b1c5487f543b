"""Column helpers shared by the built-in apps' tables."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from prism.kit.timeutil import utcnow
from prism.models.base import UTCDateTime


def org_id() -> Mapped[str]:
    """The owning organization; deleting an organization deletes its records."""
    return mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)


def ref(target: str, *, nullable: bool = False, cascade: bool = False) -> Mapped[str]:
    """A reference to another record of the same organization (checked by the handlers)."""
    return mapped_column(ForeignKey(target, ondelete="CASCADE" if cascade else None), index=True,
                         nullable=nullable)


def status(default: str) -> Mapped[str]:
    return mapped_column(String(32), default=default, index=True)


def updated_column() -> Mapped[datetime]:
    return mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


def moment(*, nullable: bool = True) -> Mapped[datetime | None]:
    return mapped_column(UTCDateTime(), nullable=nullable)
