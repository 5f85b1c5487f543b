"""credentials of former members end: API keys and OAuth consent of people no longer members

Removing a member used to delete the membership alone: their API keys for the organization and their OAuth grants'
consent to it stayed, refused only for want of a membership, and worked again the day the person was added back.
Removal now ends them (prism.identity.service); this ends those left by removals before it, as removal does: keys
revoked, the organization withdrawn from the grants' consent (and as their default), and a grant left consented
to no organization revoked. Stepping down changes nothing back: what was ended stays ended.

Revision ID: 0036_former_members_credentials
Revises: 0035_ledger_ids_in_bigint
"""

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from prism.models.base import UTCDateTime

revision: str = "0036_former_members_credentials"
down_revision: str | None = "0035_ledger_ids_in_bigint"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

memberships = sa.table("memberships", sa.column("user_id", sa.String), sa.column("organization_id", sa.String))
api_keys = sa.table("api_keys", sa.column("user_id", sa.String), sa.column("organization_id", sa.String),
                    sa.column("revoked_at", UTCDateTime()))
grants = sa.table("oauth_grants", sa.column("id", sa.String), sa.column("user_id", sa.String),
                  sa.column("organization_id", sa.String), sa.column("revoked_at", UTCDateTime()))
consents = sa.table("oauth_grant_organizations", sa.column("grant_id", sa.String),
                    sa.column("organization_id", sa.String))


def _member(user_id: sa.ColumnElement[str], organization_id: sa.ColumnElement[str]) -> sa.Exists:
    return sa.exists().where(memberships.c.user_id == user_id, memberships.c.organization_id == organization_id)


def upgrade() -> None:
    bind, now = op.get_bind(), datetime.now(UTC)
    bind.execute(api_keys.update().where(api_keys.c.revoked_at.is_(None),
                                         ~_member(api_keys.c.user_id, api_keys.c.organization_id))
                 .values(revoked_at=now))
    withdrawn = sa.select(consents.c.grant_id, consents.c.organization_id).join(
        grants, grants.c.id == consents.c.grant_id).where(~_member(grants.c.user_id, consents.c.organization_id))
    rows = bind.execute(withdrawn).all()
    for grant_id, organization_id in rows:
        bind.execute(consents.delete().where(consents.c.grant_id == grant_id,
                                             consents.c.organization_id == organization_id))
    bind.execute(grants.update().where(grants.c.organization_id.is_not(None),
                                       ~_member(grants.c.user_id, grants.c.organization_id))
                 .values(organization_id=None))
    affected = sorted({grant_id for grant_id, _ in rows})
    if affected:
        still_consented = sa.exists().where(consents.c.grant_id == grants.c.id)
        bind.execute(grants.update().where(grants.c.id.in_(affected), grants.c.revoked_at.is_(None),
                                           ~still_consented).values(revoked_at=now))


def downgrade() -> None:
    pass
