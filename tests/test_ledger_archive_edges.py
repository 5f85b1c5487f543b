"""Archive, prune and retention of the audit ledger (`prism audit archive / retain / verify`, real processes on the
test database) and the external verifier (`examples/ledger_verifier.py`): at their edges."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
from sqlalchemy import func, select, update

from prism.ledger.entries import audit_checkpoints, audit_entries, audit_heads
from prism.models import Organization
from prism.storage import Database
from tests.factories import Factory, Workspace
from tests.governance_support import ok
from tests.processes import TRACEBACK, CliResult, run_cli
from tests.test_ledger_proofs import VERIFIER, accepted, rejected, verifier, write_entries


def prism(database_url: str, *args: str) -> CliResult:
    result = run_cli("audit", *args, "--json", database_url=database_url)
    assert TRACEBACK not in result.stdout + result.stderr, str(result)
    return result


async def pruned_through(db: Database, organization_id: str) -> int:
    async with db.read() as s:
        value: int = (await s.execute(select(audit_heads.c.pruned_through).where(
            audit_heads.c.organization_id == organization_id))).scalar_one()
        return value


async def test_archive_never_prunes_behind_a_kept_checkpoint_whose_signature_does_not_verify(
        database_url: str, db: Database, factory: Factory, tmp_path: Path) -> None:
    """docs/audit.md: the archive's header holds "the signed checkpoint of exactly those N entries", the file
    "checks on its own with the public key" (examples/ledger_verifier.py archive), and after the prune "the
    remaining log still verifies against it"; archive.py: "A log that does not verify is never archived: its
    evidence would be deleted with it". When a checkpoint is kept at N, `archive` reuses its stored text after
    comparing only its root, never its signature, and `prism audit verify` compares kept checkpoints by their
    root column only. A database writer who changes the kept checkpoint's timestamp (its root left as it is):
    verify says valid, `archive --through N --prune` succeeds and deletes entries 1..N, the archive file is
    rejected by the external verifier ("the checkpoint's signature does not verify"), and the remaining log no
    longer verifies ("the starting checkpoint (5 entries) is not signed for this log"). The archived entries'
    evidence is gone from the database, and what is left outside cannot be checked."""
    ws = await factory.workspace(roles=("owner",))
    await write_entries(db, ws, 5)  # the log's first seal keeps a checkpoint of 5 entries
    await write_entries(db, ws, 3)
    async with db.write() as s:
        kept = (await s.execute(select(audit_checkpoints.c.checkpoint).where(
            audit_checkpoints.c.organization_id == ws.org.id, audit_checkpoints.c.tree_size == 5))).scalar_one()
        forged = {**orjson.loads(kept), "timestamp": "2020-01-01T00:00:00.000000Z"}
        await s.execute(update(audit_checkpoints).where(
            audit_checkpoints.c.organization_id == ws.org.id, audit_checkpoints.c.tree_size == 5)
            .values(checkpoint=orjson.dumps(forged).decode()))
    tenant, org = ws.tenant.subdomain, ws.org.slug

    archived = prism(database_url, "archive", "--tenant", tenant, "--org", org, "--through", "5",
                     "--out", str(tmp_path / "a.jsonl"), "--prune")
    if archived.returncode != 0:  # refused: then nothing may have been deleted
        assert archived.error["error"] == "log_broken", str(archived)
        async with db.read() as s:
            left = (await s.execute(select(func.count()).select_from(audit_entries).where(
                audit_entries.c.organization_id == ws.org.id))).scalar_one()
        assert left == 8 and await pruned_through(db, ws.org.id) == 0
        return
    # Archived and pruned: then the file must verify without Prism, and what is left must verify in Prism.
    checked = verifier("archive", tmp_path / "a.jsonl")
    assert checked.returncode == 0, checked
    after = prism(database_url, "verify", "--tenant", tenant, "--org", org)
    assert after.returncode == 0, str(after)


async def test_verify_since_a_checkpoint_older_than_the_archived_range_reports_no_missing_entry(
        database_url: str, db: Database, factory: Factory, tmp_path: Path) -> None:
    """docs/audit.md: after `archive --prune` "the remaining log still verifies"; `--since FILE` starts from an
    exported checkpoint. A checkpoint exported before the prune (8 entries; entries 1..12 archived since) makes
    `prism audit verify --since FILE` report the intact log BROKEN, "entry 9 is missing (found 13 next)": a false
    tamper alarm naming an entry that was archived by the operator, not removed by an attacker. It should start
    from the archived range's kept checkpoint (which is newer), or refuse the file with a clear reason."""
    ws = await factory.workspace(roles=("owner",))
    await write_entries(db, ws, 8)
    tenant, org = ws.tenant.subdomain, ws.org.slug
    exported = prism(database_url, "checkpoint", "--tenant", tenant, "--org", org)
    assert exported.returncode == 0, str(exported)
    (tmp_path / "checkpoint-8.json").write_text(exported.stdout)
    await write_entries(db, ws, 8)
    archived = prism(database_url, "archive", "--tenant", tenant, "--org", org, "--through", "12",
                     "--out", str(tmp_path / "a.jsonl"), "--prune")
    assert archived.returncode == 0, str(archived)
    assert prism(database_url, "verify", "--tenant", tenant, "--org", org).returncode == 0  # the log is intact

    result = prism(database_url, "verify", "--tenant", tenant, "--org", org,
                   "--since", str(tmp_path / "checkpoint-8.json"))
    if result.returncode == 0:
        assert result.json["valid"] and result.json["logs"][0]["tree_size"] == 16, str(result)
    else:  # a refusal of the file is fine too; a report that names an archived entry as missing is not
        assert not result.stdout and result.error["error"], str(result)


