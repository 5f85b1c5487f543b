"""key tool surface: the MCP tool surface an API key asks for (mega, split; none: the deployment's setting)

Revision ID: 0017_key_tool_surface
Revises: 0016_oversight_arguments
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_key_tool_surface"
down_revision: str | None = "0016_oversight_arguments"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("tool_surface", sa.String(8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("tool_surface")
