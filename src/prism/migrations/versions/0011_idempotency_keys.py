"""idempotency keys: the first answer of each (credential, Idempotency-Key), replayed to its repeats

Revision ID: 0011_idempotency_keys
Revises: 0010_grant_organizations
"""

from collections.abc import Sequence

revision: str = "0011_idempotency_keys"
down_revision: str | None = "0010_grant_organizations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
