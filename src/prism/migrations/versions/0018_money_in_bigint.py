"""money in BIGINT: amounts in cents, budgets and costs as 64-bit integers

Handlers take amounts up to 10^12 cents, and PostgreSQL's INTEGER holds 2^31 - 1 (21 million in a
currency's units): an invoice of 30 million was refused by the database. SQLite stores every integer in up to
64 bits whatever the declared type, so only PostgreSQL's columns change (ALTER TYPE, in place); the models
declare them `Int64` (prism.models.base).

Revision ID: 0018_money_in_bigint
Revises: 0017_key_tool_surface
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_money_in_bigint"
down_revision: str | None = "0017_key_tool_surface"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WIDENED = {
    "spare_parts": ("unit_cost_cents",),
    "maintenance_work_orders": ("parts_cost_cents",),
    "maintenance_wo_parts": ("unit_cost_cents", "amount_cents"),
    "finance_invoices": ("amount_cents",),
    "finance_payments": ("amount_cents",),
    "finance_purchase_orders": ("amount_cents",),
    "claims_claims": ("billed_cents", "approved_cents", "paid_cents"),
    "claims_claim_lines": ("unit_price_cents", "amount_cents"),
    "missions": ("budget_ceiling", "spent"),
    "personas": ("cost_cap",),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in WIDENED.items():
        for column in columns:
            op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer())


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in WIDENED.items():
        for column in columns:
            op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger())
