"""Archiving and pruning the audit ledger: `prism audit archive`, `retention` and `retain` (real processes on the
test database). The archive file verifies without Prism (`examples/ledger_verifier.py archive`), the pruned log
still verifies from the checkpoint kept for it, still names a tampered entry, and keeps sealing new ones."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.kit.ids import stored_organization_id
from prism.kit.timeutil import utcnow
from prism.ledger.archive import archive
from prism.ledger.entries import EntryDraft, audit_checkpoints, audit_entries, audit_heads, content_hash, content_of
from prism.ledger.verify import verify_log
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.ledger_support import insert_waiting, seal_waiting
from tests.processes import TRACEBACK, CliResult, run_cli, scratch_database
from tests.test_ledger import N, record_calls
from tests.test_ledger_proofs import accepted, refusal, rejected, write_entries, ws_fixture  # noqa: F401


def prism(database_url: str, *args: str) -> CliResult:
    result = run_cli("audit", *args, "--json", database_url=database_url)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    return result


def archived(database_url: str, ws: Workspace, through: int, out: Path, *extra: str) -> dict[str, Any]:
    result = prism(database_url, "archive", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug,
                   "--through", str(through), "--out", str(out), *extra)
    assert result.returncode == 0, str(result)
    out_: dict[str, Any] = result.json
    return out_


def verified(database_url: str, ws: Workspace) -> dict[str, Any]:
    """The organization's report from `prism audit verify`, which must pass."""
    result = prism(database_url, "verify", "--tenant", ws.tenant.subdomain, "--org", ws.org.id)
    assert result.returncode == 0, str(result)
    report: dict[str, Any] = result.json["logs"][0]
    return report


async def stored(db: Database, org_id: str) -> tuple[int, list[int], list[int]]:
    """The head's pruned_through, the positions of the entries left, and the sizes of the kept checkpoints."""
    async with db.read() as s:
        pruned = (await s.execute(select(audit_heads.c.pruned_through).where(
            audit_heads.c.organization_id == org_id))).scalar_one()
        seqs = (await s.execute(select(audit_entries.c.seq).where(audit_entries.c.organization_id == org_id)
                                .order_by(audit_entries.c.seq))).scalars()
        sizes = (await s.execute(select(audit_checkpoints.c.tree_size).where(
            audit_checkpoints.c.organization_id == org_id).order_by(audit_checkpoints.c.tree_size))).scalars()
        return pruned, list(seqs), list(sizes)


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def saved_lines(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


async def test_archive_prune_verify_seal_and_archive_again(
        database_url: str, db: Database, ws: Workspace, tmp_path: Path) -> None:
    # Without --prune: a file, and nothing deleted.
    whole = archived(database_url, ws, N + 14, tmp_path / "whole.jsonl")
    assert (whole["first_seq"], whole["last_seq"], whole["entries"], whole["pruned"]) == (1, N + 14, N + 14, False)
    assert (await stored(db, ws.org.id))[:2] == (0, list(range(1, N + 15)))
    accepted("archive", tmp_path / "whole.jsonl")

    first = archived(database_url, ws, 10, tmp_path / "first.jsonl", "--prune")
    assert (first["first_seq"], first["last_seq"], first["pruned"]) == (1, 10, True)
    header, *entries = lines_of(tmp_path / "first.jsonl")
    assert header["checkpoint"]["tree_size"] == 10 and header["start"] is None
    assert [e["seq"] for e in entries] == list(range(1, 11))
    assert all(e["entry_hash"] == content_hash(e["content"]) and e["mac"] for e in entries)
    pruned, seqs, sizes = await stored(db, ws.org.id)
    assert (pruned, seqs) == (10, list(range(11, N + 15))) and 10 in sizes
    assert "entries 1..10" in accepted("archive", tmp_path / "first.jsonl")
    report = verified(database_url, ws)
    assert (report["since"], report["checked"], report["tree_size"]) == (10, N + 4, N + 14)

    # A pruned log keeps sealing; a second archive continues from the first one's checkpoint.
    await write_entries(db, ws, 5)
    assert verified(database_url, ws)["tree_size"] == N + 19
    second = archived(database_url, ws, 20, tmp_path / "second.jsonl", "--prune")
    assert (second["first_seq"], second["last_seq"]) == (11, 20)
    header, *entries = lines_of(tmp_path / "second.jsonl")
    assert header["start"]["checkpoint"]["tree_size"] == 10 and [e["seq"] for e in entries] == list(range(11, 21))
    accepted("archive", tmp_path / "second.jsonl")
    assert (await stored(db, ws.org.id))[:2] == (20, list(range(21, N + 20)))
    report = verified(database_url, ws)
    assert (report["since"], report["checked"], report["tree_size"]) == (20, N - 1, N + 19)


async def test_a_pruned_log_still_names_a_tampered_entry_and_a_lost_checkpoint(
        database_url: str, db: Database, ws: Workspace, tmp_path: Path) -> None:
    archived(database_url, ws, 10, tmp_path / "a.jsonl", "--prune")
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq == 15).values(outcome="refused"))
    result = prism(database_url, "verify", "--tenant", ws.tenant.subdomain, "--org", ws.org.id)
    assert result.returncode == 1 and result.json["logs"][0]["first_broken_seq"] == 15, str(result)

    async with db.write() as s:
        await s.execute(delete(audit_checkpoints).where(audit_checkpoints.c.organization_id == ws.org.id,
                                                        audit_checkpoints.c.tree_size == 10))
    result = prism(database_url, "verify", "--tenant", ws.tenant.subdomain, "--org", ws.org.id)
    assert result.returncode == 1 and "checkpoint of that size is gone" in result.json["logs"][0]["reason"]


