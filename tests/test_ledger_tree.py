"""The ledger's signed tree beyond single-entry tampering: another organization's log put in place, a log cut back
to an earlier checkpoint, verification from a checkpoint, entries altered while waiting, sealing under
concurrency, checkpoints sent to webhooks, and logs written as a hash chain before the tree."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import delete, func, select, update

from prism.config import Settings
from prism.kit.timeutil import utcnow
from prism.ledger.checkpoints import parse_checkpoint
from prism.ledger.entries import (
    GENESIS_HASH,
    audit_checkpoints,
    audit_entries,
    audit_heads,
    content_hash,
    content_of,
    legacy_chain_hash,
)
from prism.ledger.keys import LedgerKeys
from prism.ledger.sealer import seal_all
from prism.ledger.verify import verify_log
from prism.migrate import alembic_config
from prism.models import OutboxEvent
from prism.models.base import UTCDateTime
from prism.storage import Database
from tests.factories import Factory, Workspace, ledger_keys
from tests.ledger_support import insert_waiting, seal_waiting, verified
from tests.processes import TRACEBACK, run_cli, scratch_database
from tests.webhooks_fixtures import create_hook

TOOL = "/api/mcp/tools/prism_entity_crud/"
LIST = {"app": "spare_parts", "entity": "spare_part", "operation": "list", "arguments": {}}


async def calls(client: httpx.AsyncClient, ws: Workspace, n: int) -> None:
    for _ in range(n):
        response = await client.post(TOOL, headers=ws.headers(), json=LIST)
        assert response.status_code == 200, response.text


def waiting_entry(ws: Workspace, **content: Any) -> dict[str, Any]:
    """An entry as a call's transaction writes it: content and content hash, no position yet (`insert_waiting`
    gives it its id and MAC)."""
    row = {"organization_id": ws.org.id, "tenant_id": ws.tenant.id, "created_at": utcnow(), "actor_user_id": None,
           "credential_id": None, "door": "rest", "tool_name": "prism_whoami", "coordinate": "prism_whoami",
           "arguments_digest": "0" * 64, "outcome": "allowed", "error_code": None, "detail": {}, **content}
    digest = content_hash(content_of(SimpleNamespace(**row)))
    return {**row, "entry_hash": digest}


async def head_of(db: Database, org_id: str) -> Any:
    async with db.read() as s:
        return (await s.execute(select(audit_heads).where(audit_heads.c.organization_id == org_id))).one()


async def test_a_new_organizations_empty_log_is_signed_and_verifies(db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    head = await head_of(db, ws.org.id)
    signed = parse_checkpoint(head.checkpoint)
    assert (head.tree_size, signed.tree_size, signed.organization_id) == (0, 0, ws.org.id)
    assert signed.verifies(ledger_keys().public_key)
    report = await verified(db, ws.org.id)
    assert report.valid and report.tree_size == 0, report


async def test_another_organizations_log_put_in_place_is_detected(
        db: Database, client: httpx.AsyncClient, factory: Factory) -> None:
    victim, donor = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await calls(client, victim, 2)
    await calls(client, donor, 3)
    await seal_waiting(db, victim.org.id)
    await seal_waiting(db, donor.org.id)
    donor_head = await head_of(db, donor.org.id)
    async with db.write() as s:  # the victim's log replaced by the donor's, rows and head alike
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == victim.org.id))
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == donor.org.id)
                        .values(organization_id=victim.org.id, tenant_id=victim.tenant.id))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == victim.org.id).values(
            tree_size=donor_head.tree_size, root=donor_head.root, frontier=donor_head.frontier,
            checkpoint=donor_head.checkpoint))
    async with db.read() as s:
        report = await verify_log(s, victim.org.id, ledger_keys())
    assert not report.valid and report.first_broken_seq == 1, report


async def cut_back_to(db: Database, organization_id: str, early: Any) -> None:
    """What a database writer can do: delete the entries and kept checkpoints after `early` (a head read earlier),
    and put that signed head back."""
    async with db.write() as s:
        await s.execute(delete(audit_entries).where(audit_entries.c.organization_id == organization_id,
                                                    audit_entries.c.seq > early.tree_size))
        await s.execute(delete(audit_checkpoints).where(audit_checkpoints.c.organization_id == organization_id,
                                                        audit_checkpoints.c.tree_size > early.tree_size))
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == organization_id).values(
            tree_size=early.tree_size, root=early.root, frontier=early.frontier, checkpoint=early.checkpoint))


async def test_a_log_cut_back_to_a_kept_checkpoint_is_caught_by_a_checkpoint_held_outside(
        db: Database, database_url: str, client: httpx.AsyncClient, factory: Factory, tmp_path: Path) -> None:
    ws = await factory.workspace(roles=("owner",))
    await calls(client, ws, 3)
    await seal_waiting(db, ws.org.id)
    early = await head_of(db, ws.org.id)
    exported = run_cli("audit", "checkpoint", "--tenant", ws.tenant.subdomain, database_url=database_url)
    assert exported.returncode == 0, str(exported)
    await calls(client, ws, 4)
    await seal_waiting(db, ws.org.id)
    later = run_cli("audit", "checkpoint", "--tenant", ws.tenant.subdomain, database_url=database_url)
    (tmp_path / "later.json").write_text(later.stdout)
    assert parse_checkpoint(later.stdout).tree_size == early.tree_size + 4

    await cut_back_to(db, ws.org.id, early)  # the four later entries gone, the earlier signed head put back
    alone = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--json", database_url=database_url)
    assert alone.returncode == 0, str(alone)  # consistent with itself: only a checkpoint from outside can tell
    held = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--json", "--checkpoint",
                   str(tmp_path / "later.json"), database_url=database_url)
    assert held.returncode == 1, str(held)
    [log] = held.json["logs"]
    assert log["first_broken_seq"] == early.tree_size + 1 and "removed" in log["reason"], log


async def test_a_log_cut_back_below_the_checkpoint_verification_starts_from_names_the_removed_entries(
        db: Database, database_url: str, client: httpx.AsyncClient, factory: Factory, tmp_path: Path) -> None:
    """docs/audit.md: a log cut back exactly to an earlier signed checkpoint is caught against any later
    checkpoint held outside the database. `--since FILE` starts from one: when the log was cut back below it, the
    report said only "the entries do not make the tree the signed head describes", naming no entry, where
    `--checkpoint FILE` names the first removed one."""
    ws = await factory.workspace(roles=("owner",))
    await calls(client, ws, 3)
    await seal_waiting(db, ws.org.id)
    early = await head_of(db, ws.org.id)
    await calls(client, ws, 4)
    await seal_waiting(db, ws.org.id)
    later = run_cli("audit", "checkpoint", "--tenant", ws.tenant.subdomain, database_url=database_url)
    (tmp_path / "later.json").write_text(later.stdout)
    await cut_back_to(db, ws.org.id, early)  # the four later entries gone, the earlier signed head put back
    since = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--json", "--since",
                    str(tmp_path / "later.json"), database_url=database_url)
    assert since.returncode == 1 and TRACEBACK not in since.stderr, str(since)
    [log] = since.json["logs"]
    assert log["first_broken_seq"] == early.tree_size + 1 and "removed" in log["reason"], log


async def test_a_checkpoint_of_another_tenants_log_is_refused_not_passed_over(
        db: Database, database_url: str, client: httpx.AsyncClient, factory: Factory, tmp_path: Path) -> None:
    """`--checkpoint` asks for the log to be checked against a checkpoint held outside: one of no log of the
    tenant proves nothing, so the command says so rather than report the tenant's logs valid."""
    ws, other = await factory.workspace(roles=("owner",)), await factory.workspace(roles=("owner",))
    await calls(client, other, 2)
    await seal_waiting(db, other.org.id)
    theirs = run_cli("audit", "checkpoint", "--tenant", other.tenant.subdomain, database_url=database_url)
    (tmp_path / "theirs.json").write_text(theirs.stdout)
    refused = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--json", "--checkpoint",
                      str(tmp_path / "theirs.json"), database_url=database_url)
    assert refused.returncode != 0 and "organization_not_found" in refused.stderr, str(refused)
    own = run_cli("audit", "verify", "--tenant", other.tenant.subdomain, "--json", "--checkpoint",
                  str(tmp_path / "theirs.json"), database_url=database_url)
    assert own.returncode == 0 and own.json["valid"] is True, str(own)


