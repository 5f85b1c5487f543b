"""refresh grace: the sealed pair a refresh token was rotated into, for a concurrent refresh to receive

Revision ID: 0012_refresh_grace
Revises: 0011_idempotency_keys
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_refresh_grace"
down_revision: str | None = "0011_idempotency_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("oauth_refresh_tokens", sa.Column("successor_sealed", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oauth_refresh_tokens") as batch:
        batch.drop_column("successor_sealed")