async def test_a_tampered_archive_file_is_rejected(database_url: str, ws: Workspace, tmp_path: Path) -> None:
    archived(database_url, ws, 12, tmp_path / "a.jsonl")
    header, *entries = lines_of(tmp_path / "a.jsonl")
    fifth = entries[4]
    forged = {
        "an entry's outcome": [header, *entries[:4], {**fifth, "content": {**fifth["content"], "outcome": "x"}},
                               *entries[5:]],
        "an entry's hash and content together": [header, *entries[:4], {
            **fifth, "content": {**fifth["content"], "outcome": "x"},
            "entry_hash": content_hash({**fifth["content"], "outcome": "x"})}, *entries[5:]],
        "an entry removed": [header, *entries[:4], *entries[5:]],
        "the last entry removed": [header, *entries[:-1]],
        "two entries swapped": [header, *entries[:4], entries[5], entries[4], *entries[6:]],
        "the checkpoint's root": [{**header, "checkpoint": {**header["checkpoint"], "root": "0" * 64}}, *entries],
        "the range": [{**header, "last_seq": 11}, *entries[:-1]],
        "no header": entries,
    }
    for number, (case, lines) in enumerate(forged.items()):
        assert rejected("archive", saved_lines(tmp_path / f"forged{number}.jsonl", lines)), case


async def test_bad_archive_requests_are_refused_with_a_reason(
        database_url: str, db: Database, factory: Factory, ws: Workspace, tmp_path: Path) -> None:
    other = await factory.workspace(roles=("owner",))
    tenant, org = ws.tenant.subdomain, ws.org.slug
    (tmp_path / "taken.jsonl").write_text("")

    def refused(*args: str) -> str:
        return refusal(database_url, "archive", "--tenant", tenant, *args)

    assert refused("--org", org, "--through", str(N + 15), "--out", str(tmp_path / "x")) == "beyond_log"
    assert refused("--org", org, "--through", "0", "--out", str(tmp_path / "x")) == "invalid_arguments"
    assert refused("--org", org, "--through", "3", "--out", str(tmp_path / "taken.jsonl")) == "archive_exists"
    assert refused("--org", org, "--through", "3", "--out", str(tmp_path / "no" / "x")) == "archive_not_writable"
    # A name the file system refuses is the archive's problem, not the database's (it was reported unreachable).
    assert refused("--org", org, "--through", "3", "--out", str(tmp_path / ("x" * 300))) == "archive_not_writable"
    assert refused("--org", other.org.id, "--through", "1", "--out", str(tmp_path / "x"),
                   "--prune") == "organization_not_found"
    archived(database_url, ws, 5, tmp_path / "five.jsonl", "--prune")
    assert refused("--org", org, "--through", "5", "--out", str(tmp_path / "x")) == "already_archived"

    async with db.write() as s:  # a broken log is never archived: its evidence would go with it
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq == 18).values(outcome="refused"))
    assert refused("--org", org, "--through", "8", "--out", str(tmp_path / "x"), "--prune") == "log_broken"
    assert (await stored(db, ws.org.id))[0] == 5 and not (tmp_path / "x").exists()
    assert files_in(tmp_path) == ["five.jsonl", "taken.jsonl"]  # nothing left half-written


