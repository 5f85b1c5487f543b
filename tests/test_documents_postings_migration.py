"""Migration 0021 writes the postings of the chunks stored before it, exactly as processing writes them, so
that knowledge search ranks existing documents as before; a chunk's length is set again from its text."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from sqlalchemy import select, update

from prism.app import create_app
from prism.apps.documents.models import DocumentChunk, DocumentPosting
from prism.config import Settings
from prism.migrate import alembic_config, migrate_with_alembic
from prism.storage import Database, normalize_url
from tests.conftest import UNTHROTTLED
from tests.domain_support import Caller
from tests.factories import Factory
from tests.processes import TEST_SECRET_KEY_FILE, scratch_database

BEFORE = "0020_integration_status"
MANUAL = ("Prime the casing with water before starting. Never run the pump dry: the mechanical seal overheats. "
          "Replace the mechanical seal every 8000 operating hours. Grease the motor bearings every 30 days. ") * 12


async def _with_app(url: str, work: Any) -> Any:
    settings = Settings(database_url=normalize_url(url), credential_cache_seconds=0, seed_demo=False,
                        secret_key_file=str(TEST_SECRET_KEY_FILE), webhook_worker_in_process=False,
                        audit_seal_sweep_seconds=3600, **UNTHROTTLED)
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await work(application.state.db, client)


async def _postings(db: Database) -> dict[tuple[str, str], tuple[str, str | None, str]]:
    async with db.read() as session:
        rows = (await session.execute(select(DocumentPosting))).scalars().all()
    return {(p.document_id, p.term): (p.organization_id, p.collection_id, p.chunks) for p in rows}


async def test_the_upgrade_indexes_every_stored_chunk(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "postings") as url:
        await asyncio.to_thread(migrate_with_alembic, url)

        async def fill(db: Database, client: httpx.AsyncClient) -> Any:
            mine = Caller(client, await Factory(db).workspace(roles=("owner",)))
            theirs = Caller(client, await Factory(db).workspace(roles=("owner",)))
            shelf = await mine.create("documents", "collection", {"name": "Plant manuals"})
            await mine.ok("document_op", "documents", "document", "upload", {
                "title": "Pump", "content": MANUAL, "collection_id": shelf["id"], "chunk_words": 30,
                "overlap_words": 5})
            await mine.ok("document_op", "documents", "document", "upload", {"title": "Note", "content": "Seal leaks."})
            await theirs.ok("document_op", "documents", "document", "upload", {"title": "Theirs", "content": MANUAL})
            search = {"query": "how often is the mechanical seal replaced", "top_k": 10}
            hits = await mine.ok("knowledge_query", "documents", "chunk", "search", search)
            async with db.write() as session:  # a length stored by an older count: set again by the upgrade
                await session.execute(update(DocumentChunk).where(DocumentChunk.seq == 1).values(token_count=1))
            return mine, search, hits, await _postings(db)

        mine, search, hits, written = await _with_app(url, fill)
        assert len(written) > 20 and hits["results"]
        await asyncio.to_thread(command.downgrade, alembic_config(url), BEFORE)
        await asyncio.to_thread(migrate_with_alembic, url)

        async def check(db: Database, client: httpx.AsyncClient) -> None:
            assert await _postings(db) == written
            async with db.read() as session:
                lengths = (await session.execute(select(DocumentChunk.token_count).where(
                    DocumentChunk.seq == 1))).scalars().all()
            assert lengths and 1 not in lengths
            again = Caller(client, mine.ws)
            assert await again.ok("knowledge_query", "documents", "chunk", "search", search) == hits

        await _with_app(url, check)
