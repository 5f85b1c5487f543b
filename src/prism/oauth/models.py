"""Tables of the authorization server.

Clients are global (Dynamic Client Registration is anonymous and happens before anyone signs in).
Codes, grants and refresh tokens are credentials: like API keys they are found by the hash of a secret
the caller presents, before any organization is known, so they are looked up by that hash, not through
an organization repository. Nothing secret is stored in plaintext: client secrets, registration access
tokens, codes and refresh tokens as SHA-256, signing keys encrypted (see prism.oauth.keys), the pair a refresh
token was rotated into encrypted under a key only that refresh token opens (see prism.oauth.refresh).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, UTCDateTime, created_column, id_column
from prism.tenancy.scope import OrgScoped


class OAuthClient(Base):
    __tablename__ = "oauth_clients"

    id: Mapped[str] = id_column()
    client_id: Mapped[str] = mapped_column(String(128), unique=True)
    client_name: Mapped[str] = mapped_column(String(255))
    redirect_uris: Mapped[list[str]] = mapped_column(JSON)
    grant_types: Mapped[list[str]] = mapped_column(JSON)
    response_types: Mapped[list[str]] = mapped_column(JSON)
    token_endpoint_auth_method: Mapped[str] = mapped_column(String(32))
    scope: Mapped[str | None] = mapped_column(Text)
    # Other registered metadata (client_uri, logo_uri, software_id ...), echoed back, never interpreted.
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secret_hash: Mapped[str | None] = mapped_column(String(64))
    # SHA-256 of the normalized registration: the same registration sent again finds this client.
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = created_column()
    # SHA-256 of the RFC 7592 registration access token (shown once, at creation); None for clients registered
    # before (they cannot be managed through their registration URI). Last, where its migration added it.
    registration_token_hash: Mapped[str | None] = mapped_column(String(64))


class OAuthSigningKey(Base):
    __tablename__ = "oauth_signing_keys"

    kid: Mapped[str] = mapped_column(String(64), primary_key=True)
    public_jwk: Mapped[dict[str, Any]] = mapped_column(JSON)
    private_key_encrypted: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = created_column()
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class OAuthGrant(OrgScoped, Base):
    """One authorization (a token family): every access and refresh token issued from one code."""

    __tablename__ = "oauth_grants"

    id: Mapped[str] = id_column()
    client_id: Mapped[str] = mapped_column(String(128), index=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # The default organization: the one its tokens act in when a request names none (the `org` claim). It is
    # also one of the grant's organizations (`OAuthGrantOrganization`). None when the user authorized without
    # an organization: its tokens get 403 session_incomplete.
    organization_id: Mapped[str | None] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    scope: Mapped[str] = mapped_column(Text)
    issuer: Mapped[str] = mapped_column(String(512))
    audience: Mapped[str] = mapped_column(String(512))
    created_at: Mapped[datetime] = created_column()
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class OAuthGrantOrganization(OrgScoped, Base):
    """An organization the user consented the grant to act in: its tokens act in these and nowhere else."""

    __tablename__ = "oauth_grant_organizations"

    grant_id: Mapped[str] = mapped_column(ForeignKey("oauth_grants.id", ondelete="CASCADE"), primary_key=True)
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"),
                                                 primary_key=True, index=True)


class OAuthCode(OrgScoped, Base):
    __tablename__ = "oauth_codes"

    id: Mapped[str] = id_column()
    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    client_id: Mapped[str] = mapped_column(String(128))
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    organization_id: Mapped[str | None] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    redirect_uri: Mapped[str] = mapped_column(Text)
    redirect_uri_sent: Mapped[bool] = mapped_column(default=True)
    code_challenge: Mapped[str] = mapped_column(String(128))
    scope: Mapped[str] = mapped_column(Text)
    issuer: Mapped[str] = mapped_column(String(512))
    audience: Mapped[str] = mapped_column(String(512))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # The grant the code was exchanged for: revoked when the code is replayed.
    grant_id: Mapped[str | None] = mapped_column(String(36))
    created_at: Mapped[datetime] = created_column()
    # Every organization chosen on the consent page, the default (`organization_id`) first. (Last: a column
    # added by a migration comes last in the table, and a database created from the models must match.)
    organization_ids: Mapped[list[str]] = mapped_column(JSON)


class OAuthRefreshToken(Base):
    __tablename__ = "oauth_refresh_tokens"
    __table_args__ = (Index("ix_oauth_refresh_tokens_grant", "grant_id"),)

    id: Mapped[str] = id_column()
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    grant_id: Mapped[str] = mapped_column(ForeignKey("oauth_grants.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = created_column()
    # The access and refresh token this one was rotated into, sealed so that only the holder of this token
    # can open them, kept for the refresh grace window (prism.oauth.refresh), then cleared. (Last, where its
    # migration added it, so created and migrated databases have one column order.)
    successor_sealed: Mapped[str | None] = mapped_column(Text)
