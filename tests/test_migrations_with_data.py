"""Upgrading, and stepping down and up again, a database that already holds data."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from prism.app import create_app
from prism.config import Settings
from prism.migrate import alembic_config, migrate_with_alembic, newest_revision, sqlite_ddl_engine
from prism.storage import normalize_url, one_shot_engine
from tests.conftest import UNTHROTTLED
from tests.factories import Factory, Workspace
from tests.ledger_support import seal_waiting
from tests.processes import TEST_SECRET_KEY_FILE, TRACEBACK, free_port, run_cli, scratch_database

BEFORE_TREE = "0012_refresh_grace"
COUNTED = ("organizations", "memberships", "api_keys", "audit_heads", "audit_entries", "spare_parts")


def _on(url: str, work: Any) -> Any:
    """`work(sync connection)` on a database of either engine, committed."""

    async def run() -> Any:
        engine = one_shot_engine(url)
        try:
            async with engine.begin() as connection:
                return await connection.run_sync(work)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _counts(url: str) -> dict[str, int]:
    return _on(url, lambda c: {t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()  # noqa: S608
                               for t in COUNTED})


def _revision(url: str) -> str:
    return str(_on(url, lambda c: c.execute(text("SELECT version_num FROM alembic_version")).scalar_one()))


async def _app_on(url: str) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    settings = Settings(database_url=normalize_url(url), credential_cache_seconds=0, seed_demo=False,
                        key_touch_interval_seconds=3600, secret_key_file=str(TEST_SECRET_KEY_FILE),
                        webhook_worker_in_process=False, audit_seal_sweep_seconds=3600, **UNTHROTTLED)
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield application, client


async def _fill(url: str) -> Workspace:
    """A workspace with a key, a spare part and a few sealed ledger entries, written by the current code."""
    async for application, client in _app_on(url):
        ws = await Factory(application.state.db).workspace(roles=("owner",))
        made = await client.post("/prism/entity_crud/spare_parts/spare_part/create", headers=ws.headers(),
                                 json={"sku": "PUMP-Ω-1", "name": "Pompe à eau — 水泵", "unit_cost_cents": 123456})
        assert made.status_code in (200, 201), made.text
        for _ in range(3):
            listed = await client.post("/prism/entity_crud/spare_parts/spare_part/list", json={}, headers=ws.headers())
            assert listed.status_code == 200, listed.text
        await seal_waiting(application.state.db, ws.org.id)
        return ws
    raise AssertionError("unreachable")


def _downgrade_without_cascades(url: str, revision: str) -> None:
    """Step down as `prism migrate` steps up: on SQLite on the DDL connection (foreign keys not enforced)."""
    config = alembic_config(url)
    if not make_url(url).drivername.startswith("sqlite"):
        command.downgrade(config, revision)
        return
    engine = sqlite_ddl_engine(url)
    try:
        with engine.connect() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
            connection.commit()
    finally:
        engine.dispose()


# --- a database at a revision this Prism does not know -------------------------------------------------

def _stamp(url: str, revision: str) -> None:
    def work(connection: Connection) -> None:
        connection.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})

    _on(url, work)


def test_migrate_on_a_database_a_newer_prism_migrated_is_refused_without_a_traceback(tmp_path: Path) -> None:
    """A node still on this version (rolling upgrade, or a rollback) meets a database a newer Prism migrated:
    `prism migrate` must refuse it in its documented one-line JSON error, not crash with a traceback."""
    with scratch_database(tmp_path, "newer") as url:
        migrate_with_alembic(url)
        _stamp(url, "0099_from_a_newer_prism")
        result = run_cli("migrate", "--json", database_url=url)
        assert TRACEBACK not in result.stderr, str(result)
        assert result.returncode == 1, str(result)
        assert "0099_from_a_newer_prism" in result.error["message"], str(result)
        assert _revision(url) == "0099_from_a_newer_prism"  # nothing touched


def test_serve_on_a_database_a_newer_prism_migrated_fails_without_a_traceback(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "newerserve") as url:
        migrate_with_alembic(url)
        _stamp(url, "0099_from_a_newer_prism")
        result = run_cli("serve", "--port", str(free_port()), "--json", database_url=url, timeout=60)
        assert TRACEBACK not in result.stderr, str(result)
        assert result.returncode == 1, str(result)
        assert "0099_from_a_newer_prism" in result.error["message"], str(result)


# --- stepping down with Alembic ----------------------------------------------------------------------

async def test_stepping_down_past_the_ledger_tree_keeps_every_organizations_rows(tmp_path: Path) -> None:
    """`0013_ledger_tree`'s downgrade drops a column of `organizations`; on SQLite Alembic's batch mode rebuilds
    the table (DROP TABLE organizations), and with foreign keys enforced that DROP deletes every row that
    references an organization ON DELETE CASCADE: keys, memberships, ledgers, every app's records."""
    with scratch_database(tmp_path, "down") as url:
        await asyncio.to_thread(migrate_with_alembic, url)
        await _fill(url)
        before = await asyncio.to_thread(_counts, url)
        assert all(before[t] > 0 for t in COUNTED), before
        # Entries written under the tree make that downgrade refuse (the chain cannot hold them): gone here, so
        # that the step down runs and rebuilds `organizations`.
        await asyncio.to_thread(_on, url, lambda c: c.execute(text("DELETE FROM audit_entries")))
        before["audit_entries"] = 0
        await asyncio.to_thread(command.downgrade, alembic_config(url), BEFORE_TREE)
        assert await asyncio.to_thread(_revision, url) == BEFORE_TREE
        assert await asyncio.to_thread(_counts, url) == before


