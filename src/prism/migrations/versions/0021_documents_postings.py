"""documents postings: knowledge search's inverted index, one row per (document, term)

Knowledge search read and tokenised every chunk of the organization on each query. From here on a query
reads the postings of its own terms (`documents_postings`) and the number and total length of the chunks
in scope (from the index `ix_documents_chunks_lengths`, without reading their text). The postings of every existing chunk are written here, document by document, as processing writes
them (prism.apps.documents.index); a chunk's `token_count` is its length for BM25 and is set again from its
text wherever it differs from the word count the index uses.

Revision ID: 0021_documents_postings
Revises: 0020_integration_status
"""

import hashlib
import re
import struct
from collections import Counter
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_documents_postings"
down_revision: str | None = "0020_integration_status"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Only the columns this migration reads or writes, as they are at this revision.
chunks = sa.table("documents_chunks", sa.column("id", sa.String), sa.column("organization_id", sa.String),
                  sa.column("document_id", sa.String), sa.column("collection_id", sa.String),
                  sa.column("seq", sa.Integer), sa.column("text", sa.Text), sa.column("token_count", sa.Integer))
postings = sa.table("documents_postings", sa.column("organization_id", sa.String),
                    sa.column("document_id", sa.String), sa.column("collection_id", sa.String),
                    sa.column("term", sa.String), sa.column("chunks", sa.LargeBinary))

# Tokens and stored terms exactly as prism.apps.documents (text.words, index.term_key) make them at this revision.
_WORD = re.compile(r"\w+", re.UNICODE)
TERM_LENGTH = 64


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _term_key(term: str) -> str:
    if len(term) <= TERM_LENGTH:
        return term
    return term[:32] + "#" + hashlib.sha256(term.encode("utf-8", "surrogatepass")).hexdigest()


def upgrade() -> None:
    op.create_table(
        "documents_postings",
        sa.Column("document_id", sa.String(length=36), nullable=False),
        sa.Column("term", sa.String(length=100), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("collection_id", sa.String(length=36), nullable=True),
        sa.Column("chunks", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["document_id"], ["documents_documents.id"],
                                name=op.f("fk_documents_postings_document_id_documents_documents"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"],
                                name=op.f("fk_documents_postings_organization_id_organizations"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("document_id", "term", name=op.f("pk_documents_postings")),
    )
    op.create_index("ix_documents_postings_organization_id_term", "documents_postings",
                    ["organization_id", "term"], unique=False)
    op.create_index("ix_documents_chunks_lengths", "documents_chunks",
                    ["organization_id", "collection_id", "document_id", "token_count"], unique=False)
    connection = op.get_bind()
    documents = connection.execute(sa.select(chunks.c.document_id).distinct()).scalars().all()
    for document_id in documents:  # one document's chunks in memory at a time
        _index(connection, document_id)


def _index(connection: sa.Connection, document_id: str) -> None:
    rows = connection.execute(sa.select(chunks.c.id, chunks.c.organization_id, chunks.c.collection_id, chunks.c.seq,
                                        chunks.c.text, chunks.c.token_count)
                              .where(chunks.c.document_id == document_id).order_by(chunks.c.seq)).all()
    triples: dict[str, list[int]] = {}
    recounted = []
    for row in rows:
        tokens = _words(row.text)
        if len(tokens) != row.token_count:
            recounted.append({"chunk_id": row.id, "counted": len(tokens)})
        for term, frequency in Counter(tokens).items():
            triples.setdefault(term, []).extend((row.seq, frequency, len(tokens)))
    if recounted:
        connection.execute(chunks.update().where(chunks.c.id == sa.bindparam("chunk_id"))
                           .values(token_count=sa.bindparam("counted")), recounted)
    if triples:
        first = rows[0]
        connection.execute(postings.insert(), [
            {"organization_id": first.organization_id, "document_id": document_id,
             "collection_id": first.collection_id, "term": _term_key(term),
             "chunks": struct.pack(f"<{len(numbers)}I", *numbers)} for term, numbers in triples.items()])


def downgrade() -> None:
    op.drop_index("ix_documents_chunks_lengths", table_name="documents_chunks")
    op.drop_index("ix_documents_postings_organization_id_term", table_name="documents_postings")
    op.drop_table("documents_postings")
