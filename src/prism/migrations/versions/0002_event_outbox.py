"""event outbox

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "event_outbox",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("event_type", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_event_outbox_organization_id_organizations"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_event_outbox")),
    )
    op.create_index("ix_event_outbox_org_created", "event_outbox", ["organization_id", "created_at"])
    op.create_index(op.f("ix_event_outbox_event_type"), "event_outbox", ["event_type"])


def downgrade() -> None:
    op.drop_index(op.f("ix_event_outbox_event_type"), table_name="event_outbox")
    op.drop_index("ix_event_outbox_org_created", table_name="event_outbox")
    op.drop_table("event_outbox")