async def test_verification_since_a_checkpoint_reads_only_what_came_after_it(
        db: Database, database_url: str, client: httpx.AsyncClient, factory: Factory, tmp_path: Path) -> None:
    ws = await factory.workspace(roles=("owner",))
    await calls(client, ws, 3)
    await seal_waiting(db, ws.org.id)
    start = run_cli("audit", "checkpoint", "--tenant", ws.tenant.subdomain, database_url=database_url)
    (tmp_path / "start.json").write_text(start.stdout)
    size = parse_checkpoint(start.stdout).tree_size
    await calls(client, ws, 5)
    await seal_waiting(db, ws.org.id)

    since = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--json", "--since",
                    str(tmp_path / "start.json"), database_url=database_url)
    assert since.returncode == 0, str(since)
    [log] = since.json["logs"]
    assert (log["since"], log["checked"], log["tree_size"]) == (size, 5, size + 5), log

    # An entry before the checkpoint altered: not read from it, found by a full verification.
    async with db.write() as s:
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id,
                                                    audit_entries.c.seq == 2).values(outcome="refused"))
    assert run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--since", str(tmp_path / "start.json"),
                   database_url=database_url).returncode == 0
    full = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--json", database_url=database_url)
    assert full.returncode == 1 and full.json["logs"][0]["first_broken_seq"] == 2, str(full)

    # A checkpoint file that is not one: a clear error, no traceback.
    (tmp_path / "bad.json").write_text('{"origin": "prism.audit/x"}')
    bad = run_cli("audit", "verify", "--tenant", ws.tenant.subdomain, "--since", str(tmp_path / "bad.json"),
                  database_url=database_url)
    assert bad.returncode == 2 and TRACEBACK not in bad.stderr and "frontier" in bad.stderr, str(bad)