async def test_retain_with_a_rewritten_kept_checkpoint_frontier_reports_that_log_and_prunes_the_others(
        database_url: str, db: Database, factory: Factory, tmp_path: Path) -> None:
    """docs/audit.md: refusals are one JSON line (`log_broken`, …), never a traceback, never a partial file or a
    partial prune; `retain` runs each organization in its own savepoint so that one organization's refusal
    leaves the others' archives in place. A kept checkpoint whose `frontier` column was rewritten (not a list)
    at the retention cut: `archive._stored` does list(row.frontier) and raises TypeError, which neither the
    per-organization handler of `retain` nor the CLI catches. The command dies with a traceback, the whole
    transaction rolls back, and the other organization's archive file stays on disk with its prune undone
    (its next `retain`, same range, is then refused `archive_exists`)."""
    ws = await factory.workspace(roles=("owner",))
    broken_org = await factory.second_org(ws, "Broken frontier")
    await write_entries(db, ws, 5, age=timedelta(days=10))
    await write_entries(db, Workspace(ws.tenant, broken_org), 5, age=timedelta(days=10))
    async with db.write() as s:
        await s.execute(update(Organization).where(Organization.tenant_id == ws.tenant.id)
                        .values(audit_retention_days=1))
        rewritten = await s.execute(update(audit_checkpoints).where(
            audit_checkpoints.c.organization_id == broken_org.id, audit_checkpoints.c.tree_size == 5)
            .values(frontier=5))
        assert rewritten.rowcount == 1  # the first seal of a log keeps its checkpoint

    (tmp_path / "dir").mkdir()
    retained = run_cli("audit", "retain", "--tenant", ws.tenant.subdomain, "--archive-dir", str(tmp_path / "dir"),
                       "--json", database_url=database_url)
    assert TRACEBACK not in retained.stdout + retained.stderr, str(retained)
    assert retained.returncode == 1, str(retained)
    logs: dict[str, Any] = {r["organization_id"]: r for r in retained.json["logs"]}
    assert logs[broken_org.id]["error"] == "log_broken", str(retained)
    assert logs[ws.org.id]["last_seq"] == 5 and await pruned_through(db, ws.org.id) == 5, str(retained)
    accepted("archive", tmp_path / "dir" / f"audit-{ws.org.id}-1-5.jsonl")

    # `archive` alone, on that organization.
    alone = run_cli("audit", "archive", "--tenant", ws.tenant.subdomain, "--org", broken_org.slug, "--through", "5",
                    "--out", str(tmp_path / "alone.jsonl"), "--json", database_url=database_url)
    assert TRACEBACK not in alone.stdout + alone.stderr, str(alone)
    assert alone.returncode == 1 and alone.error["error"] == "log_broken", str(alone)



def test_the_external_verifier_rejects_a_deeply_nested_archive_line_without_a_traceback(tmp_path: Path) -> None:
    """examples/ledger_verifier.py: "Prints `OK: ...` and exits 0, or `FAILED: <reason>` and exits 1". A tampered
    archive (or checkpoint) file whose line is a deeply nested JSON array makes json.loads raise RecursionError,
    which `read_lines` / `read_json` do not catch (they catch ValueError): a traceback instead of FAILED."""
    assert VERIFIER.exists()
    deep = "[" * 100_000 + "\n"
    (tmp_path / "deep.jsonl").write_text(deep)
    rejected("archive", tmp_path / "deep.jsonl")
    (tmp_path / "deep.json").write_text(deep)
    rejected("checkpoint", tmp_path / "deep.json")


