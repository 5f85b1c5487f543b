"""grant organizations: the organizations a user consented an OAuth grant to act in

Until now a grant named one organization (`oauth_grants.organization_id`) and its tokens could act in any
other organization of the user through X-Organization-Context. From here on a grant acts only in the
organizations recorded in `oauth_grant_organizations`; `oauth_grants.organization_id` stays as the default
one. Every existing grant keeps exactly its one organization, and a code issued before the upgrade but not
yet exchanged carries its one organization into the grant it becomes.

Revision ID: 0010_grant_organizations
Revises: 0009_mcp_legacy_streams
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_grant_organizations"
down_revision: str | None = "0009_mcp_legacy_streams"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Only the columns this migration reads or writes, as they are at this revision.
grants = sa.table("oauth_grants", sa.column("id", sa.String), sa.column("organization_id", sa.String))
grant_organizations = sa.table("oauth_grant_organizations", sa.column("grant_id", sa.String),
                               sa.column("organization_id", sa.String))
codes = sa.table("oauth_codes", sa.column("id", sa.String), sa.column("organization_id", sa.String),
                 sa.column("used_at", sa.DateTime), sa.column("organization_ids", sa.JSON))


def upgrade() -> None:
    op.create_table(
        "oauth_grant_organizations",
        sa.Column("grant_id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(["grant_id"], ["oauth_grants.id"],
                                name=op.f("fk_oauth_grant_organizations_grant_id_oauth_grants"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_oauth_grant_organizations_organization_id_organizations"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("grant_id", "organization_id", name=op.f("pk_oauth_grant_organizations")),
    )
    op.create_index(op.f("ix_oauth_grant_organizations_organization_id"), "oauth_grant_organizations",
                    ["organization_id"], unique=False)
    op.execute(grant_organizations.insert().from_select(
        ["grant_id", "organization_id"],
        sa.select(grants.c.id, grants.c.organization_id).where(grants.c.organization_id.is_not(None))))

    op.add_column("oauth_codes", sa.Column("organization_ids", sa.JSON(), nullable=True))
    connection = op.get_bind()
    # Through bound JSON values rather than SQL JSON functions: the two engines spell those differently.
    pending = connection.execute(sa.select(codes.c.id, codes.c.organization_id).where(
        codes.c.used_at.is_(None), codes.c.organization_id.is_not(None))).all()
    if pending:
        connection.execute(codes.update().where(codes.c.id == sa.bindparam("code_id")).values(
            organization_ids=sa.bindparam("chosen", type_=sa.JSON)),
            [{"code_id": code_id, "chosen": [organization_id]} for code_id, organization_id in pending])
    # A code already exchanged (or one chosen without an organization) never makes another grant.
    connection.execute(codes.update().where(codes.c.organization_ids.is_(None)).values(
        organization_ids=sa.bindparam("none_chosen", value=[], type_=sa.JSON)))
    with op.batch_alter_table("oauth_codes") as batch:
        batch.alter_column("organization_ids", existing_type=sa.JSON(), nullable=False)


def downgrade() -> None:
    # Grants keep their default organization (oauth_grants.organization_id); the others are forgotten.
    with op.batch_alter_table("oauth_codes") as batch:
        batch.drop_column("organization_ids")
    op.drop_index(op.f("ix_oauth_grant_organizations_organization_id"), table_name="oauth_grant_organizations")
    op.drop_table("oauth_grant_organizations")
