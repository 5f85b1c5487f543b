"""Storing a document's chunks with their postings, and removing them: the inverted index of knowledge search.

Each (document, term) has one `documents_postings` row whose `chunks` lists the document's chunks holding
the term as (seq, frequency, length) triples of little-endian unsigned 32-bit integers, in chunk order,
where length is the chunk's number of words (its `token_count`). A query thus reads, per term, one row
for each document that holds it, needs no chunk text, and reads the numbers straight into arrays. Rows are
written in bulk (one executemany, no ORM object per row), in the transaction that writes the chunks, and
deleted with them (a document's deletion cascades to both).

A term is stored as itself up to TERM_LENGTH characters; a longer one (a word of hundreds of letters, which
an index entry cannot hold on PostgreSQL) as its beginning, `#` (never part of a word) and its SHA-256.
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table, delete, insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.apps.documents.models import DocumentChunk, DocumentPosting
from prism.apps.documents.text import words

TERM_LENGTH = 64
# Core inserts of the tables (an executemany of plain rows): the ORM's bulk insert spent as much again sorting
# each row's keys out, for thousands of postings rows per upload.
_chunks: Table = DocumentChunk.__table__  # type: ignore[assignment]
_postings: Table = DocumentPosting.__table__  # type: ignore[assignment]


def term_key(term: str) -> str:
    if len(term) <= TERM_LENGTH:
        return term
    return term[:32] + "#" + hashlib.sha256(term.encode("utf-8", "surrogatepass")).hexdigest()


def postings(chunk_words: Sequence[Sequence[str]]) -> dict[str, bytes]:
    """Each term of the chunks (`words()` of each, by seq) and its encoded (seq, frequency, length) triples."""
    triples: dict[str, list[int]] = {}
    for seq, tokens in enumerate(chunk_words):
        length = len(tokens)
        for term, frequency in Counter(tokens).items():
            triples.setdefault(term, []).extend((seq, frequency, length))
    return {term: struct.pack(f"<{len(numbers)}I", *numbers) for term, numbers in triples.items()}


def decode(chunks: bytes) -> Iterator[tuple[int, int, int]]:
    """The (seq, frequency, length) triples of one postings row."""
    return struct.iter_unpack("<3I", chunks)


async def store_chunks(session: AsyncSession, *, organization_id: str, document_id: str, collection_id: str | None,
                       chunks: Sequence[str]) -> None:
    """Insert a document's chunks (seq = position) and their postings; the document has none at this point."""
    if not chunks:
        return
    tokens = [words(chunk) for chunk in chunks]
    await session.execute(insert(_chunks), [
        {"organization_id": organization_id, "document_id": document_id, "collection_id": collection_id,
         "seq": seq, "text": chunk, "token_count": len(tokens[seq])} for seq, chunk in enumerate(chunks)])
    rows: list[dict[str, Any]] = [
        {"organization_id": organization_id, "document_id": document_id, "collection_id": collection_id,
         "term": term_key(term), "chunks": encoded} for term, encoded in postings(tokens).items()]
    rows.sort(key=lambda row: row["term"])  # in primary key order: each row goes next to the one before
    await session.execute(insert(_postings), rows)


async def drop_chunks(session: AsyncSession, document_id: str) -> None:
    """Remove a document's chunks and their postings (archive, processing again)."""
    await session.execute(delete(DocumentPosting).where(DocumentPosting.document_id == document_id))
    await session.execute(delete(DocumentChunk).where(DocumentChunk.document_id == document_id))


async def move_chunks(session: AsyncSession, document_id: str, collection_id: str | None) -> None:
    """The document moved to another collection (or out of any): its chunks and postings follow."""
    await session.execute(update(DocumentChunk).where(DocumentChunk.document_id == document_id)
                          .values(collection_id=collection_id))
    await session.execute(update(DocumentPosting).where(DocumentPosting.document_id == document_id)
                          .values(collection_id=collection_id))
