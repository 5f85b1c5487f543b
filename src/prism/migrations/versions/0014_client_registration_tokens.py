"""client registration tokens: the SHA-256 of each client's RFC 7592 registration access token

Clients registered before have none: they cannot be read, updated or deleted through their registration URI.

Revision ID: 0014_client_registration_tokens
Revises: 0013_ledger_tree
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_client_registration_tokens"
down_revision: str | None = "0013_ledger_tree"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("oauth_clients", sa.Column("registration_token_hash", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oauth_clients") as batch:
        batch.drop_column("registration_token_hash")
