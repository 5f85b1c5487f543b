"""ledger: the organization's audit ledger, read through the API (audit_query).

Permissions: `ledger.view_entry` (list and read entries, held by every seeded role through `*.view_*`),
`ledger.view_log` (verify the log), and `ledger.export_entry` (bulk export), which only owners and admins hold
by default: an export hands over who called what, in bulk.
"""

from __future__ import annotations

from typing import Any

from prism.apps import shipped_examples
from prism.apps.ledger.params import EntryExport, EntryList, EntryRead, LogVerify
from prism.errors import PrismError
from prism.ledger import queries
from prism.ledger.checkpoints import MalformedCheckpoint
from prism.ledger.keys import LedgerKeys
from prism.ledger.verify import latest_kept, verify_log
from prism.registry import AfterCommit, HandlerApp, HandlerCall

app = HandlerApp("ledger", description="The audit ledger: entries, verification, export.",
                 examples=shipped_examples())

# A verification reads and hashes every entry it checks (~0.1 ms each): beyond this many it belongs to
# `prism audit verify`, which reports progress.
MAX_VERIFIED_IN_A_CALL = 100_000
KEYWORDS = ("audit log", "audit trail", "hash chain", "merkle tree", "who called what", "tamper evidence")


@app.handler("audit_query", "entry", "list", params=EntryList, scope="read", keywords=KEYWORDS,
             description="List audit ledger entries (every call, allowed or refused), newest first, filtered by "
                         "time, actor, credential, persona, AI system, coordinate, outcome, door or position.")
async def list_entries(call: HandlerCall, p: EntryList) -> dict[str, Any]:
    return await queries.page(call.session, call.organization_id, LedgerKeys(call.settings), p.to_filter(),
                              page=p.page, page_size=p.page_size, ordering=p.ordering)


@app.handler("audit_query", "entry", "read", params=EntryRead, scope="read", keywords=KEYWORDS,
             description="Read one ledger entry by id, with its hash links: content hash and MAC "
                         "checked, its Merkle leaf, its neighbours' positions and the signed tree head.")
async def read_entry(call: HandlerCall, p: EntryRead) -> dict[str, Any]:
    return await queries.read(call.session, call.organization_id, LedgerKeys(call.settings), p.id)


@app.handler("audit_query", "entry", "export", params=EntryExport, scope="read",
             permission="ledger.export_entry", keywords=(*KEYWORDS, "download", "csv", "json lines"),
             description="Export sealed ledger entries in log order as JSON Lines or CSV (same filters as list; "
                         "at most 10,000 per call, next_seq_from continues).")
async def export_entries(call: HandlerCall, p: EntryExport) -> dict[str, Any]:
    return await queries.export(call.session, call.organization_id, LedgerKeys(call.settings), p.to_filter(),
                                fmt=p.format, limit=p.limit)


@app.handler("audit_query", "log", "verify", params=LogVerify, scope="read", keywords=KEYWORDS,
             description="Verify the organization's ledger: every entry against its hash and MAC, the Merkle "
                         "tree against the signed head and kept checkpoints; names the first broken entry.")
async def verify(call: HandlerCall, p: LogVerify) -> dict[str, Any] | AfterCommit[dict[str, Any]]:
    session, org = call.session, call.organization_id
    head = await queries.head(session, org)
    try:
        start = await latest_kept(session, org) if p.start == "latest_checkpoint" else None
    except MalformedCheckpoint as exc:
        return {"valid": False, "reason": f"the newest kept checkpoint is not valid ({exc})", "head": head}
    start_size = start.checkpoint.tree_size if start else (head or {}).get("pruned_through", 0)
    # The entries a verification reads: up to the head's size, or to the last one stored if that is less (a head
    # whose size was raised in the database is reported broken, entries missing from the end, not too long).
    to_check = min((head or {}).get("tree_size", 0), await queries.last_position(session, org)) - start_size
    if to_check > MAX_VERIFIED_IN_A_CALL:
        raise PrismError(f"{to_check:,} entries to verify from {p.start.replace('_', ' ')}; a call verifies at "
                         f"most {MAX_VERIFIED_IN_A_CALL:,}: verify from the latest checkpoint, or run "
                         "`prism audit verify`", code="verification_too_long", status=400)
    keys, database = LedgerKeys(call.settings), call.database
    if database is None:
        report = await verify_log(session, org, keys, since=start)
        return {**report.as_dict(), "start": p.start, "head": head}

    # The entries are read and hashed once the call's batch committed, in a read transaction of their own: in the
    # batch's transaction a verification held every call of its batch, and on SQLite the write lock, so every
    # call of the process, for as long as it ran (11 s at 100,000 entries). It checks the log as its own
    # transaction reads it, this call's own entry included.
    async def verified() -> dict[str, Any]:
        async with database.read() as own:
            report = await verify_log(own, org, keys, since=start)
            return {**report.as_dict(), "start": p.start, "head": await queries.head(own, org)}

    async def answer(_call: HandlerCall, outcome: dict[str, Any]) -> dict[str, Any]:
        return outcome

    return AfterCommit(verified, answer)
