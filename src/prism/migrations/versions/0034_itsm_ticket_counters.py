"""itsm ticket counters: a ticket number is never given twice

A new ticket took the highest number of its organization's tickets plus one, so deleting the latest ticket gave
its number to the next one. `itsm_ticket_counters` keeps the last number each organization gave out. Each
organization with tickets starts from its highest number, so existing organizations count on where they were.
Stepping down drops the counters (the code before reads the tickets' highest number again).

Revision ID: 0034_itsm_ticket_counters
Revises: 0033_oversight_mission
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034_itsm_ticket_counters"
down_revision: str | None = "0033_oversight_mission"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

tickets = sa.table("itsm_tickets", sa.column("organization_id", sa.String), sa.column("number", sa.Integer))


def upgrade() -> None:
    counters = op.create_table(
        "itsm_ticket_counters",
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("last_number", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_itsm_ticket_counters_organization_id_organizations"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("organization_id", name=op.f("pk_itsm_ticket_counters")),
    )
    op.get_bind().execute(counters.insert().from_select(
        ["organization_id", "last_number"],
        sa.select(tickets.c.organization_id, sa.func.max(tickets.c.number)).group_by(tickets.c.organization_id)))


def downgrade() -> None:
    op.drop_table("itsm_ticket_counters")