async def test_stepping_down_below_the_ledger_tree_and_up_again_keeps_the_log(tmp_path: Path) -> None:
    """Down to 0012 and up again, once calls were recorded under the tree. The downgrade left the tree's entries
    with NULL `hash`, and 0013's `entry_hash = hash` then failed its NOT NULL: a database that could not be brought
    back. 0013's downgrade now refuses, and `prism migrate` brings the database back with every entry."""
    with scratch_database(tmp_path, "roundtrip") as url:
        await asyncio.to_thread(migrate_with_alembic, url)
        await _fill(url)
        before = await asyncio.to_thread(_counts, url)
        try:
            await asyncio.to_thread(_downgrade_without_cascades, url, BEFORE_TREE)
        except RuntimeError as refused:  # 0013's downgrade refuses: the chain cannot hold the tree's entries
            assert "written under the signed tree" in str(refused)
            assert await asyncio.to_thread(_revision, url) != BEFORE_TREE
        migrated = await asyncio.to_thread(run_cli, "migrate", "--json", database_url=url)
        assert migrated.returncode == 0, str(migrated)
        assert await asyncio.to_thread(_revision, url) == newest_revision()
        assert await asyncio.to_thread(_counts, url) == before


# --- an upgrade from the hash chain that stopped before it sealed ---------------------------------------

async def test_the_hint_for_a_log_an_interrupted_upgrade_left_unsigned_finishes_the_job(tmp_path: Path) -> None:
    """The migration committed, then the process stopped before sealing (docs/audit.md: "If the upgrading
    process stopped before it sealed, `prism audit seal --sign-unsigned-heads` finishes the job"). Verification
    tells the operator to "run `prism migrate`, which seals logs written before signed heads"; but a database
    already at the newest revision crosses nothing, so that `prism migrate` signs nothing and the log stays
    unsigned. Either the hint must name the command that works, or the command it names must work."""
    import uuid

    from prism.kit.timeutil import utcnow
    from prism.ledger.entries import GENESIS_HASH, legacy_chain_hash
    from prism.storage import Database
    from tests.test_ledger_tree import OLD_ENTRIES, OLD_HEADS, ORGS, TENANTS

    with scratch_database(tmp_path, "stopped") as url:
        await asyncio.to_thread(command.upgrade, alembic_config(url), BEFORE_TREE)
        tenant_id, org_id, at = str(uuid.uuid4()), str(uuid.uuid4()), utcnow().replace(microsecond=0)
        db = Database(url)
        try:
            async with db.write() as s:
                await s.execute(TENANTS.insert().values(id=tenant_id, subdomain="stopped", name="S", created_at=at))
                await s.execute(ORGS.insert().values(id=org_id, tenant_id=tenant_id, slug="main", name="Main",
                                                     created_at=at))
                prev = GENESIS_HASH
                for seq in range(1, 4):
                    content = {"organization_id": org_id, "tenant_id": tenant_id, "created_at": at,
                               "actor_user_id": None, "credential_id": None, "door": "rest",
                               "tool_name": "prism_whoami", "coordinate": "prism_whoami",
                               "arguments_digest": "0" * 64, "outcome": "allowed", "error_code": None,
                               "detail": {"status": 200, "note": "é — 水"}}
                    hashed = {**content, "created_at": at.isoformat().replace("+00:00", "Z")}
                    digest = legacy_chain_hash(prev, hashed, seq)
                    await s.execute(OLD_ENTRIES.insert().values(**content, seq=seq, prev_hash=prev, hash=digest))
                    prev = digest
                await s.execute(OLD_HEADS.insert().values(organization_id=org_id, seq=3, hash=prev))
        finally:
            await db.dispose()

        await asyncio.to_thread(migrate_with_alembic, url)  # migrated; the process stopped before sealing
        first = await asyncio.to_thread(run_cli, "audit", "verify", "--tenant", "stopped", "--json", database_url=url)
        assert first.returncode == 1, str(first)
        reason = first.json["logs"][0]["reason"]
        assert "not signed" in reason, reason
        if "prism migrate" not in reason:
            return  # the hint names another command (docs: `prism audit seal --sign-unsigned-heads`)
        followed = await asyncio.to_thread(run_cli, "migrate", "--json", database_url=url)
        assert followed.returncode == 0, str(followed)
        after = await asyncio.to_thread(run_cli, "audit", "verify", "--tenant", "stopped", "--json", database_url=url)
        assert after.returncode == 0 and after.json["valid"] is True, (
            f"verification said {reason!r}; after `prism migrate`:\n{after}")
