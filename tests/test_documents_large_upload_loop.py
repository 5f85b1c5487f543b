"""A large document does not hold the event loop while it is written or removed: its chunks and postings (one row
per distinct word) are written in slices with the loop served between them, and on SQLite a write estimated past the
loop's budget, the commit of a transaction that changed many rows, the deletion of a document's postings and a
record's deletion with what the database deletes with it run on a waiting thread (docs/architecture.md, "SQLite
statements run on the event loop"). Meanwhile the process's other requests stay prompt: health and readiness checks
(the latter reads the database), and the loop's own timers.

A governed call of another organization is answered with the batch after the large one's: every dispatch appends to
the audit ledger, whose batch holds the database's one writer for as long as the document's rows take to write.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import string
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from prism.storage import sqlite_driver
from tests.domain_support import Caller
from tests.factories import Factory, Workspace

# An upload of this many distinct words held the loop 0.3-0.6 s (one executemany of 20,000 postings rows, the
# rows' conversion before it and the commit after it, all on the loop); archiving it, about 50 ms more.
DISTINCT_WORDS = 20_000
TICK_SECONDS = 0.005
# What the loop's thread may spend between two ticks (its CPU time, which the machine's other jobs do not inflate, as
# they do its wall time at a load of 7 on 2 cores): far above a slice's few milliseconds on the loop, far below the
# upload's stall.
PROMPT_SECONDS = 0.1
# What a request may take, in wall time: its own work (a readiness check reads the database twice: 10-20 ms in this
# test's app), and waits for the loop's other work and for the CPU, which a loaded 2-core machine shares with other
# jobs (over 100 ms at once there). Well below the upload's whole stall on the loop, which took a second or more
# under such load.
ANSWER_SECONDS = 0.5


def distinct_words(count: int) -> list[str]:
    """`count` different words of letters only (one token each for the tokenizer)."""
    return ["".join(letters) for letters in itertools.islice(itertools.product(string.ascii_lowercase, repeat=4),
                                                             count)]


async def while_others_ask(client: httpx.AsyncClient, other: Workspace, call: Callable[[], Awaitable[Any]]) -> Any:
    """`call`'s answer, once checked that while it ran the loop was never held long, and the health and readiness
    checks and `other`'s governed reads sent meanwhile were answered promptly (a read that waited for the call's
    ledger batch, right after it)."""
    lags: list[float] = []
    checks: list[float] = []
    reads: list[tuple[float, float]] = []  # (sent, answered)
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            before = time.thread_time()  # the loop's thread: what it ran between the ticks
            await asyncio.sleep(TICK_SECONDS)
            lags.append(time.thread_time() - before)

    async def health_checks() -> None:
        while not done.is_set():
            for path in ("/healthz", "/readyz"):
                before = time.monotonic()
                answer = await client.get(path)
                checks.append(time.monotonic() - before)
                assert answer.status_code == 200, answer.text
            await asyncio.sleep(TICK_SECONDS)

    async def governed_reads() -> None:
        while not done.is_set():
            sent = time.monotonic()
            listed = await client.post("/api/mcp/tools/prism_entity_crud/", headers=other.headers(), json={
                "app": "documents", "entity": "document", "operation": "list", "arguments": {}})
            reads.append((sent, time.monotonic()))
            assert listed.status_code == 200, listed.text
            await asyncio.sleep(TICK_SECONDS)

    # As `prism serve` does once started (prism.kit.collector): what the process built so far is frozen out of the
    # garbage collector's reach. Here that is the whole test session's heap, which a full collection, set off by
    # the upload's allocations, walked for 0.1-0.3 s at once: a stall of its own, which a server does not have.
    gc.freeze()
    try:
        others = [asyncio.create_task(asking()) for asking in (tick, health_checks, governed_reads)]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        try:
            answer = await call()
        finally:
            answered = time.monotonic()
            done.set()
            await asyncio.gather(*others)
    finally:
        gc.unfreeze()
    took = answered - started
    assert max(lags) < PROMPT_SECONDS, (
        f"the loop's thread ran {max(lags) * 1000:.0f} ms between two ticks in {took * 1000:.0f} ms")
    assert checks and max(checks) < ANSWER_SECONDS, (
        f"a health or readiness check took up to {max(checks) * 1000:.0f} ms during {took * 1000:.0f} ms")
    late = [(sent - started, end - started) for sent, end in reads
            if end - sent >= ANSWER_SECONDS and end - answered >= ANSWER_SECONDS]
    assert reads and not late, f"another organization's reads (sent, answered, s after the call began): {late}"
    return answer


async def test_a_twenty_thousand_word_document_uploaded_archived_and_deleted_leaves_the_event_loop_free(
        client: httpx.AsyncClient, factory: Factory) -> None:
    owner = Caller(client, await factory.workspace(roles=("owner",)))
    other = await factory.workspace(roles=("owner",))  # another organization, reading meanwhile
    words = distinct_words(DISTINCT_WORDS)

    document = await while_others_ask(client, other, lambda: owner.ok(
        "document_op", "documents", "document", "upload", {"title": "Glossary", "content": " ".join(words)}))
    assert document["status"] == "processed" and document["word_count"] == DISTINCT_WORDS, document
    hits = await owner.ok("knowledge_query", "documents", "chunk", "search", {"query": words[-1]})
    assert hits["results"], hits  # the last posting written is there: every slice was

    archived = await while_others_ask(client, other, lambda: owner.ok(
        "document_op", "documents", "document", "archive", {"id": document["id"]}))
    assert archived["status"] == "archived", archived
    hits = await owner.ok("knowledge_query", "documents", "chunk", "search", {"query": words[-1]})
    assert not hits["results"], hits

    # Deleted as a record, its chunks and postings go with it (ON DELETE CASCADE): 20,000 rows no parameter tells.
    again = await owner.ok("document_op", "documents", "document", "upload",
                           {"title": "Glossary, again", "content": " ".join(words)})
    deleted = await while_others_ask(client, other, lambda: owner.ok(
        "entity_crud", "documents", "document", "delete", {"id": again["id"]}))
    assert deleted == {"id": again["id"], "deleted": True}
    hits = await owner.ok("knowledge_query", "documents", "chunk", "search", {"query": words[-1]})
    assert not hits["results"], hits


async def test_a_record_and_what_the_database_deletes_with_it_are_deleted_off_the_event_loop_on_sqlite(
        client: httpx.AsyncClient, factory: Factory, database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record's DELETE binds its id alone, and the database deletes what references it (a document's chunks and
    postings, ON DELETE CASCADE): the driver cannot tell how many rows that is, so every record deletion runs on a
    waiting thread on SQLite, whatever the handler that deletes it."""
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's driver runs statements on the event loop; PostgreSQL's wait on the network")
    owner = Caller(client, await factory.workspace(roles=("owner",)))
    document = await owner.ok("document_op", "documents", "document", "upload",
                              {"title": "Glossary", "content": " ".join(distinct_words(200))})
    on_thread: list[str] = []
    real = sqlite_driver.on_waiting_thread

    async def noted(fn: Any) -> Any:
        on_thread.append(repr(fn))
        return await real(fn)

    monkeypatch.setattr(sqlite_driver, "on_waiting_thread", noted)
    await owner.ok("entity_crud", "documents", "document", "delete", {"id": document["id"]})
    assert any("DELETE FROM documents_documents" in call for call in on_thread), on_thread
