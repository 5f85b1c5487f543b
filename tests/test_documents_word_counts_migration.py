"""Migration 0025 counts a processed document's words again as an upload counts them (0023 wrote the chunks with
NFKC, case-folded words but left the document's word_count as the earlier words counted it), and drops the
chunks' organization_id index, which the lengths index leads with on both engines."""

from __future__ import annotations

import asyncio
import re
import unicodedata
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from sqlalchemy import Connection, inspect, select, text, update

from prism.apps.documents.models import Document
from prism.apps.documents.text import extract_text
from prism.migrate import alembic_config, migrate_with_alembic
from prism.storage import Database, one_shot_engine
from tests.domain_support import Caller
from tests.factories import Factory
from tests.processes import scratch_database
from tests.test_documents_postings_migration import _with_app

BEFORE_WORDS = "0022_viewer_keys_self_service"  # words neither normalised nor case-folded
BEFORE = "0024_persona_require_mission"
ORGANIZATION_INDEX = "ix_documents_chunks_organization_id"
# Each accent a combining character after its letter: the earlier words split `réglée` into `re`, `gle`, `e`.
NFD_NOTE = unicodedata.normalize("NFD", "Le joint mécanique de la pompe est réglée et changé. Straße.")
UPLOADS = {
    "note": {"content": NFD_NOTE},
    # the count is of the extracted text: the title, script and markup are not words of the document
    "page": {"content": f"<html><head><title>Pompe</title><script>var réglage = 1;</script></head>"
                        f"<body><h1>Pompe</h1><p>{NFD_NOTE}</p></body></html>", "content_type": "text/html"},
    "draft": {"content": NFD_NOTE, "process": False},
    "shelved": {"content": NFD_NOTE},  # archived after processing: it keeps the count
}


def _earlier_count(content: str, content_type: str) -> int:
    """The word_count processing stored before 0023: word tokens of the extracted text as written."""
    return len(re.findall(r"\w+", extract_text(content, content_type)))


async def _on(url: str, work: Any) -> Any:
    """`work(sync connection)` in one transaction, without starting Prism (which would upgrade first)."""
    engine = one_shot_engine(url)
    try:
        async with engine.begin() as connection:
            return await connection.run_sync(work)
    finally:
        await engine.dispose()


def _counts(connection: Connection) -> dict[str, int]:
    return {title: count for title, count in connection.execute(select(Document.title, Document.word_count))}


def _chunk_indexes(connection: Connection) -> set[str]:
    return {str(i["name"]) for i in inspect(connection).get_indexes("documents_chunks")}


async def test_the_upgrade_counts_stored_documents_as_an_upload_does(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "word_counts") as url:
        await asyncio.to_thread(migrate_with_alembic, url)

        async def upload(db: Database, client: httpx.AsyncClient) -> None:
            mine = Caller(client, await Factory(db).workspace(roles=("owner",)))
            for title, arguments in UPLOADS.items():
                document = await mine.ok("document_op", "documents", "document", "upload",
                                         {"title": title, **arguments})
                if title == "shelved":
                    await mine.ok("document_op", "documents", "document", "archive", {"id": document["id"]})

        await _with_app(url, upload)
        fresh = await _on(url, _counts)  # what an upload counts at the newest revision
        assert fresh["draft"] == 0 and fresh["note"] == fresh["shelved"] > 0
        config = alembic_config(url)
        await asyncio.to_thread(command.downgrade, config, BEFORE)
        assert ORGANIZATION_INDEX in await _on(url, _chunk_indexes)
        assert await _on(url, _counts) == fresh  # stepping down leaves the counts: 0024 counts with these words
        await asyncio.to_thread(command.downgrade, config, BEFORE_WORDS)

        def count_as_before(connection: Connection) -> dict[str, int]:  # as processing counted before 0023
            earlier = {title: _earlier_count(u["content"], u.get("content_type", "text/plain"))
                       for title, u in UPLOADS.items() if u.get("process", True)}
            for title, count in earlier.items():
                connection.execute(update(Document).where(Document.title == title).values(word_count=count))
            return earlier

        earlier = await _on(url, count_as_before)
        assert earlier["note"] != fresh["note"] and earlier["page"] != fresh["page"]
        await asyncio.to_thread(migrate_with_alembic, url)
        assert await _on(url, _counts) == fresh
        assert ORGANIZATION_INDEX not in await _on(url, _chunk_indexes)


def _plan(connection: Connection) -> str:
    """The plan of a lookup of an organization's chunks (as its deletion's cascade makes), with the table's
    scan ruled out on PostgreSQL, which reads a table this small whole."""
    lookup = "SELECT id FROM documents_chunks WHERE organization_id = 'o'"
    if connection.dialect.name == "sqlite":
        return " ".join(str(row[-1]) for row in connection.execute(text(f"EXPLAIN QUERY PLAN {lookup}")))
    connection.execute(text("SET LOCAL enable_seqscan = off"))
    return " ".join(str(row[0]) for row in connection.execute(text(f"EXPLAIN {lookup}")))


async def test_an_organizations_chunks_are_found_by_the_lengths_index(database_url: str) -> None:
    plan = await _on(database_url, _plan)
    assert "ix_documents_chunks_lengths" in plan, plan
