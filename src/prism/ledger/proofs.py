"""Proofs anyone with the public key can check: that an entry is in a signed tree, that a tree extends another.

    proof = await prove_inclusion(session, organization_id, keys, seq)              # against the signed head
    proof = await prove_consistency(session, organization_id, keys, old_checkpoint)

Both are RFC 9162 proofs (prism.ledger.merkle), computed from the leaves read from the database: every sealed
entry's (seq, entry_hash) up to the tree's size, O(n) rows and hashes per proof (a few seconds at a million
entries). The leaves are checked against the signed root they are proved against first, so a proof is never
made from a log that does not match its own signature. `examples/ledger_verifier.py` checks the documents.

A pruned log (prism.ledger.archive) has lost the leaves of its archived entries, which every proof needs:
proofs are refused there; the archive file holds the archived entries and their signed checkpoint.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import InvalidArguments, NotFound, PrismError
from prism.ledger.checkpoints import UNSIGNED_HEAD_HINT, Checkpoint, MalformedCheckpoint, parse_checkpoint
from prism.ledger.entries import audit_entries, audit_heads, content_of
from prism.ledger.keys import LedgerKeys
from prism.ledger.merkle import Frontier, consistency_proof, inclusion_proof, leaf_hash


class LogMismatch(PrismError):
    """The stored entries do not make the signed root a proof would be against."""

    code, status = "log_mismatch", 409


async def prove_inclusion(session: AsyncSession, organization_id: str, keys: LedgerKeys, seq: int,
                          against: Checkpoint | None = None) -> dict[str, Any]:
    """The entry at `seq`, its leaf and audit path in the tree of `against` (default: the signed head)."""
    head = await _unpruned_head(session, organization_id)
    checkpoint = _checked(against, organization_id, keys, head) if against else parse_checkpoint(head.checkpoint)
    if not 1 <= seq <= checkpoint.tree_size:
        raise NotFound(f"entry {seq} is not in the tree of {checkpoint.tree_size} entries", code="entry_not_found")
    leaves = await _leaves(session, organization_id, checkpoint)
    row = (await session.execute(select(audit_entries).where(
        audit_entries.c.organization_id == organization_id, audit_entries.c.seq == seq))).one()
    return {
        "entry": entry_document(row),
        "leaf_index": seq - 1,
        "leaf": leaves[seq - 1].hex(),
        "tree_size": checkpoint.tree_size,
        "audit_path": [h.hex() for h in inclusion_proof(seq - 1, leaves)],
        "checkpoint": checkpoint.as_dict(),
    }


async def prove_consistency(session: AsyncSession, organization_id: str, keys: LedgerKeys,
                            old: Checkpoint) -> dict[str, Any]:
    """That the tree of `old` (a checkpoint exported earlier) is a prefix of the tree of the signed head."""
    head = await _unpruned_head(session, organization_id)
    old = _checked(old, organization_id, keys, head)
    current = parse_checkpoint(head.checkpoint)
    leaves = await _leaves(session, organization_id, current)
    if _root(leaves[:old.tree_size]) != old.root:
        raise LogMismatch(f"the log's first {old.tree_size} entries do not make that checkpoint's root: the log "
                          "was changed since it was signed, or the checkpoint is not of this log")
    proof = consistency_proof(old.tree_size, leaves) if old.tree_size else []
    return {"old_size": old.tree_size, "new_size": current.tree_size, "proof": [h.hex() for h in proof],
            "old_checkpoint": old.as_dict(), "checkpoint": current.as_dict()}


def entry_document(row: Any) -> dict[str, Any]:
    """An entry as proofs and archives show it: its hashed content, position and hash (and, for an entry of the
    hash chain kept from before the tree, the previous hash its chain hash covers)."""
    document: dict[str, Any] = {"seq": row.seq, "entry_hash": row.entry_hash, "content": content_of(row)}
    if row.prev_hash is not None:
        document["prev_hash"] = row.prev_hash
    return document


def checkpoint_argument(data: dict[str, Any], source: str) -> Checkpoint:
    """A checkpoint given on the command line (a file's parsed JSON); any frontier beside it is ignored."""
    try:
        return parse_checkpoint({k: v for k, v in data.items() if k != "frontier"})
    except MalformedCheckpoint as exc:
        raise InvalidArguments(f"{source}: {exc}") from exc


async def _unpruned_head(session: AsyncSession, organization_id: str) -> Any:
    head = (await session.execute(select(audit_heads).where(
        audit_heads.c.organization_id == organization_id))).first()
    if head is None or head.checkpoint is None:
        raise NotFound("this organization's log has no signed head: " + UNSIGNED_HEAD_HINT,
                       code="checkpoint_not_found")
    if head.pruned_through:
        raise PrismError(f"entries 1..{head.pruned_through} of this log were archived and pruned; proofs need "
                         "every leaf: check archived entries with their archive file", code="log_pruned",
                         status=409)
    return head


def _checked(checkpoint: Checkpoint, organization_id: str, keys: LedgerKeys, head: Any) -> Checkpoint:
    if checkpoint.organization_id != organization_id:
        raise InvalidArguments(f"the checkpoint is of another log ({checkpoint.origin})", code="wrong_log")
    if not checkpoint.verifies(keys.public_key):
        raise InvalidArguments("the checkpoint's signature does not verify with this deployment's key",
                               code="bad_signature")
    if checkpoint.tree_size > head.tree_size:
        raise InvalidArguments(f"the checkpoint has {checkpoint.tree_size} entries, the log {head.tree_size}",
                               code="checkpoint_too_large")
    return checkpoint


async def _leaves(session: AsyncSession, organization_id: str, checkpoint: Checkpoint) -> list[bytes]:
    """The leaves of the checkpoint's tree, read in order and checked against its signed root."""
    rows = await session.stream(
        select(audit_entries.c.seq, audit_entries.c.entry_hash)
        .where(audit_entries.c.organization_id == organization_id, audit_entries.c.seq.is_not(None),
               audit_entries.c.seq <= checkpoint.tree_size)
        .order_by(audit_entries.c.seq).execution_options(yield_per=10_000))
    leaves: list[bytes] = []
    async for seq, entry_hash in rows:
        if seq != len(leaves) + 1:
            raise LogMismatch(f"entry {len(leaves) + 1} is missing; run `prism audit verify`")
        try:
            digest = bytes.fromhex(entry_hash)
        except ValueError:  # rewritten in the database: a refusal, as any log that does not make its root
            raise LogMismatch(f"entry {seq}'s hash is not hex; run `prism audit verify`") from None
        leaves.append(leaf_hash(seq, digest))
    if len(leaves) != checkpoint.tree_size or _root(leaves) != checkpoint.root:
        raise LogMismatch(f"the log's entries do not make the signed root of its first {checkpoint.tree_size} "
                          "entries; run `prism audit verify`")
    return leaves


def _root(leaves: list[bytes]) -> str:
    # The frontier's root, not tree_root's recursion: the same value, without slicing the list at every level.
    tree = Frontier()
    for leaf in leaves:
        tree.append(leaf)
    return tree.root().hex()
