"""idempotency keys: the first answer of each (credential, Idempotency-Key), replayed to its repeats

Revision ID: 0011_idempotency_keys
Revises: 0010_grant_organizations
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0011_idempotency_keys"
down_revision: str | None = "0010_grant_organizations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_keys")),
    )
    op.create_index(op.f("ix_idempotency_keys_expires_at"), "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_idempotency_keys_expires_at"), table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
