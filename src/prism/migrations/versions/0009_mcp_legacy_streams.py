"""mcp legacy streams: which process-independent claim each open legacy SSE stream has

Revision ID: 0009_mcp_legacy_streams
Revises: 0008_client_governance
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0009_mcp_legacy_streams"
down_revision: str | None = "0008_client_governance"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_legacy_streams",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=36), nullable=False),
        sa.Column("credential_kind", sa.String(length=16), nullable=False),
        sa.Column("credential_id", sa.String(length=128), nullable=False),
        sa.Column("expires_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mcp_legacy_streams")),
    )
    op.create_index(op.f("ix_mcp_legacy_streams_expires_at"), "mcp_legacy_streams", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_mcp_legacy_streams_expires_at"), table_name="mcp_legacy_streams")
    op.drop_table("mcp_legacy_streams")
