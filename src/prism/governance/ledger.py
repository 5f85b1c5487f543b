"""The hash-chained audit ledger: one chain per organization.

    hash = sha256(prev_hash ‖ canonical JSON of the entry)

Entries are appended by `ledger_writer.LedgerWriter`, which locks the organization's `audit_heads`
row, so concurrent processes extend the chain one after the other and never fork it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Table, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.kit.canonical import CANONICAL
from prism.kit.timeutil import iso
from prism.models.audit import AuditEntry, AuditHead

GENESIS_HASH = "0" * 64

audit_entries: Table = AuditEntry.__table__  # type: ignore[assignment]
audit_heads: Table = AuditHead.__table__  # type: ignore[assignment]


@dataclass(slots=True)
class EntryDraft:
    """Everything an entry says; `seq`, `prev_hash` and `hash` are added by the append."""

    organization_id: str
    tenant_id: str
    created_at: datetime
    actor_user_id: str | None
    credential_id: str | None
    door: str
    tool_name: str
    coordinate: str
    arguments_digest: str
    outcome: str
    error_code: str | None
    detail: dict[str, Any]


def entry_body(row: Any, seq: int, created_at_iso: str | None = None) -> dict[str, Any]:
    """The hashed fields, from a draft or a stored row: the same function for writing and verifying.

    `created_at_iso` is `iso(row.created_at)`, when the caller has it already (a batch's entries share one time).
    """
    return {
        "organization_id": row.organization_id, "seq": seq, "tenant_id": row.tenant_id,
        "created_at": iso(row.created_at) if created_at_iso is None else created_at_iso,
        "actor_user_id": row.actor_user_id,
        "credential_id": row.credential_id, "door": row.door, "tool_name": row.tool_name,
        "coordinate": row.coordinate, "arguments_digest": row.arguments_digest, "outcome": row.outcome,
        "error_code": row.error_code, "detail": row.detail,
    }


def chain_hash(prev_hash: str, body: dict[str, Any]) -> str:
    # SHA-256 (hex) of prev_hash ‖ canonical_json(body), in one call: it runs for every entry written and verified.
    return hashlib.sha256(prev_hash.encode() + orjson.dumps(body, option=CANONICAL)).hexdigest()


@dataclass(frozen=True)
class ChainReport:
    organization_id: str
    entries: int
    valid: bool
    first_broken_seq: int | None = None
    first_broken_id: int | None = None
    reason: str | None = None


async def verify_chain(session: AsyncSession, organization_id: str) -> ChainReport:
    """Recompute the chain from genesis; name the first entry that does not fit."""
    head = (await session.execute(select(audit_heads.c.seq, audit_heads.c.hash).where(
        audit_heads.c.organization_id == organization_id))).first()
    rows = await session.stream(select(audit_entries).where(
        audit_entries.c.organization_id == organization_id).order_by(audit_entries.c.seq))
    prev_hash, expected_seq, count = GENESIS_HASH, 1, 0

    def broken(seq: int, entry_id: int | None, reason: str) -> ChainReport:
        return ChainReport(organization_id, count, False, seq, entry_id, reason)

    async for row in rows:
        if row.seq != expected_seq:
            return broken(expected_seq, row.id, f"entry {expected_seq} is missing (found {row.seq} next)")
        if row.prev_hash != prev_hash:
            return broken(row.seq, row.id, "prev_hash does not match the previous entry's hash")
        if chain_hash(prev_hash, entry_body(row, row.seq)) != row.hash:
            return broken(row.seq, row.id, "contents do not match the entry's hash")
        prev_hash, expected_seq, count = row.hash, expected_seq + 1, count + 1
    if head is not None and (head.seq != count or head.hash != prev_hash):
        if head.seq > count:
            return broken(count + 1, None, f"entries {count + 1}..{head.seq} are missing from the end")
        return broken(head.seq, None, "chain head does not match the last entry")
    return ChainReport(organization_id, count, True)
