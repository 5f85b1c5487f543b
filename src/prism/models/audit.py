"""The audit ledger's tables: entries, each organization's signed head, and its stored checkpoints.

An entry is written by the call's own transaction with its content hash and MAC, and without a position
(`seq` NULL). The sealer gives it the next position and adds it to the organization's Merkle tree
(prism.ledger). `prev_hash` and `hash` belong to entries written before the tree existed: a hash chain,
still verified as it was.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from prism.models.base import Base, Int64, UTCDateTime
from prism.tenancy.scope import OrgScoped


class AuditHead(OrgScoped, Base):
    """The tip of one organization's log: the signed tree head, and where the tree stands."""

    __tablename__ = "audit_heads"

    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True
    )
    # The hash chain of entries written before the Merkle tree (frozen since): its last position and hash.
    seq: Mapped[int] = mapped_column(BigInteger, default=0)
    hash: Mapped[str] = mapped_column(String(64))
    # The Merkle tree over every sealed entry: its size, root, the roots of its perfect subtrees (what an
    # append needs), and the signed checkpoint of exactly this state.
    tree_size: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    root: Mapped[str | None] = mapped_column(String(64))
    frontier: Mapped[list[str] | None] = mapped_column(JSON)
    checkpoint: Mapped[str | None] = mapped_column(Text)
    sealed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # When a checkpoint was last kept in audit_checkpoints (and sent as `audit.checkpoint`).
    checkpointed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Entries 1..pruned_through were archived and deleted; the stored checkpoint of that size is where
    # verification starts.
    pruned_through: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # The MAC (the organization's ledger key) over pruned_through and that checkpoint's root, written by the
    # prune: without it, deleting entries 1..N and setting pruned_through would pass as a prune.
    pruned_mac: Mapped[str | None] = mapped_column(String(64))


class AuditEntry(OrgScoped, Base):
    """One dispatch, allowed or refused."""

    __tablename__ = "audit_entries"
    __table_args__ = (
        UniqueConstraint("organization_id", "seq"),
        # What the sealer looks for: an organization's entries that have no position yet.
        Index("ix_audit_entries_unsealed", "organization_id", "id",
              sqlite_where=text("seq IS NULL"), postgresql_where=text("seq IS NULL")),
        # A log's positions start at 1 (a waiting entry has none: NULL passes a CHECK). Only on PostgreSQL: on
        # SQLite adding it to an existing database rebuilds the whole table (verification names such an entry
        # on both engines).
        CheckConstraint("seq >= 1", name="seq_from_1").ddl_if(dialect="postgresql"),
    )

    # One sequence numbers the entries of every organization of the deployment: 32 bits would run out.
    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    seq: Mapped[int | None] = mapped_column(BigInteger)
    tenant_id: Mapped[str] = mapped_column(String(36))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    actor_user_id: Mapped[str | None] = mapped_column(String(36))
    credential_id: Mapped[str | None] = mapped_column(String(36))
    door: Mapped[str] = mapped_column(String(32))
    tool_name: Mapped[str] = mapped_column(String(64))
    coordinate: Mapped[str] = mapped_column(String(255))
    arguments_digest: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))
    error_code: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[dict[str, object]] = mapped_column(JSON, default=dict)
    prev_hash: Mapped[str | None] = mapped_column(String(64))
    hash: Mapped[str | None] = mapped_column(String(64))
    # SHA-256 of the entry's canonical content (for chained entries: their chain hash), and the HMAC of its
    # position and that hash under the organization's ledger key, derived from the master secret, never stored.
    entry_hash: Mapped[str] = mapped_column(String(64))
    mac: Mapped[str | None] = mapped_column(String(64))


class AuditCheckpoint(OrgScoped, Base):
    """A signed tree head kept for later: where `--since` verification and pruned logs start."""

    __tablename__ = "audit_checkpoints"
    __table_args__ = (UniqueConstraint("organization_id", "tree_size"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    tree_size: Mapped[int] = mapped_column(BigInteger)
    root: Mapped[str] = mapped_column(String(64))
    frontier: Mapped[list[str]] = mapped_column(JSON)
    checkpoint: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