async def test_entries_still_waiting_before_the_range_keep_it_from_being_archived(tmp_path: Path) -> None:
    """On a database of its own, with no server: nothing but this test writes or seals the log."""
    with scratch_database(tmp_path, "waiting") as url:
        assert run_cli("migrate", database_url=url).returncode == 0
        created = run_cli("tenant", "create", "waiting", "--name", "Waiting", "--admin-email",
                          "owner@waiting.example.com", "--admin-password", "correct horse battery staple", "--json",
                          database_url=url)
        assert created.returncode == 0, str(created)
        tenant, org = created.json["tenant"], dict(created.json["organization"])
        org["id"] = stored_organization_id(org["id"])  # the CLI shows org_<hex>; the ledger stores the UUID
        ws = Workspace(SimpleNamespace(id=tenant["id"], subdomain="waiting"), SimpleNamespace(id=org["id"]))  # type: ignore[arg-type]
        db = Database(url)
        try:
            await write_entries(db, ws, 10)  # sealed
            # An entry written before entry 8 that has no position yet (its sealer stopped, say).
            at = utcnow() - timedelta(days=1)
            content = content_of(EntryDraft(org["id"], tenant["id"], at, None, None, "rest", "prism_entity_crud",
                                            "c/late", "0" * 64, "allowed", None, {}))
            async with db.write() as s:
                await insert_waiting(s, [content | {"created_at": at, "entry_hash": content_hash(content)}])
        finally:
            await db.dispose()
        assert refusal(url, "archive", "--tenant", "waiting", "--org", org["slug"], "--through", "8", "--out",
                       str(tmp_path / "x")) == "entries_unsealed"
        assert not (tmp_path / "x").exists()


# --- retention -----------------------------------------------------------------------------------

