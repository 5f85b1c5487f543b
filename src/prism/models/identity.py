from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class User(Base):
    """Users are global: one email, memberships in organizations of any tenant."""

    __tablename__ = "users"

    id: Mapped[str] = id_column()
    email: Mapped[str] = mapped_column(String(320), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = created_column()
    # Browser sessions (signed cookies, prism.web.browser) issued before this moment no longer sign the person
    # in: set when they sign out or their password changes, so a copied cookie dies with the session.
    sessions_ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class Role(Base):
    """A named set of permission patterns (`<app>.<verb>_<model>`, `*` wildcards) within a tenant."""

    __tablename__ = "roles"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)

    id: Mapped[str] = id_column()
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(63))
    permissions: Mapped[list[str]] = mapped_column(JSON, default=list)
    is_builtin: Mapped[bool] = mapped_column(Boolean, default=False)


class Membership(OrgScoped, Base):
    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("user_id", "organization_id"),)

    id: Mapped[str] = id_column()
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    role_id: Mapped[str] = mapped_column(ForeignKey("roles.id"))
    created_at: Mapped[datetime] = created_column()