async def test_an_entry_altered_while_it_waited_to_be_sealed_keeps_a_mac_that_does_not_fit(
        db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    entry = waiting_entry(ws, outcome="refused", error_code="permission_denied")
    async with db.write() as s:
        await insert_waiting(s, [entry])
        # … then turned into a success, with its hash recomputed, before the sealer reached it
        forged = content_hash(content_of(SimpleNamespace(**{**entry, "outcome": "allowed", "error_code": None})))
        await s.execute(update(audit_entries).where(audit_entries.c.organization_id == ws.org.id).values(
            outcome="allowed", error_code=None, entry_hash=forged))
    report = await verified(db, ws.org.id)  # the sealer refuses it: it stays waiting, named by its id
    assert not report.valid and report.first_broken_id is not None and "MAC" in (report.reason or ""), report


async def test_sealers_racing_on_one_log_give_every_entry_one_position(
        database_url: str, db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    entries = [waiting_entry(ws, arguments_digest=f"{i:064x}", detail={"n": i}) for i in range(300)]
    sealers = [Database(database_url) for _ in range(4)]
    try:
        async def write_in_six_commits() -> None:
            for chunk in range(0, 300, 50):
                async with db.write() as s:
                    await insert_waiting(s, entries[chunk:chunk + 50])
                await asyncio.sleep(0)

        # Four sealers, each with its own pool, race each other and the writes.
        await asyncio.gather(write_in_six_commits(), *(
            seal_all(d, [ws.org.id], ledger_keys(), checkpoint_every=0.0) for d in sealers))
        await asyncio.gather(*(seal_all(d, [ws.org.id], ledger_keys(), checkpoint_every=0.0) for d in sealers))
    finally:
        for d in sealers:
            await d.dispose()
    async with db.read() as s:
        positions = list((await s.execute(select(audit_entries.c.seq).where(
            audit_entries.c.organization_id == ws.org.id).order_by(audit_entries.c.seq))).scalars())
    assert positions == list(range(1, 301))
    report = await verified(db, ws.org.id)
    assert report.valid and report.tree_size == 300, report


async def test_a_process_with_another_master_secret_seals_nothing_and_the_other_logs_are_still_sealed(
        db: Database, factory: Factory, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A misconfigured process (another PRISM_SECRET_KEY) sweeping the database would give entries MACs and heads
    # signatures that fit no other process's key: every log it touched would fail verification.
    foreign = LedgerKeys(Settings(secret_key_file=str(tmp_path / "another.key")))
    assert foreign.key_id != ledger_keys().key_id
    first, second = sorted([await factory.workspace(roles=("owner",)) for _ in range(2)], key=lambda w: w.org.id)
    async with db.write() as s:
        await insert_waiting(s, [waiting_entry(w, detail={"n": i}) for w in (first, second) for i in range(3)])
    assert await seal_all(db, [first.org.id, second.org.id], foreign, checkpoint_every=0.0) == 0
    assert {str(r.message) for r in caplog.records if r.name == "prism.ledger"} >= {
        f"the audit log cannot be sealed: organization {w.org.id}: its log is signed with key "
        f"{ledger_keys().key_id}, and this process's key is {foreign.key_id}: every process of a deployment must "
        "share the master secret (PRISM_SECRET_KEY); nothing is sealed here" for w in (first, second)}
    async with db.read() as s:
        assert (await s.execute(select(func.count()).where(audit_entries.c.organization_id.in_(
            [first.org.id, second.org.id]), audit_entries.c.seq.is_(None)))).scalar_one() == 6

    # A log this key cannot seal does not hold up the ones after it.
    async with db.write() as s:
        await s.execute(update(audit_heads).where(audit_heads.c.organization_id == first.org.id).values(
            checkpoint=orjson.dumps({**orjson.loads((await head_of(db, first.org.id)).checkpoint),
                                     "key_id": foreign.key_id}).decode()))
    assert await seal_all(db, [first.org.id, second.org.id], ledger_keys(), checkpoint_every=0.0) == 3
    report = await verified(db, second.org.id)
    assert report.valid and report.tree_size == 3, report
    assert (await head_of(db, first.org.id)).tree_size == 0


async def test_a_checkpoint_event_reaches_subscribers_and_verifies_with_the_public_key(
        hook_client: httpx.AsyncClient, hook_db: Database, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    await create_hook(hook_client, ws, "https://127.0.0.1:9/checkpoints", events=["audit.checkpoint"])
    for _ in range(2):
        response = await hook_client.post(TOOL, headers=ws.headers(), json=LIST)
        assert response.status_code == 200, response.text
    await seal_waiting(hook_db, ws.org.id)
    async with hook_db.read() as s:
        payloads = list((await s.execute(select(OutboxEvent.payload).where(
            OutboxEvent.organization_id == ws.org.id, OutboxEvent.event_type == "audit.checkpoint"))).scalars())
    assert len(payloads) == 1  # the first seal keeps one; the next waits for the interval
    checkpoint = parse_checkpoint(orjson.loads(payloads[0])["data"])
    assert checkpoint.organization_id == ws.org.id and checkpoint.tree_size >= 1
    assert checkpoint.verifies(ledger_keys().public_key)
    public = run_cli("audit", "public-key", "--json", database_url=None)
    assert public.returncode == 0 and public.json["public_key"] == ledger_keys().public_key_b64, str(public)


# --- logs written as a hash chain before the tree -----------------------------------------------------

BEFORE_TREE = "0012_refresh_grace"
TENANTS = sa.table("tenants", sa.column("id", sa.String), sa.column("subdomain", sa.String),
                   sa.column("name", sa.String), sa.column("created_at", UTCDateTime()))
ORGS = sa.table("organizations", sa.column("id", sa.String), sa.column("tenant_id", sa.String),
                sa.column("slug", sa.String), sa.column("name", sa.String), sa.column("created_at", UTCDateTime()))
OLD_HEADS = sa.table("audit_heads", sa.column("organization_id", sa.String), sa.column("seq", sa.BigInteger),
                     sa.column("hash", sa.String))
CONTENT = ("organization_id", "tenant_id", "created_at", "actor_user_id", "credential_id", "door", "tool_name",
           "coordinate", "arguments_digest", "outcome", "error_code", "detail")
OLD_ENTRIES = sa.table("audit_entries", sa.column("seq", sa.BigInteger), sa.column("prev_hash", sa.String),
                       sa.column("hash", sa.String), sa.column("created_at", UTCDateTime()),
                       sa.column("detail", sa.JSON),
                       *(sa.column(c, sa.String) for c in CONTENT if c not in ("created_at", "detail")))


async def test_a_chain_written_before_the_tree_keeps_verifying_and_joins_the_signed_tree(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "chain") as url:
        await asyncio.to_thread(command.upgrade, alembic_config(url), BEFORE_TREE)
        tenant_id, org_id, at = str(uuid.uuid4()), str(uuid.uuid4()), utcnow().replace(microsecond=0)
        db = Database(url)
        try:
            async with db.write() as s:
                await s.execute(TENANTS.insert().values(id=tenant_id, subdomain="chained", name="C", created_at=at))
                await s.execute(ORGS.insert().values(id=org_id, tenant_id=tenant_id, slug="main", name="Main",
                                                     created_at=at))
                prev = GENESIS_HASH
                for seq in range(1, 6):  # as the chained ledger wrote them
                    content = {"organization_id": org_id, "tenant_id": tenant_id, "created_at": at,
                               "actor_user_id": None, "credential_id": None, "door": "rest",
                               "tool_name": "prism_whoami", "coordinate": "prism_whoami",
                               "arguments_digest": "0" * 64, "outcome": "allowed", "error_code": None,
                               "detail": {"status": 200, "cost": 0}}
                    hashed = {**content, "created_at": at.isoformat().replace("+00:00", "Z")}
                    digest = legacy_chain_hash(prev, hashed, seq)
                    await s.execute(OLD_ENTRIES.insert().values(**content, seq=seq, prev_hash=prev, hash=digest))
                    prev = digest
                await s.execute(OLD_HEADS.insert().values(organization_id=org_id, seq=5, hash=prev))
        finally:
            await db.dispose()

        migrated = run_cli("migrate", "--json", database_url=url)
        assert migrated.returncode == 0 and migrated.json["sealed"] == 0, str(migrated)
        db = Database(url)
        try:
            async with db.read() as s:
                report = await verify_log(s, org_id, ledger_keys())
            assert report.valid and report.tree_size == 5, report
            async with db.write() as s:  # a chained entry altered after the upgrade
                await s.execute(update(audit_entries).where(audit_entries.c.seq == 3).values(outcome="refused"))
            async with db.read() as s:
                broken = await verify_log(s, org_id, ledger_keys())
                total = (await s.execute(select(func.count()).select_from(audit_entries))).scalar_one()
            assert not broken.valid and broken.first_broken_seq == 3, broken
            assert total == 5
        finally:
            await db.dispose()