async def test_a_retention_that_is_not_a_number_of_days_is_refused_without_a_traceback(
        database_url: str, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    for days in ("0", "²", "9" * 5000):  # "²" passes str.isdigit(), and int() refuses it and 5000 digits
        refused = prism(database_url, "retention", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug,
                        "--days", days)
        assert refused.returncode == 1 and refused.error["error"] == "invalid_arguments", str(refused)


async def test_retain_archives_and_prunes_what_is_older_than_each_organization_s_retention(
        database_url: str, db: Database, client: httpx.AsyncClient, factory: Factory, tmp_path: Path) -> None:
    ws = await factory.workspace(roles=("owner", "viewer"))
    await write_entries(db, ws, 6, age=timedelta(days=40))
    await write_entries(db, ws, 3, age=timedelta(days=20))
    await record_calls(client, ws.headers)
    await seal_waiting(db, ws.org.id)
    kept_for_ever = await factory.second_org(ws, "No retention")
    tenant = ws.tenant.subdomain

    set_days = prism(database_url, "retention", "--tenant", tenant, "--org", ws.org.slug, "--days", "30")
    assert set_days.returncode == 0 and set_days.json["audit_retention_days"] == 30, str(set_days)
    first = prism(database_url, "retain", "--tenant", tenant, "--archive-dir", str(tmp_path))
    assert first.returncode == 0, str(first)
    assert [(r["organization_id"], r["first_seq"], r["last_seq"]) for r in first.json["logs"]] == [(ws.org.id, 1, 6)]
    archive = tmp_path / f"audit-{ws.org.id}-1-6.jsonl"
    assert first.json["logs"][0]["file"] == str(archive)
    accepted("archive", archive)
    assert (await stored(db, ws.org.id))[:2] == (6, list(range(7, N + 10)))
    assert (await stored(db, kept_for_ever.id))[0] == 0
    report = verified(database_url, ws)
    assert (report["since"], report["tree_size"]) == (6, N + 9)

    # Shorter retention: the entries 20 days old go too; the calls just made stay.
    prism(database_url, "retention", "--tenant", tenant, "--org", ws.org.id, "--days", "10")
    second = prism(database_url, "retain", "--tenant", tenant, "--archive-dir", str(tmp_path))
    assert [(r["first_seq"], r["last_seq"]) for r in second.json["logs"]] == [(7, 9)], str(second)
    accepted("archive", tmp_path / f"audit-{ws.org.id}-7-9.jsonl")
    again = prism(database_url, "retain", "--tenant", tenant, "--archive-dir", str(tmp_path))
    assert again.returncode == 0 and again.json["logs"][0]["file"] is None, str(again)

    none = prism(database_url, "retention", "--tenant", tenant, "--org", ws.org.slug, "--days", "none")
    assert none.returncode == 0 and none.json["audit_retention_days"] is None, str(none)
    assert prism(database_url, "retain", "--tenant", tenant, "--archive-dir", str(tmp_path)).json["logs"] == []
    async with db.read() as s:
        left = (await s.execute(select(func.count()).select_from(audit_entries).where(
            audit_entries.c.organization_id == ws.org.id))).scalar_one()
    assert left == N


async def test_bad_retention_requests_are_refused_with_a_reason(
        database_url: str, factory: Factory, ws: Workspace, tmp_path: Path) -> None:
    other = await factory.workspace(roles=("owner",))
    tenant = ws.tenant.subdomain
    for days in ("0", "-3", "abc", "36501"):
        assert refusal(database_url, "retention", "--tenant", tenant, "--org", ws.org.slug,
                       "--days", days) == "invalid_arguments", days
    assert refusal(database_url, "retention", "--tenant", tenant, "--org", other.org.id,
                   "--days", "5") == "organization_not_found"
    assert refusal(database_url, "retain", "--tenant", tenant,
                   "--archive-dir", str(tmp_path / "missing")) == "archive_dir_not_found"
    assert refusal(database_url, "retain", "--tenant", tenant,
                   "--archive-dir", str(tmp_path / ("x" * 300))) == "archive_dir_not_found"  # was a traceback
    assert refusal(database_url, "retain", "--tenant", "no-such-tenant",
                   "--archive-dir", str(tmp_path)) == "tenant_not_found"


class _PruneBeforeTheEntries:
    """A verification's session on which a prune commits, in another transaction, just before it reads the
    entries: the moment a verification that does not read one snapshot would find them gone."""

    def __init__(self, session: AsyncSession, prune: Callable[[], Awaitable[None]]) -> None:
        self.session, self.prune, self.pruned = session, prune, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def stream(self, *args: Any, **kwargs: Any) -> Any:
        if not self.pruned:
            self.pruned = True
            await self.prune()
        return await self.session.stream(*args, **kwargs)


async def test_a_prune_committing_during_a_verification_is_not_reported_as_a_cut_log(
        db: Database, ws: Workspace, tmp_path: Path) -> None:
    """On PostgreSQL the dispatcher's transaction reads each statement's newest data: the pruned entries vanished
    under the verification, which said "entry 1 is missing" of an intact log."""
    keys = ledger_keys()

    async def prune() -> None:
        await archive(db, ws.org.id, keys, through=10, out=tmp_path / "first.jsonl", prune=True)

    async with db.read() as session:
        report = await verify_log(cast(AsyncSession, _PruneBeforeTheEntries(session, prune)), ws.org.id, keys)
    assert report.valid, report
    assert (await stored(db, ws.org.id))[0] == 10  # the prune did commit meanwhile
