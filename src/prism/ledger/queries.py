"""Reading an organization's ledger: entries by filter, one entry with its hash links, and an export.

Every statement starts from the organization's repository (prism.tenancy.repository), so an entry of another
organization is "not found", never shown. Filters are the same for the list, the export and the console:

- `since` / `until`: the entry's time (`until` exclusive);
- `actor`: the user id, or the user's email;
- `credential_id`, `door`, `outcome`;
- `persona_id`: the persona of the call's credential (`detail.persona.id`), on every outcome;
- `ai_system_id`: the AI system the credential was tied to (`detail.ai_system_id`, recorded since the ledger
  API exists: earlier entries name none);
- `coordinate`: exact, or a pattern with `*` (`entity_crud/finance/*`);
- `seq_from` / `seq_to`: positions in the log (inclusive); entries still waiting to be sealed have none.

An entry's `id` is shown as its reference (`LedgerKeys.entry_ref`: opaque, of this organization only); ordering
by `id` is the order entries were written in.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Select, false, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from prism.errors import NotFound
from prism.kit.numbers import SQL_BIGINT_MAX
from prism.kit.timeutil import iso
from prism.ledger.checkpoints import MalformedCheckpoint, parse_checkpoint
from prism.ledger.entries import content_hash, content_of, legacy_chain_hash
from prism.ledger.keys import LedgerKeys
from prism.ledger.merkle import leaf_hash
from prism.models import AuditEntry, AuditHead, User
from prism.tenancy.repository import OrgRepository, text_search, to_record

# What an export line holds, in this order (CSV columns; `detail` is its JSON text there).
EXPORT_FIELDS = ("id", "seq", "created_at", "actor_user_id", "actor_email", "credential_id", "door", "tool_name",
                 "coordinate", "arguments_digest", "outcome", "error_code", "detail", "entry_hash", "leaf_hash",
                 "mac", "prev_hash", "hash")


@dataclass(frozen=True, slots=True)
class EntryFilter:
    since: datetime | None = None
    until: datetime | None = None
    actor: str | None = None
    credential_id: str | None = None
    persona_id: str | None = None
    ai_system_id: str | None = None
    coordinate: str | None = None
    outcome: str | None = None
    door: str | None = None
    seq_from: int | None = None
    seq_to: int | None = None
    search: str | None = None  # words of the coordinate, the tool, the door or the refusal's code


def repository(session: AsyncSession, organization_id: str) -> OrgRepository[AuditEntry]:
    return OrgRepository(session, AuditEntry, organization_id, label="ledger entry")


async def filtered(session: AsyncSession, organization_id: str, f: EntryFilter) -> Select[Any]:
    stmt = repository(session, organization_id).base()
    e = AuditEntry
    if f.since is not None:
        stmt = stmt.where(e.created_at >= f.since)
    if f.until is not None:
        stmt = stmt.where(e.created_at < f.until)
    if f.actor is not None:
        user_id = await _user_id(session, f.actor)
        stmt = stmt.where(e.actor_user_id == user_id) if user_id is not None else stmt.where(false())
    for column, value in ((e.credential_id, f.credential_id), (e.outcome, f.outcome), (e.door, f.door)):
        if value is not None:
            stmt = stmt.where(column == value)
    if f.persona_id is not None:
        stmt = stmt.where(e.detail[("persona", "id")].as_string() == f.persona_id)
    if f.ai_system_id is not None:
        stmt = stmt.where(e.detail["ai_system_id"].as_string() == f.ai_system_id)
    if f.coordinate is not None:
        if "*" in f.coordinate:
            stmt = stmt.where(_matching(session, e.coordinate, f.coordinate))
        else:
            stmt = stmt.where(e.coordinate == f.coordinate)
    if f.seq_from is not None:
        stmt = stmt.where(e.seq >= f.seq_from)
    if f.seq_to is not None:
        stmt = stmt.where(e.seq <= f.seq_to)
    return text_search(stmt, [e.coordinate, e.tool_name, e.door, e.error_code], f.search)


def _matching(session: AsyncSession, column: Any, wildcard: str) -> Any:
    """`column` matching a pattern whose `*` stands for any text, case-sensitive as an exact coordinate is: SQLite's
    LIKE ignores ASCII case, so there GLOB (with its own special characters kept literal) does it."""
    if session.get_bind().dialect.name == "sqlite":
        literal = "".join(f"[{c}]" if c in "?[" else c for c in wildcard)
        return column.op("GLOB")(literal)
    pattern = wildcard.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_").replace("*", "%")
    return column.like(pattern, escape="\\")


async def _user_id(session: AsyncSession, actor: str) -> str | None:
    """A user id as given, or the id of the user with that email; None for an unknown email, which matches no
    entry rather than failing (the ledger may name users who have since left)."""
    if "@" not in actor:
        return actor
    return (await session.execute(select(User.id).where(
        func.lower(User.email) == actor.lower()))).scalar_one_or_none()


async def page(session: AsyncSession, organization_id: str, keys: LedgerKeys, f: EntryFilter, *, page: int,
               page_size: int, ordering: str | None) -> dict[str, Any]:
    repo = repository(session, organization_id)
    result = await repo.page(await filtered(session, organization_id, f), page=page, page_size=page_size,
                             ordering=ordering, orderable=("id", "seq", "created_at"), default_ordering="-id")
    emails = await _emails(session, {i["actor_user_id"] for i in result["items"]})
    result["items"] = [_decorate(item, emails, keys, organization_id) for item in result["items"]]
    return result


async def read(session: AsyncSession, organization_id: str, keys: LedgerKeys, ref: str) -> dict[str, Any]:
    """One entry, by its reference, with what binds it: its content hash and MAC checked, its leaf, its
    neighbours in the log, and the signed head it is (or will be) part of."""
    entry_id = keys.entry_id_of(organization_id, ref)
    row = None if entry_id is None else (await session.execute(
        repository(session, organization_id).base().where(AuditEntry.id == entry_id))).scalar_one_or_none()
    if row is None:
        raise NotFound(f"ledger entry {ref} not found", code="not_found")
    record = _decorate(to_record(row), await _emails(session, {row.actor_user_id}), keys, organization_id)
    if row.prev_hash is not None:  # chained before the tree: hashed with its position and predecessor, no MAC
        chained_hash = legacy_chain_hash(row.prev_hash, content_of(row), row.seq or 0)
        record["checks"] = {"content_matches_hash": row.entry_hash == row.hash == chained_hash,
                            "mac_fits_position": None}
    else:
        record["checks"] = {"content_matches_hash": content_hash(content_of(row)) == row.entry_hash,
                            "mac_fits_position": _mac_fits(keys, organization_id, row)}
    record["previous_seq"] = await _stored_seq(session, organization_id, row.seq - 1 if row.seq else None)
    record["next_seq"] = await _stored_seq(session, organization_id,
                                           row.seq + 1 if row.seq and row.seq < SQL_BIGINT_MAX else None)
    record["head"] = await head(session, organization_id)
    return record


async def _stored_seq(session: AsyncSession, organization_id: str, seq: int | None) -> int | None:
    """`seq` if an entry is stored there (a neighbour's link: none past the end, or before an archived range)."""
    if seq is None or seq < 1:
        return None
    stmt = repository(session, organization_id).base().where(AuditEntry.seq == seq)
    return seq if (await session.execute(stmt.with_only_columns(AuditEntry.id))).first() else None


async def last_position(session: AsyncSession, organization_id: str) -> int:
    """The highest position stored in the organization's log (0: none)."""
    stmt = repository(session, organization_id).base().with_only_columns(func.max(AuditEntry.seq))
    return int((await session.execute(stmt)).scalar_one() or 0)


async def head(session: AsyncSession, organization_id: str) -> dict[str, Any] | None:
    """The organization's signed tree head: size, root, when sealed, the checkpoint and its parsed fields."""
    row = (await session.execute(select(AuditHead).where(
        AuditHead.organization_id == organization_id))).scalar_one_or_none()
    if row is None:
        return None
    signed: dict[str, Any] | None = None
    if row.checkpoint is not None:
        try:
            signed = parse_checkpoint(row.checkpoint).as_dict()
        except MalformedCheckpoint:
            signed = None
    return {"tree_size": row.tree_size, "root": row.root, "sealed_at": iso(row.sealed_at) if row.sealed_at else None,
            "pruned_through": row.pruned_through, "checkpoint": signed}


async def export(session: AsyncSession, organization_id: str, keys: LedgerKeys, f: EntryFilter, *, fmt: str,
                 limit: int) -> dict[str, Any]:
    """Sealed entries in log order, at most `limit`, as JSON Lines or CSV text; `next_seq_from` continues."""
    stmt = (await filtered(session, organization_id, f)).where(AuditEntry.seq.is_not(None))
    rows = list((await session.execute(stmt.order_by(AuditEntry.seq).limit(limit + 1))).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    emails = await _emails(session, {r.actor_user_id for r in rows})
    records = [_decorate(to_record(r), emails, keys, organization_id) for r in rows]
    return {"format": fmt, "media_type": "application/jsonl" if fmt == "jsonl" else "text/csv",
            "count": len(records), "first_seq": records[0]["seq"] if records else None,
            "last_seq": records[-1]["seq"] if records else None,
            "next_seq_from": records[-1]["seq"] + 1 if more else None,
            "content": to_jsonl(records) if fmt == "jsonl" else to_csv(records)}


def to_jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(orjson.dumps({k: r.get(k) for k in EXPORT_FIELDS}).decode() + "\n" for r in records)


def to_csv(records: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(EXPORT_FIELDS)
    for r in records:
        writer.writerow([_csv_cell(r.get(k)) for k in EXPORT_FIELDS])
    return out.getvalue()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    text = str(value)
    # A cell a spreadsheet would run as a formula (CSV injection) is kept as text.
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


async def _emails(session: AsyncSession, user_ids: set[str | None]) -> dict[str, str]:
    ids = [i for i in user_ids if i]
    if not ids:
        return {}
    rows = await session.execute(select(User.id, User.email).where(User.id.in_(ids)))
    return {user_id: email for user_id, email in rows}


def _decorate(record: dict[str, Any], emails: dict[str, str], keys: LedgerKeys, organization_id: str) -> dict[str, Any]:
    record.pop("tenant_id", None)
    record["id"] = keys.entry_ref(organization_id, record["id"])
    record["actor_email"] = emails.get(record["actor_user_id"] or "")
    record["sealed"] = record["seq"] is not None
    record["leaf_hash"] = _leaf_of(record["seq"], record["entry_hash"])
    return record


def _leaf_of(seq: int | None, entry_hash: str) -> str | None:
    """The entry's leaf in the tree; none for an entry not sealed yet, or whose stored hash is not one (a row
    rewritten in the database: shown as it is, and `prism audit verify` names it)."""
    if seq is None:
        return None
    try:
        return leaf_hash(seq, bytes.fromhex(entry_hash)).hex()
    except (ValueError, TypeError, OverflowError):  # OverflowError: a position rewritten below 0
        return None


def _mac_fits(keys: LedgerKeys, organization_id: str, row: Any) -> bool:
    try:
        if row.seq is None:  # waiting: the MAC binds the row's id (prism.ledger.keys)
            return keys.waiting_mac_fits(organization_id, row.id, row.entry_hash, row.mac)
        return keys.mac_fits(organization_id, row.seq, row.entry_hash, row.mac)
    except (ValueError, TypeError, OverflowError):  # a hash that is not hex, a position below 0: no MAC fits
        return False
