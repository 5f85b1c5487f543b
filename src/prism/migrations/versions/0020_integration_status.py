"""integration status: whether an upstream MCP integration's stored tool list is the upstream's latest, and why not

Revision ID: 0020_integration_status
Revises: 0019_browser_sessions_ended
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0020_integration_status"
down_revision: str | None = "0019_browser_sessions_ended"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("integration_apps") as batch:
        batch.add_column(sa.Column("status", sa.String(length=16), server_default="ok", nullable=False))
        batch.add_column(sa.Column("last_error", sa.String(length=1000), server_default="", nullable=False))
        batch.add_column(sa.Column("last_error_at", prism.models.base.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("integration_apps") as batch:
        batch.drop_column("last_error_at")
        batch.drop_column("last_error")
        batch.drop_column("status")
