"""What a ledger entry says, and the hashes that bind it.

An entry's content is hashed when its call's transaction writes it:

    entry_hash = SHA-256(canonical JSON of the content)
    mac = HMAC-SHA256(organization key, position ‖ entry_hash)      (position 0 until sealed; prism.ledger.keys)

Its position (`seq`) is not part of the content: the sealer gives it one later, moves the MAC to it, and commits
to both in the tree's leaf (prism.ledger.merkle). Entries written before the tree existed are a hash chain instead,

    hash = SHA-256(prev_hash ‖ canonical JSON of the content and seq)

and keep verifying that way (`legacy_chain_hash`); their chain hash is their `entry_hash`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Table

from prism.kit.canonical import CANONICAL
from prism.kit.timeutil import iso
from prism.models.audit import AuditCheckpoint, AuditEntry, AuditHead

GENESIS_HASH = "0" * 64

audit_entries: Table = AuditEntry.__table__  # type: ignore[assignment]
audit_heads: Table = AuditHead.__table__  # type: ignore[assignment]
audit_checkpoints: Table = AuditCheckpoint.__table__  # type: ignore[assignment]


@dataclass(slots=True)
class EntryDraft:
    """Everything an entry says; its hashes are added when it is written, its position when it is sealed."""

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


# The columns a batch writes for each entry: what a draft says (its content), its hash, position and MAC.
WRITTEN_COLUMNS = (*(field.name for field in fields(EntryDraft)), "entry_hash", "seq", "mac")


def content_of(row: Any, created_at_iso: str | None = None) -> dict[str, Any]:
    """The hashed fields, from a draft or a stored row: the same function for writing and verifying.

    `created_at_iso` is `iso(row.created_at)`, when the caller has it already (a batch's entries share one time).
    """
    return {
        "organization_id": row.organization_id, "tenant_id": row.tenant_id,
        "created_at": iso(row.created_at) if created_at_iso is None else created_at_iso,
        "actor_user_id": row.actor_user_id,
        "credential_id": row.credential_id, "door": row.door, "tool_name": row.tool_name,
        "coordinate": row.coordinate, "arguments_digest": row.arguments_digest, "outcome": row.outcome,
        "error_code": row.error_code, "detail": row.detail,
    }


def content_hash(content: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(content, option=CANONICAL)).hexdigest()


def legacy_chain_hash(prev_hash: str, content: dict[str, Any], seq: int) -> str:
    """The hash of an entry written before the tree: its content with its position, chained to the previous."""
    body = {**content, "seq": seq}
    return hashlib.sha256(prev_hash.encode() + orjson.dumps(body, option=CANONICAL)).hexdigest()
