"""documents word counts: a document's word_count is counted again with 0023's words; one index fewer on chunks

0023 wrote every chunk's postings and length with NFKC, case-folded words but left `documents_documents.word_count`
as the earlier words had counted it, so a document processed before 0023 could show a count other than a fresh
upload of the same content stores. Here every document whose count came from processing (processed, or a count
kept through archive and restore; failed and never processed documents keep their 0) is counted again as
processing counts it: the words of its extracted text. Stepping down leaves the counts: at 0024 an upload counts
with these words too.

`ix_documents_chunks_organization_id` is dropped: `ix_documents_chunks_lengths` (organization_id, collection_id,
document_id, token_count) leads with the same column, and both engines look rows up by a leading column of a
composite index, the organization's cascade included. Stepping down creates it again.

Revision ID: 0025_documents_word_counts
Revises: 0024_persona_require_mission
"""

import re
import unicodedata
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# Extraction is read from the app rather than copied: this revision does not change it, and a frozen copy would
# keep whatever an input that is slow to parse costs there, for every stored document.
from prism.apps.documents.text import ExtractionError, extract_text

revision: str = "0025_documents_word_counts"
down_revision: str | None = "0024_persona_require_mission"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Only the columns this migration reads or writes, as they are at this revision.
documents = sa.table("documents_documents", sa.column("id", sa.String), sa.column("content", sa.Text),
                     sa.column("content_type", sa.String), sa.column("status", sa.String),
                     sa.column("word_count", sa.Integer))

# Tokens exactly as prism.apps.documents (text.words) makes them at this revision, as 0023 writes them.
_WORD = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def upgrade() -> None:
    connection = op.get_bind()
    counted = documents.c.word_count != 0
    ids = connection.execute(sa.select(documents.c.id).where((documents.c.status == "processed") | counted)
                             ).scalars().all()
    recounted = []
    for document_id in ids:  # one document's content in memory at a time
        row = connection.execute(sa.select(documents.c.content, documents.c.content_type, documents.c.word_count)
                                 .where(documents.c.id == document_id)).one()
        try:
            count = len(_words(extract_text(row.content, row.content_type)))
        except ExtractionError:  # it parsed when it was processed; should it no longer, its count stands
            continue
        if count != row.word_count:
            recounted.append({"document_id": document_id, "counted": count})
    if recounted:
        connection.execute(documents.update().where(documents.c.id == sa.bindparam("document_id"))
                           .values(word_count=sa.bindparam("counted")), recounted)
    op.drop_index("ix_documents_chunks_organization_id", table_name="documents_chunks")


def downgrade() -> None:
    op.create_index("ix_documents_chunks_organization_id", "documents_chunks", ["organization_id"], unique=False)
