"""ledger tree: entries sealed into a signed Merkle tree per organization, checkpoints, retention

Entries written from now on carry their content hash and MAC and get their position when sealed (`seq` NULL
until then). Entries written before keep their chain hashes and verify as they did; their chain hash is their
content hash in the tree, which the first seal after the upgrade builds over them.

Revision ID: 0013_ledger_tree
Revises: 0012_refresh_grace
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import prism.models.base

revision: str = "0013_ledger_tree"
down_revision: str | None = "0012_refresh_grace"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("audit_entries") as batch:
        batch.add_column(sa.Column("entry_hash", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("mac", sa.String(length=64), nullable=True))
        batch.alter_column("seq", existing_type=sa.BigInteger(), nullable=True)
        batch.alter_column("prev_hash", existing_type=sa.String(length=64), nullable=True)
        batch.alter_column("hash", existing_type=sa.String(length=64), nullable=True)
    op.execute("UPDATE audit_entries SET entry_hash = hash")
    with op.batch_alter_table("audit_entries") as batch:
        batch.alter_column("entry_hash", existing_type=sa.String(length=64), nullable=False)
        batch.create_index("ix_audit_entries_unsealed", ["organization_id", "id"], unique=False,
                           sqlite_where=sa.text("seq IS NULL"), postgresql_where=sa.text("seq IS NULL"))
    with op.batch_alter_table("audit_heads") as batch:
        batch.add_column(sa.Column("tree_size", sa.BigInteger(), server_default="0", nullable=False))
        batch.add_column(sa.Column("root", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("frontier", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("checkpoint", sa.Text(), nullable=True))
        batch.add_column(sa.Column("sealed_at", prism.models.base.UTCDateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("checkpointed_at", prism.models.base.UTCDateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("pruned_through", sa.BigInteger(), server_default="0", nullable=False))
    op.create_table(
        "audit_checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("tree_size", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.String(length=64), nullable=False),
        sa.Column("frontier", sa.JSON(), nullable=False),
        sa.Column("checkpoint", sa.Text(), nullable=False),
        sa.Column("created_at", prism.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_audit_checkpoints_organization_id_organizations"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_checkpoints")),
        sa.UniqueConstraint("organization_id", "tree_size", name=op.f("uq_audit_checkpoints_organization_id")),
    )
    with op.batch_alter_table("organizations") as batch:
        batch.add_column(sa.Column("audit_retention_days", sa.Integer(), nullable=True))


def downgrade() -> None:
    # Entries written under the tree have no chain hash: the chain this steps back to cannot hold them.
    sealed_as_tree = op.get_bind().execute(sa.text(
        "SELECT COUNT(*) FROM audit_entries WHERE prev_hash IS NULL")).scalar()
    if sealed_as_tree:
        raise RuntimeError(f"{sealed_as_tree} audit entries were written under the signed tree; the hash chain "
                           "before 0013_ledger_tree cannot hold them, so this downgrade would lose them: not done")
    with op.batch_alter_table("organizations") as batch:
        batch.drop_column("audit_retention_days")
    op.drop_table("audit_checkpoints")
    with op.batch_alter_table("audit_heads") as batch:
        for column in ("pruned_through", "checkpointed_at", "sealed_at", "checkpoint", "frontier", "root", "tree_size"):
            batch.drop_column(column)
    with op.batch_alter_table("audit_entries") as batch:
        batch.drop_index("ix_audit_entries_unsealed")
        batch.drop_column("mac")
        batch.drop_column("entry_hash")
