"""oversight arguments: the escalated call's arguments, for the person who decides it to read

Revision ID: 0016_oversight_arguments
Revises: 0015_integrations_imported
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_oversight_arguments"
down_revision: str | None = "0015_integrations_imported"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("oversight_requests", sa.Column("arguments", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oversight_requests") as batch:
        batch.drop_column("arguments")
