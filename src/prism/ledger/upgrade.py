"""What the upgrade across `0027_ledger_attested_prunes` does once, with the master secret, to logs as it finds
them: nothing else writes these MACs for state it did not make itself.

- A log pruned before prunes were attested has `pruned_through` set and no `pruned_mac`: the prune is attested
  now, over the kept checkpoint it starts from (only one this deployment signed for that organization, of that
  size; any other is left unattested, and verification reports the log).
- An entry left waiting by the Prism before has the MAC of position 0 alone: it gets the MAC bound to its row
  id, if its MAC fits it as written (one that does not fit keeps it, and verification names the entry).

At the upgrade the operator trusts the database as it is, as for entries written before the tree, which keep
verifying as they were. Run by `prism migrate` and `prism serve` when they apply that revision, or by `prism
audit seal --attest-upgraded-logs` if the upgrading process stopped before.
"""

from __future__ import annotations

import logging

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.ledger.checkpoints import MalformedCheckpoint, parse_checkpoint
from prism.ledger.entries import audit_checkpoints, audit_entries, audit_heads
from prism.ledger.keys import LedgerKeys

log = logging.getLogger("prism.ledger")


async def attest_logs_as_found(session: AsyncSession, keys: LedgerKeys) -> tuple[int, int]:
    """(prunes attested, waiting entries given their id-bound MAC)."""
    return await _attest_prunes(session, keys), await _bind_waiting_entries(session, keys)


async def _attest_prunes(session: AsyncSession, keys: LedgerKeys) -> int:
    heads = (await session.execute(select(audit_heads.c.organization_id, audit_heads.c.pruned_through).where(
        audit_heads.c.pruned_through > 0, audit_heads.c.pruned_mac.is_(None)))).all()
    attested = 0
    for organization_id, pruned_through in heads:
        text = (await session.execute(select(audit_checkpoints.c.checkpoint).where(
            audit_checkpoints.c.organization_id == organization_id,
            audit_checkpoints.c.tree_size == pruned_through))).scalar()
        try:
            start = parse_checkpoint(text) if text is not None else None
        except MalformedCheckpoint:
            start = None
        if not (start is not None and start.organization_id == organization_id
                and start.tree_size == pruned_through and start.verifies(keys.public_key)):
            log.error("the audit log of organization %s was pruned through %d, but no checkpoint this deployment "
                      "signed of that size is kept: its prune is not attested", organization_id, pruned_through)
            continue
        await session.execute(update(audit_heads).where(audit_heads.c.organization_id == organization_id).values(
            pruned_mac=keys.prune_mac(organization_id, pruned_through, start.root)))
        attested += 1
    return attested


async def _bind_waiting_entries(session: AsyncSession, keys: LedgerKeys) -> int:
    rows = (await session.execute(select(
        audit_entries.c.id, audit_entries.c.organization_id, audit_entries.c.entry_hash, audit_entries.c.mac)
        .where(audit_entries.c.seq.is_(None)))).all()
    bound = 0
    for entry_id, organization_id, entry_hash, mac in rows:
        try:
            written_before = keys.mac_fits(organization_id, 0, entry_hash, mac)
        except ValueError:  # a hash that is not hex: left as it is, for verification to name
            continue
        if written_before:
            await session.execute(update(audit_entries).where(audit_entries.c.id == entry_id).values(
                mac=keys.waiting_mac(organization_id, entry_id, entry_hash)))
            bound += 1
    return bound
