"""webhook delivery fair claims: the indexes a claim in which organizations take turns reads

`ix_webhook_deliveries_org_due` (organization_id, due_at): an organization's oldest due deliveries, read per
organization at each claim (prism.webhooks.claim_order). `ix_webhook_deliveries_leased` (claimed_until, partial:
only rows a worker holds or held): how many deliveries each organization has in flight, read at each claim; the
rest of the table (every final delivery) has no lease and stays out of it.

Revision ID: 0028_webhook_fair_claims
Revises: 0027_ledger_attested_prunes
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028_webhook_fair_claims"
down_revision: str | None = "0027_ledger_attested_prunes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEASED = "claimed_until IS NOT NULL"


def upgrade() -> None:
    op.create_index("ix_webhook_deliveries_org_due", "webhook_deliveries", ["organization_id", "due_at"])
    op.create_index("ix_webhook_deliveries_leased", "webhook_deliveries", ["claimed_until"],
                    sqlite_where=sa.text(LEASED), postgresql_where=sa.text(LEASED))


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_leased", table_name="webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_org_due", table_name="webhook_deliveries")
