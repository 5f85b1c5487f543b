"""webhook pending organizations: a claim finds the organizations with deliveries pending instead of visiting every
organization that has a webhook

`ix_webhook_deliveries_pending` (organization_id, due_at, partial: only deliveries not yet final, due_at set): a
claim steps through it from one organization to the next (a loose index scan, prism.webhooks.claim_order), then
reads each of those organizations' oldest due deliveries from it. Final deliveries, most of the table, stay out of
it. `ix_webhook_deliveries_org_due` stays: it serves the organization's foreign key (deleting an organization).

Revision ID: 0032_webhook_pending_orgs
Revises: 0031_oversight_url_secrets
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032_webhook_pending_orgs"
down_revision: str | None = "0031_oversight_url_secrets"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = "due_at IS NOT NULL"


def upgrade() -> None:
    op.create_index("ix_webhook_deliveries_pending", "webhook_deliveries", ["organization_id", "due_at"],
                    sqlite_where=sa.text(PENDING), postgresql_where=sa.text(PENDING))


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_pending", table_name="webhook_deliveries")
