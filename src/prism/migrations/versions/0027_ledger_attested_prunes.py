"""ledger attested prunes: a prune is attested by a MAC, and a waiting entry's MAC binds its row id

`audit_heads.pruned_mac` holds the MAC (the organization's ledger key) over the archived range and the root of
the signed checkpoint verification starts from after it; without it, `pruned_through` was a column anyone who
can write to the database could set. The column starts empty: the `prism migrate` (or `prism serve`) that
applies this revision attests each log's prune as it finds it, and gives entries still waiting their MAC bound
to their row id (prism.ledger.upgrade), since at the upgrade the operator trusts the database as it is.

Revision ID: 0027_ledger_attested_prunes
Revises: 0026_integration_url_secrets
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027_ledger_attested_prunes"
down_revision: str | None = "0026_integration_url_secrets"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_heads") as batch:
        batch.add_column(sa.Column("pruned_mac", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_heads") as batch:
        batch.drop_column("pruned_mac")
