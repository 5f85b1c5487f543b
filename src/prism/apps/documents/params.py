"""Parameter models of the documents app."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from prism.apps.params import ListParams, Params

ContentType = Literal["text/plain", "text/markdown", "text/html", "text/csv", "application/json"]
DocumentStatus = Literal["uploaded", "processed", "failed", "archived"]
# An id given in a list: "" names no record, refused (400 naming the field) rather than matching nothing.
Id = Annotated[str, Field(min_length=1, max_length=64)]
MAX_CONTENT = 1_000_000  # within the 1 MiB a request body may hold (prism.web.requests)


class CollectionList(ListParams):
    pass


class CollectionCreate(Params):
    name: str = Field(..., min_length=1, max_length=255, description="Collection name, unique per organization.")
    description: str = Field("", max_length=5000, description="What the collection holds.")


class CollectionUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Collection id.")
    name: str | None = Field(None, min_length=1, max_length=255, description="Collection name.")
    description: str | None = Field(None, max_length=5000, description="What the collection holds.")


class DocumentList(ListParams):
    status: DocumentStatus | None = Field(None, description="Only documents in this state.")
    collection_id: str | None = Field(None, min_length=1, max_length=64,
        description="Only documents of this collection.")
    content_type: ContentType | None = Field(None, description="Only documents of this content type.")
    source: Literal["upload", "import"] | None = Field(None, description="Only uploaded or imported documents.")


class DocumentUpdate(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Document id.")
    title: str | None = Field(None, min_length=1, max_length=255, description="Document title.")
    collection_id: str | None = Field(None, min_length=1, max_length=64,
        description="Move the document to this collection.")


class ChunkList(ListParams):
    document_id: str | None = Field(None, min_length=1, max_length=64,
        description="Only chunks of this document.")
    collection_id: str | None = Field(None, min_length=1, max_length=64,
        description="Only chunks of this collection.")


class ChunkSizes(Params):
    chunk_words: int = Field(200, ge=20, le=2000, description="Target chunk size in words.")
    overlap_words: int = Field(40, ge=0, le=500, description="Words shared by consecutive chunks (at most half "
                               "a chunk).")

    @model_validator(mode="after")
    def _whole_steps(self) -> Self:
        """Each chunk moves on by at least half its size: an overlap of 19 in 20 words stored a chunk per word."""
        if self.overlap_words * 2 > self.chunk_words:
            raise ValueError("overlap_words: at most half of chunk_words")
        return self


class Chunking(ChunkSizes):
    process: bool = Field(True, description="Extract and chunk the text at once (else call process later).")


class DocumentUpload(Chunking):
    title: str = Field(..., min_length=1, max_length=255, description="Document title.")
    content: str = Field(..., min_length=1, max_length=MAX_CONTENT, description="The document's text content.")
    content_type: ContentType = Field("text/plain", description="How the content is encoded.")
    collection_id: str | None = Field(None, min_length=1, max_length=64,
        description="Collection to file the document in.")


class DocumentImport(DocumentUpload):
    source_uri: str = Field(..., min_length=1, max_length=2048,
                            description="Where the content was imported from (URL, path, system id).")


class DocumentProcess(ChunkSizes):
    id: str = Field(..., min_length=1, max_length=64, description="Document id.")


class DocumentAction(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Document id.")


class KnowledgeSearch(Params):
    query: str = Field(..., min_length=1, max_length=1000, description="What to look for, in plain words.")
    top_k: int = Field(5, ge=1, le=50, description="How many results to return.")
    collection_id: str | None = Field(None, min_length=1, max_length=64,
        description="Search only this collection.")
    document_ids: list[Id] | None = Field(None, max_length=100, description="Search only these documents.")


class ChunkContext(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Chunk id.")
    window: int = Field(1, ge=0, le=5, description="Neighbouring chunks to include on each side.")


class SimilarParams(Params):
    id: str = Field(..., min_length=1, max_length=64, description="Document to find relatives of.")
    top_k: int = Field(5, ge=1, le=50, description="How many similar documents to return.")
