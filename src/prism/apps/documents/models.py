from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String, Text, UniqueConstraint
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
    __table_args__ = (UniqueConstraint("document_id", "seq"),)

    id: Mapped[str] = id_column()
    organization_id: Mapped[str] = org_id()
    document_id: Mapped[str] = ref("documents_documents.id", cascade=True)
    collection_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    seq: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = created_column()
