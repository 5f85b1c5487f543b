"""documents words: tokens are NFKC-normalised and case-folded, so decomposed (NFD) text is found

Knowledge search split words at a combining accent (`cafe` + U+0301 gave `cafe`, and `café` typed in NFC found
nothing) and lower-cased only. From here on a word is taken from the text's NFKC form, case-folded
(prism.apps.documents.text.words), when indexing and when querying. Every stored chunk's postings and length are
written again here with those tokens, document by document, as 0021 wrote them; the downgrade writes them with
the earlier tokens.

Revision ID: 0023_documents_unicode_words
Revises: 0022_viewer_keys_self_service
"""

import hashlib
import re
import struct
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023_documents_unicode_words"
down_revision: str | None = "0022_viewer_keys_self_service"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Only the columns this migration reads or writes, as they are at this revision.
chunks = sa.table("documents_chunks", sa.column("id", sa.String), sa.column("organization_id", sa.String),
                  sa.column("document_id", sa.String), sa.column("collection_id", sa.String),
                  sa.column("seq", sa.Integer), sa.column("text", sa.Text), sa.column("token_count", sa.Integer))
postings = sa.table("documents_postings", sa.column("organization_id", sa.String),
                    sa.column("document_id", sa.String), sa.column("collection_id", sa.String),
                    sa.column("term", sa.String), sa.column("chunks", sa.LargeBinary))

# Tokens and stored terms exactly as prism.apps.documents (text.words, index.term_key) make them after and before
# this revision.
_WORD = re.compile(r"\w+", re.UNICODE)
TERM_LENGTH = 64


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def _earlier_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _term_key(term: str) -> str:
    if len(term) <= TERM_LENGTH:
        return term
    return term[:32] + "#" + hashlib.sha256(term.encode("utf-8", "surrogatepass")).hexdigest()


def upgrade() -> None:
    _reindex(_words)


def downgrade() -> None:
    _reindex(_earlier_words)


def _reindex(words: Callable[[str], list[str]]) -> None:
    connection = op.get_bind()
    documents = connection.execute(sa.select(chunks.c.document_id).distinct()).scalars().all()
    for document_id in documents:  # one document's chunks in memory at a time
        _index(connection, document_id, words)


def _index(connection: sa.Connection, document_id: str, words: Callable[[str], list[str]]) -> None:
    rows = connection.execute(sa.select(chunks.c.id, chunks.c.organization_id, chunks.c.collection_id, chunks.c.seq,
                                        chunks.c.text, chunks.c.token_count)
                              .where(chunks.c.document_id == document_id).order_by(chunks.c.seq)).all()
    triples: dict[str, list[int]] = {}
    recounted = []
    for row in rows:
        tokens = words(row.text)
        if len(tokens) != row.token_count:
            recounted.append({"chunk_id": row.id, "counted": len(tokens)})
        for term, frequency in Counter(tokens).items():
            triples.setdefault(term, []).extend((row.seq, frequency, len(tokens)))
    if recounted:
        connection.execute(chunks.update().where(chunks.c.id == sa.bindparam("chunk_id"))
                           .values(token_count=sa.bindparam("counted")), recounted)
    connection.execute(postings.delete().where(postings.c.document_id == document_id))
    if triples:
        first = rows[0]
        connection.execute(postings.insert(), [
            {"organization_id": first.organization_id, "document_id": document_id,
             "collection_id": first.collection_id, "term": _term_key(term),
             "chunks": struct.pack(f"<{len(numbers)}I", *numbers)} for term, numbers in triples.items()])
