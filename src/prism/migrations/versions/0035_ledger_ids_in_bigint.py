"""ledger ids in BIGINT, positions from 1: entries numbered past 2^31, no entry outside a log

`audit_entries.id` is numbered by one sequence for every organization of the deployment. On PostgreSQL the
column and its sequence were 32-bit INTEGER: after 2^31 - 1 entries no call could be audited, so every call of
every tenant failed. The column, its sequence and the columns that hold an entry's id or position
(`governance_violations.audit_entry_id`, `audit_seq`) become BIGINT; the type change rewrites those tables (a
time proportional to their size, under an exclusive lock). SQLite stores every integer in up to 64 bits, so
nothing changes there.

On PostgreSQL a CHECK keeps every position at 1 or more (waiting entries have none, NULL): an entry stored at
position 0 or below lies outside the log. Prism never wrote one, so existing rows pass. SQLite gets no CHECK:
adding one there rebuilds the largest table of the deployment; verification names such an entry on both engines.

Revision ID: 0035_ledger_ids_in_bigint
Revises: 0034_itsm_ticket_counters
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035_ledger_ids_in_bigint"
down_revision: str | None = "0034_itsm_ticket_counters"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WIDENED = {"audit_entries": ("id",), "governance_violations": ("audit_entry_id", "audit_seq")}
SEQ_FROM_1 = "ck_audit_entries_seq_from_1"


def _entry_id_sequence() -> str:
    name: str = op.get_bind().execute(sa.text("SELECT pg_get_serial_sequence('audit_entries', 'id')")).scalar_one()
    return name


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in WIDENED.items():
        for column in columns:
            op.alter_column(table, column, type_=sa.BigInteger(), existing_type=sa.Integer(), existing_nullable=False)
    # The sequence's maximum was INTEGER's; AS bigint raises it to BIGINT's.
    op.execute(f"ALTER SEQUENCE {_entry_id_sequence()} AS bigint")
    op.create_check_constraint(op.f(SEQ_FROM_1), "audit_entries", "seq >= 1")


def downgrade() -> None:
    """Fails, as it must, once an id or position lies beyond 2^31 - 1."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_constraint(op.f(SEQ_FROM_1), "audit_entries", type_="check")
    op.execute(f"ALTER SEQUENCE {_entry_id_sequence()} AS integer")
    for table, columns in WIDENED.items():
        for column in columns:
            op.alter_column(table, column, type_=sa.Integer(), existing_type=sa.BigInteger(), existing_nullable=False)