async def test_the_first_entry_left_after_a_prune_names_no_previous_entry(
        database_url: str, client: httpx.AsyncClient, db: Database, factory: Factory, tmp_path: Path) -> None:
    """docs/audit.md: audit_query/ledger/entry/read gives `previous_seq` / `next_seq`; the console links them
    (console_entry.html). `next_seq` is given only when that entry exists, `previous_seq` is always seq - 1: after
    `archive --prune` through 6, entry 7 names entry 6, which is gone, and the console's link leads to a 404."""
    ws = await factory.workspace(roles=("owner",))
    await write_entries(db, ws, 8)
    archived = prism(database_url, "archive", "--tenant", ws.tenant.subdomain, "--org", ws.org.slug, "--through", "6",
                     "--out", str(tmp_path / "a.jsonl"), "--prune")
    assert archived.returncode == 0, str(archived)
    listed = await ok(client, ws, "audit_query/ledger/entry/list", {"seq_from": 7, "seq_to": 7})
    entry = await ok(client, ws, "audit_query/ledger/entry/read", {"id": listed["items"][0]["id"]})
    assert entry["seq"] == 7 and entry["next_seq"] == 8
    assert (await ok(client, ws, "audit_query/ledger/entry/list", {"seq_from": 6, "seq_to": 6}))["total"] == 0
    assert entry["previous_seq"] is None, entry


def test_an_archive_never_replaces_a_file_that_took_its_name_meanwhile(tmp_path: Path) -> None:
    """The name is checked before the entries are written; a file made under it meanwhile was replaced by the
    final rename. The finished archive takes its name by a hard link, which fails if the name exists."""
    import pytest

    from prism.errors import PrismError
    from prism.ledger.archive import _take_name

    partial, out = tmp_path / "a.jsonl.writing", tmp_path / "a.jsonl"
    partial.write_bytes(b"new")
    out.write_bytes(b"someone else's")
    with pytest.raises(PrismError) as refused:
        _take_name(partial, out)
    assert refused.value.code == "archive_exists"
    assert out.read_bytes() == b"someone else's"
    out.unlink()
    _take_name(partial, out)
    assert out.read_bytes() == b"new"


async def test_a_kept_checkpoint_whose_frontier_was_rewritten_is_never_pruned_behind(
        database_url: str, db: Database, factory: Factory, tmp_path: Path) -> None:
    """docs/audit.md: verification checks "every kept checkpoint" ("a rewritten one is never archived, nor pruned
    behind"), and after `archive --prune` "the remaining log still verifies against it". A kept checkpoint's
    frontier rewritten to other hashes (still a list of hex of the right length) passed full verification, which
    read only its text and root; `archive --through N --prune` at its size then kept that row as the pruned
    range's start and deleted entries 1..N, and from then on the log never verified again ("the starting
    checkpoint's frontier does not make its root"), while `--since latest` reported it broken even before."""
    ws = await factory.workspace(roles=("owner",))
    await write_entries(db, ws, 5)  # the log's first seal keeps a checkpoint of 5 entries
    await write_entries(db, ws, 3)
    async with db.write() as s:
        rewritten = await s.execute(update(audit_checkpoints).where(
            audit_checkpoints.c.organization_id == ws.org.id, audit_checkpoints.c.tree_size == 5)
            .values(frontier=["ab" * 32, "cd" * 32]))  # 5 leaves: two perfect subtrees, other hashes
        assert rewritten.rowcount == 1
    tenant, org = ws.tenant.subdomain, ws.org.slug

    full = prism(database_url, "verify", "--tenant", tenant, "--org", org)
    since_latest = prism(database_url, "verify", "--tenant", tenant, "--org", org, "--since", "latest")
    assert full.returncode == since_latest.returncode == 1, (str(full), str(since_latest))

    archived = prism(database_url, "archive", "--tenant", tenant, "--org", org, "--through", "5",
                     "--out", str(tmp_path / "a.jsonl"), "--prune")
    assert archived.returncode == 1 and archived.error["error"] == "log_broken", str(archived)
    async with db.read() as s:
        left = (await s.execute(select(func.count()).select_from(audit_entries).where(
            audit_entries.c.organization_id == ws.org.id))).scalar_one()
    assert left == 8 and await pruned_through(db, ws.org.id) == 0
    assert not (tmp_path / "a.jsonl").exists()
