"""browser sessions ended: the moment before which a person's browser sessions no longer sign them in

Revision ID: 0019_browser_sessions_ended
Revises: 0018_money_in_bigint
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0019_browser_sessions_ended"
down_revision: str | None = "0018_money_in_bigint"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("sessions_ended_at", prism.models.base.UTCDateTime(timezone=True),
                                     nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("sessions_ended_at")
