"""Words are taken from the NFKC form of the text, case-folded, when indexing and querying, so decomposed (NFD)
text is found by its composed spelling and the other way round; migration 0023 indexes stored chunks so."""

from __future__ import annotations

import asyncio
import unicodedata
from pathlib import Path
from typing import Any

import httpx
from alembic import command

from prism.apps.documents.text import words
from prism.migrate import alembic_config, migrate_with_alembic
from prism.storage import Database
from tests.domain_support import Caller
from tests.factories import Factory
from tests.processes import scratch_database
from tests.test_documents_postings_migration import _postings, _with_app

BEFORE = "0022_viewer_keys_self_service"
# As macOS and some exports write it: each accent a combining character after its letter.
NFD_NOTE = unicodedata.normalize("NFD", "Le joint mécanique de la pompe du café est changé. Straße.")


def test_words_are_alike_however_the_text_spells_them() -> None:
    assert words(NFD_NOTE) == words(unicodedata.normalize("NFC", NFD_NOTE))
    assert "mécanique" in words(NFD_NOTE) and "strasse" in words(NFD_NOTE)
    assert words("\uff30\uff35\uff2d\uff30 \ufb01lter")  # full-width PUMP, the fi ligature == ["pump", "filter"]


async def test_decomposed_text_is_found_by_its_composed_spelling(client: httpx.AsyncClient,
                                                                  factory: Factory) -> None:
    c = Caller(client, await factory.workspace(roles=("owner",)))
    doc = await c.ok("document_op", "documents", "document", "upload", {"title": "Note", "content": NFD_NOTE})
    for query in ("mécanique", unicodedata.normalize("NFD", "CAFÉ"), "STRASSE"):
        found = await c.ok("knowledge_query", "documents", "chunk", "search", {"query": query})
        assert [r["document_id"] for r in found["results"]] == [doc["id"]], query


async def test_the_upgrade_indexes_stored_chunks_with_the_new_words(tmp_path: Path) -> None:
    with scratch_database(tmp_path, "unicode") as url:
        await asyncio.to_thread(migrate_with_alembic, url)

        async def fill(db: Database, client: httpx.AsyncClient) -> Any:
            mine = Caller(client, await Factory(db).workspace(roles=("owner",)))
            await mine.ok("document_op", "documents", "document", "upload", {"title": "Note", "content": NFD_NOTE})
            return mine, await _postings(db)

        mine, written = await _with_app(url, fill)
        await asyncio.to_thread(command.downgrade, alembic_config(url), BEFORE)  # indexed with the earlier words

        async def earlier(db: Database, client: httpx.AsyncClient) -> Any:
            return await _postings(db)

        assert {term for _, term in await _with_app(url, earlier)} >= {"me", "canique", "cafe"}
        await asyncio.to_thread(migrate_with_alembic, url)

        async def check(db: Database, client: httpx.AsyncClient) -> None:
            assert await _postings(db) == written
            found = await Caller(client, mine.ws).ok("knowledge_query", "documents", "chunk", "search",
                                                     {"query": "café"})
            assert len(found["results"]) == 1

        await _with_app(url, check)
