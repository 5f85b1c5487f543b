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
from dataclasses import dataclass

from sqlalchemy import Table, delete, insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from prism.apps.documents.models import DocumentChunk, DocumentPosting
from prism.apps.documents.text import ExtractionError, chunk_text, extract_text, words
from prism.kit.ids import new_id
from prism.kit.timeutil import utcnow
from prism.storage import long_writes
from prism.storage.prepared import PreparedWrite

TERM_LENGTH = 64
# What one document may index (docs/domain.md). Each chunk is a row and each distinct word a postings row, all
# written in the call's transaction: 1 MB of 198,000 distinct words took 7 to 10 s, every other call waiting.
MAX_CHUNKS = 5_000
MAX_TERMS = 50_000
# Prepared inserts of the tables (prism.storage.prepared: executemanys of plain rows, in slices with the event loop
# served between them). The ORM's bulk insert spent as much again as a Core insert sorting each row's keys out, and
# a Core insert's conversion of 20,000 postings rows held the loop for 0.25 s at once.
_chunks: Table = DocumentChunk.__table__  # type: ignore[assignment]
_postings: Table = DocumentPosting.__table__  # type: ignore[assignment]
_INSERT_CHUNKS = PreparedWrite(insert(_chunks), column_keys=(
    "id", "organization_id", "document_id", "collection_id", "seq", "text", "token_count", "created_at"))
_INSERT_POSTINGS = PreparedWrite(insert(_postings), column_keys=(
    "organization_id", "document_id", "collection_id", "term", "chunks"))


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


class TooMuchToIndex(ExtractionError):
    """The text is within the size limit but would index more chunks or distinct words than a document may."""


@dataclass(frozen=True, slots=True)
class ChunkIndex:
    """A document's text cut into chunks, with each chunk's length in words and the postings of its terms."""

    chunks: list[str]
    lengths: list[int]
    postings: dict[str, bytes]  # by stored term (term_key), in its order: the order rows are inserted in
    word_count: int


def index_text(content: str, content_type: str, *, chunk_words: int, overlap_words: int) -> ChunkIndex:
    """Extract, chunk and tokenise a document, and build its postings: CPU work with no database, run on a
    worker thread (the event loop serves every call meanwhile). Raises ExtractionError when the content does
    not parse, TooMuchToIndex past MAX_CHUNKS or MAX_TERMS."""
    text = extract_text(content, content_type)
    chunks = chunk_text(text, size=chunk_words, overlap=overlap_words)
    if len(chunks) > MAX_CHUNKS:
        raise TooMuchToIndex(f"the text cuts into {len(chunks)} chunks, more than the {MAX_CHUNKS:,} a document may "
                             "have: process it with a larger chunk_words, or split it")
    tokens = [words(chunk) for chunk in chunks]
    terms = postings(tokens)
    if len(terms) > MAX_TERMS:
        raise TooMuchToIndex(f"the text holds {len(terms)} distinct words, more than the {MAX_TERMS:,} a document "
                             "may index: split it")
    # Sorted here, on the worker thread: sorting 20,000 terms took 10-30 ms of the event loop in store_chunks.
    return ChunkIndex(chunks, [len(t) for t in tokens], dict(sorted((term_key(t), e) for t, e in terms.items())),
                      len(words(text)))


def decode(chunks: bytes) -> Iterator[tuple[int, int, int]]:
    """The (seq, frequency, length) triples of one postings row."""
    return struct.iter_unpack("<3I", chunks)


async def store_chunks(session: AsyncSession, *, organization_id: str, document_id: str, collection_id: str | None,
                       index: ChunkIndex) -> None:
    """Insert a document's chunks (seq = position) and their postings; the document has none at this point."""
    if not index.chunks:
        return
    created_at = utcnow()
    await _INSERT_CHUNKS.run(session, (
        {"id": new_id(), "organization_id": organization_id, "document_id": document_id,
         "collection_id": collection_id, "seq": seq, "text": chunk, "token_count": index.lengths[seq],
         "created_at": created_at} for seq, chunk in enumerate(index.chunks)))
    # in primary key order (`postings` is sorted by term): each row goes next to the one before
    await _INSERT_POSTINGS.run(session, (
        {"organization_id": organization_id, "document_id": document_id, "collection_id": collection_id,
         "term": term, "chunks": encoded} for term, encoded in index.postings.items()))


async def drop_chunks(session: AsyncSession, document_id: str) -> None:
    """Remove a document's chunks and their postings (archive, processing again): up to 50,000 rows, off the event
    loop (prism.storage.long_writes)."""
    async with long_writes(session):
        await session.execute(delete(DocumentPosting).where(DocumentPosting.document_id == document_id))
        await session.execute(delete(DocumentChunk).where(DocumentChunk.document_id == document_id))


async def move_chunks(session: AsyncSession, document_id: str, collection_id: str | None) -> None:
    """The document moved to another collection (or out of any): its chunks and postings follow, off the loop."""
    async with long_writes(session):
        await session.execute(update(DocumentChunk).where(DocumentChunk.document_id == document_id)
                              .values(collection_id=collection_id))
        await session.execute(update(DocumentPosting).where(DocumentPosting.document_id == document_id)
                              .values(collection_id=collection_id))
