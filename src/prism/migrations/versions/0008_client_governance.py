"""client governance: the persona and AI system of an OAuth client's tokens, per organization

Revision ID: 0008_client_governance
Revises: 0007_webhooks
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0008_client_governance"
down_revision: str | None = "0007_webhooks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "client_governance",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("client_id", sa.String(length=128), nullable=False),
        sa.Column("persona_id", sa.String(length=36), nullable=True),
        sa.Column("ai_system_id", sa.String(length=36), nullable=True),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["client_id"], ["oauth_clients.client_id"],
                                name=op.f("fk_client_governance_client_id_oauth_clients"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_client_governance_organization_id_organizations"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_client_governance")),
        sa.UniqueConstraint("organization_id", "client_id", name="uq_client_governance_org_client"),
    )
    op.create_index(op.f("ix_client_governance_client_id"), "client_governance", ["client_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_client_governance_client_id"), table_name="client_governance")
    op.drop_table("client_governance")
