"""documents: collections, documents and their chunks; upload/import, processing, knowledge search.

Document states: uploaded → processed | failed (processing again is allowed), any → archived → restored
to uploaded (its chunks are dropped on archive, so archived text is never found by knowledge queries).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections import Counter
from typing import Any

from sqlalchemy import func, select

from prism.apps import shipped_examples
from prism.apps.crud import Entity, crud, repo
from prism.apps.documents.index import ChunkIndex, drop_chunks, index_text, move_chunks, store_chunks, term_key
from prism.apps.documents.models import Collection, Document, DocumentChunk, DocumentPosting
from prism.apps.documents.params import (
    ChunkContext,
    ChunkList,
    ChunkSizes,
    CollectionCreate,
    CollectionList,
    CollectionUpdate,
    DocumentAction,
    DocumentImport,
    DocumentList,
    DocumentProcess,
    DocumentUpdate,
    DocumentUpload,
    KnowledgeSearch,
    SimilarParams,
)
from prism.apps.documents.search import STOPWORDS, Scope, passages, rank, rank_documents
from prism.apps.documents.text import ExtractionError, extract_text, words
from prism.config import Settings
from prism.errors import Conflict
from prism.events.outbox import emit_for
from prism.kit.timeutil import iso, utcnow
from prism.registry import HandlerApp, HandlerCall
from prism.tenancy.repository import to_record

# How many of a document's terms `similar` looks up at once (an IN list of bound parameters).
TERM_BATCH = 500
MAX_TERM_BATCHES = 10  # the most frequent 5,000 words of a document are enough to say what it is about

app = HandlerApp("documents", description="Documents and knowledge: upload, extract, chunk, search.",
                 examples=shipped_examples())



async def _document(call: HandlerCall, document_id: str) -> Document:
    row: Document = await repo(call, Document, "document").get(document_id)
    return row


async def _prepare_document(call: HandlerCall, values: dict[str, Any], row: Document | None) -> dict[str, Any]:
    if values.get("collection_id") is not None:
        await repo(call, Collection, "collection").get(values["collection_id"])
    if "collection_id" in values and row is not None:  # moved to another collection, or out of any (null)
        await move_chunks(call.session, row.id, values["collection_id"])
    return values


async def _before_collection_delete(call: HandlerCall, collection: Collection) -> None:
    held = (await call.session.execute(repo(call, Document, "document").base().where(
        Document.collection_id == collection.id).limit(1))).first()
    if held:
        raise Conflict(f"collection {collection.name} still holds documents; move or delete them first")


crud(app, Entity(Collection, "collection", "document collections", CollectionList, search=("name", "description"),
                 orderable=("name", "created_at"), default_ordering="name", create=CollectionCreate,
                 update=CollectionUpdate, group_by=("name",), before_delete=_before_collection_delete,
                 keywords=("folder", "knowledge base", "library", "document set")))
crud(app, Entity(Document, "document", "documents", DocumentList, search=("title", "source_uri"),
                 orderable=("title", "created_at", "size_bytes", "updated_at"), default_ordering="-created_at",
                 update=DocumentUpdate, group_by=("status", "content_type", "source", "collection_id"),
                 sums=("size_bytes", "word_count", "chunk_count"), prepare=_prepare_document,
                 keywords=("file", "manual", "policy document", "knowledge", "handbook", "guide", "attachment")))
crud(app, Entity(DocumentChunk, "chunk", "document chunks", ChunkList, search=("text",),
                 orderable=("seq", "created_at", "token_count"), default_ordering="seq", deletable=False,
                 group_by=("document_id", "collection_id"), sums=("token_count",),
                 keywords=("passage", "excerpt", "text chunk", "snippet", "paragraph", "section")))


async def _process(call: HandlerCall, document: Document, indexed: ChunkIndex | ExtractionError) -> None:
    """Store the document's chunks (with their postings), made by `index_text`; a content that does not parse,
    or would index too much, marks the document failed."""
    await drop_chunks(call.session, document.id)
    if isinstance(indexed, ExtractionError):
        document.status, document.error, document.chunk_count, document.word_count = (
            "failed", str(indexed)[:1000], 0, 0)
    else:
        await store_chunks(call.session, organization_id=call.organization_id, document_id=document.id,
                           collection_id=document.collection_id, index=indexed)
        document.status, document.error = "processed", ""
        document.chunk_count, document.word_count = len(indexed.chunks), indexed.word_count
    document.processed_at = utcnow()
    await call.session.flush()
    await emit_for(call, "document.processed", {
        "document_id": document.id, "title": document.title, "status": document.status,
        "collection_id": document.collection_id, "chunk_count": document.chunk_count,
        "word_count": document.word_count, "error": document.error or None,
        "processed_at": iso(document.processed_at)})


def _indexed(content: str, content_type: str, sizes: ChunkSizes) -> ChunkIndex | ExtractionError:
    try:
        return index_text(content, content_type, chunk_words=sizes.chunk_words, overlap_words=sizes.overlap_words)
    except ExtractionError as exc:
        return exc


async def _index_upload(p: DocumentUpload, _settings: Settings) -> ChunkIndex | ExtractionError | None:
    """Handler.prepare of upload and import: the text indexed on a worker thread, before the transaction."""
    return await asyncio.to_thread(_indexed, p.content, p.content_type, p) if p.process else None


async def _store(call: HandlerCall, p: DocumentUpload, *, source: str, source_uri: str) -> dict[str, Any]:
    if p.collection_id:
        await repo(call, Collection, "collection").get(p.collection_id)
    raw = p.content.encode()
    document: Document = repo(call, Document, "document").add(
        title=p.title, content=p.content, content_type=p.content_type, collection_id=p.collection_id,
        source=source, source_uri=source_uri, size_bytes=len(raw), sha256=hashlib.sha256(raw).hexdigest())
    await call.session.flush()
    await emit_for(call, "document.uploaded", {
        "document_id": document.id, "title": document.title, "content_type": document.content_type,
        "source": source, "source_uri": source_uri or None, "size_bytes": document.size_bytes,
        "sha256": document.sha256, "collection_id": document.collection_id, "status": document.status})
    if call.prepared is not None:
        await _process(call, document, call.prepared)
    return _public(document)


def _public(document: Document) -> dict[str, Any]:
    record = to_record(document)
    record.pop("content")  # the text can be megabytes; read returns it, writes answer without it
    return record


@app.handler("document_op", "document", "upload", params=DocumentUpload, scope="execute",
             permission="documents.add_document", prepare=_index_upload,
             description="Upload a document's text (plain, Markdown, HTML, CSV or JSON); by default its text is "
                         "extracted and chunked at once. Emits document.uploaded (and document.processed).",
             keywords=("add document", "ingest", "store file", "knowledge base"))
async def upload_document(call: HandlerCall, p: DocumentUpload) -> dict[str, Any]:
    return await _store(call, p, source="upload", source_uri="")


@app.handler("document_op", "document", "import", params=DocumentImport, scope="execute",
             permission="documents.add_document", prepare=_index_upload,
             description="Import a document fetched from another system, recording where it came from. "
                         "Emits document.uploaded (and document.processed).",
             keywords=("ingest", "sync document", "import file"))
async def import_document(call: HandlerCall, p: DocumentImport) -> dict[str, Any]:
    return await _store(call, p, source="import", source_uri=p.source_uri)


@app.handler("document_op", "document", "process", params=DocumentProcess, scope="execute",
             permission="documents.change_document",
             description="Extract a document's text and cut it into overlapping chunks for knowledge search "
                         "(again, with other sizes, if already processed). Emits document.processed.",
             keywords=("extract text", "chunk", "index document", "reprocess"))
async def process_document(call: HandlerCall, p: DocumentProcess) -> dict[str, Any]:
    document = await _document(call, p.id)
    if document.status == "archived":
        raise Conflict("document is archived; restore it first", code="invalid_transition")
    # The content is read here, in the transaction: indexed on a thread all the same, to free the event loop.
    await _process(call, document, await asyncio.to_thread(_indexed, document.content, document.content_type, p))
    return _public(document)


@app.handler("document_op", "document", "archive", params=DocumentAction, scope="execute",
             permission="documents.change_document",
             description="Archive a document: it stays stored but its chunks are removed from knowledge search.",
             keywords=("retire document", "hide from search"))
async def archive_document(call: HandlerCall, p: DocumentAction) -> dict[str, Any]:
    document = await _document(call, p.id)
    if document.status == "archived":
        raise Conflict("document is already archived", code="invalid_transition")
    await drop_chunks(call.session, document.id)
    document.status, document.chunk_count = "archived", 0
    await call.session.flush()
    return _public(document)


@app.handler("document_op", "document", "restore", params=DocumentAction, scope="execute",
             permission="documents.change_document",
             description="Restore an archived document (state uploaded; process it to search it again).",
             keywords=("unarchive",))
async def restore_document(call: HandlerCall, p: DocumentAction) -> dict[str, Any]:
    document = await _document(call, p.id)
    if document.status != "archived":
        raise Conflict(f"document is {document.status}, not archived", code="invalid_transition")
    document.status = "uploaded"
    await call.session.flush()
    return _public(document)


def _scope(p: KnowledgeSearch) -> Scope:
    return Scope(collection_id=p.collection_id, document_ids=p.document_ids)


async def _titles(call: HandlerCall, ids: set[str]) -> dict[str, str]:
    rows = (await call.session.execute(select(Document.id, Document.title).where(
        Document.id.in_(ids)))).all()
    return {i: t for i, t in rows}


@app.handler("knowledge_query", "chunk", "search", params=KnowledgeSearch, scope="read",
             permission="documents.view_chunk",
             description="Search the knowledge base: the document passages that best match a question, ranked "
                         "by BM25, with their document and score.",
                         keywords=("ask", "find passage", "rag", "lookup", "question answering"))
async def search_chunks(call: HandlerCall, p: KnowledgeSearch) -> dict[str, Any]:
    found = await passages(call.session, await rank(call.session, p.query, _scope(p), top_k=p.top_k))
    titles = await _titles(call, {h.document_id for h, _ in found})
    return {"query": p.query, "results": [
        {"chunk_id": c.id, "document_id": c.document_id, "document_title": titles.get(c.document_id, ""),
         "seq": c.seq, "score": round(h.score, 6), "matched_terms": list(h.matched), "text": c.text}
        for h, c in found]}


@app.handler("knowledge_query", "document", "search", params=KnowledgeSearch, scope="read",
             permission="documents.view_document",
             description="Find the documents most relevant to a question: documents ranked by their best "
                         "matching passage.", keywords=("which document", "find manual", "relevant files"))
async def search_documents(call: HandlerCall, p: KnowledgeSearch) -> dict[str, Any]:
    ranked = await rank_documents(call.session, p.query, _scope(p), top_k=p.top_k)
    matching = {d.best.document_id: d.matching_chunks for d in ranked}
    found = await passages(call.session, [d.best for d in ranked])
    titles = await _titles(call, {h.document_id for h, _ in found})
    return {"query": p.query, "results": [
        {"document_id": h.document_id, "score": round(h.score, 6), "best_chunk_id": c.id, "snippet": c.text[:300],
         "matching_chunks": matching[h.document_id], "title": titles.get(h.document_id, "")} for h, c in found]}


@app.handler("knowledge_query", "chunk", "context", params=ChunkContext, scope="read",
             permission="documents.view_chunk",
             description="A passage with its neighbouring chunks, to read a search hit in context.",
             keywords=("surrounding text", "expand passage"))
async def chunk_context(call: HandlerCall, p: ChunkContext) -> dict[str, Any]:
    chunk: DocumentChunk = await repo(call, DocumentChunk, "chunk").get(p.id)
    rows = (await call.session.execute(repo(call, DocumentChunk, "chunk").base().where(
        DocumentChunk.document_id == chunk.document_id, DocumentChunk.seq.between(chunk.seq - p.window,
                                                                                  chunk.seq + p.window))
        .order_by(DocumentChunk.seq))).scalars().all()
    return {"document_id": chunk.document_id, "chunk_id": chunk.id,
            "chunks": [{"chunk_id": r.id, "seq": r.seq, "text": r.text} for r in rows]}


@app.handler("knowledge_query", "document", "similar", params=SimilarParams, scope="read",
             permission="documents.view_document",
             description="Documents on the same subject as a given one: its most characteristic terms are searched "
                         "(BM25) in the other documents' passages.", keywords=("related documents", "more like this"))
async def similar_documents(call: HandlerCall, p: SimilarParams) -> dict[str, Any]:
    document = await _document(call, p.id)
    try:  # CPU work on up to a megabyte of text: on a thread, the event loop serves other calls meanwhile
        own = await asyncio.to_thread(_own_words, document.content, document.content_type)
    except ExtractionError as exc:  # a failed document: there are no terms to look for
        raise Conflict(f"document {document.id} has no text to compare: {exc}",
                       details={"status": document.status}) from None
    terms = await _characteristic_terms(call, document.id, own)
    ranked = [(d.best.document_id, d.best.score) for d in await rank_documents(
        call.session, " ".join(terms), Scope(excluded_document_id=document.id), top_k=p.top_k)]
    titles = await _titles(call, {doc_id for doc_id, _ in ranked})
    return {"document_id": document.id, "terms": terms, "results": [
        {"document_id": doc_id, "title": titles.get(doc_id, ""), "score": round(score, 6)} for doc_id, score in ranked]}


def _own_words(content: str, content_type: str) -> Counter[str]:
    """How often the document uses each word that may say what it is about."""
    return Counter(w for w in words(extract_text(content, content_type))
                   if len(w) > 2 and w not in STOPWORDS and not w.isdigit())


async def _characteristic_terms(call: HandlerCall, document_id: str, own: Counter[str]) -> list[str]:
    """The twelve terms of `own` (a document's word counts) that are frequent in it (tf) and not spread over every
    other document (idf), so that words all documents share do not drive the match while the subject's own do.

    Other documents are those with chunks; a term's spread is how many of them hold it (their postings rows).
    Terms are looked up most frequent first, in batches, and the lookups stop once no term left can beat the
    twelfth weight (a term's weight is at most its weight in no other document; one that could only tie it is
    not looked up), and after MAX_TERM_BATCHES in any case: a document of a hundred thousand words each said once
    would otherwise be looked up whole, in the transaction the calls of its ledger batch share.
    """
    others = int((await call.session.execute(select(func.count(func.distinct(DocumentChunk.document_id))).where(
        DocumentChunk.document_id != document_id))).scalar_one())
    def weight(w: str, spread: int) -> float:
        return own[w] * math.log(1 + (others + 1) / (spread + 1))

    weights: dict[str, float] = {}
    candidates = sorted(own, key=lambda w: (-own[w], w))
    for start in range(0, min(len(candidates), MAX_TERM_BATCHES * TERM_BATCH), TERM_BATCH):
        if len(weights) >= 12:
            twelfth = sorted(weights.values(), reverse=True)[11]
            if weight(candidates[start], 0) <= twelfth:
                break
        batch = candidates[start:start + TERM_BATCH]
        keys = {term_key(w): w for w in batch}
        spread = dict.fromkeys(batch, 0)
        for key, count in await call.session.execute(select(DocumentPosting.term, func.count()).where(
                DocumentPosting.term.in_(list(keys)), DocumentPosting.document_id != document_id)
                .group_by(DocumentPosting.term)):
            spread[keys[key]] = int(count)
        weights.update((w, weight(w, spread[w])) for w in batch)
    return sorted(weights, key=lambda w: (-weights[w], w))[:12]
