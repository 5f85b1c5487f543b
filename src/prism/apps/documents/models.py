from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from prism.apps.columns import moment, org_id, ref, status, updated_column
from prism.models.base import Base, created_column, id_column
from prism.tenancy.scope import OrgScoped


class Collection(OrgScoped, Base):
    __tablename__ = "documents_collections"
    __table_args__ = (UniqueConstraint("organization_id", "name"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = created_column()


class Document(OrgScoped, Base):
    __tablename__ = "documents_documents"

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    collection_id: Mapped[str | None] = ref("documents_collections.id", nullable=True)
    title: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(16), default="upload")
    source_uri: Mapped[str] = mapped_column(String(2048), default="")
    content: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    status: Mapped[str] = status("uploaded")
    word_count: Mapped[int] = mapped_column(Integer, default=0)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str] = mapped_column(String(1000), default="")
    processed_at: Mapped[datetime | None] = moment()
    created_at: Mapped[datetime] = created_column()
    updated_at: Mapped[datetime] = updated_column()


class DocumentChunk(OrgScoped, Base):
    __tablename__ = "documents_chunks"
    # Knowledge search counts the chunks in scope and adds their lengths up on every query: from this index
    # alone, without reading a row of text.
    __table_args__ = (UniqueConstraint("document_id", "seq"),
                      Index("ix_documents_chunks_lengths", "organization_id", "collection_id", "document_id",
                            "token_count"))

    id: Mapped[str] = id_column()
    # No index of its own: the lengths index leads with it.
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    document_id: Mapped[str] = ref("documents_documents.id", cascade=True)
    collection_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    seq: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)  # len(words(text)): the chunk's length for BM25
    created_at: Mapped[datetime] = created_column()


class DocumentPosting(OrgScoped, Base):
    """Knowledge search's inverted index, one row per (document, term): the document's chunks that hold the
    term, as (seq, frequency, length) triples (prism.apps.documents.index). Written and removed with the chunks.

    One row per document rather than per chunk keeps an upload's rows to its distinct words, and a query
    reads, per term, one row for each document that holds it.
    """

    __tablename__ = "documents_postings"
    __table_args__ = (Index("ix_documents_postings_organization_id_term", "organization_id", "term"),)

    document_id: Mapped[str] = mapped_column(ForeignKey("documents_documents.id", ondelete="CASCADE"),
                                             primary_key=True)
    term: Mapped[str] = mapped_column(String(100), primary_key=True)  # index.term_key(word)
    # No index of its own: the (organization_id, term) index leads with it.
    organization_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    collection_id: Mapped[str | None] = mapped_column(String(36), nullable=True)  # the document's, kept with it
    chunks: Mapped[bytes] = mapped_column(LargeBinary)
