"""A refresh of the legacy SSE claims against a stream that closes while it runs: the closed stream's claim must
never come back (POSTs to it would be accepted, 202, and their answers lost until the claim expired, instead of
the 404 a closed stream answers). Each interleaving is forced by running the close at a chosen step of the
refresh, on both shared relays, against the real store; a claim that lapsed while its stream stayed open is
still recorded again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis
from sqlalchemy import delete

from prism.config import Settings
from prism.mcp_server import legacy_sse
from prism.mcp_server.models import LegacyStreamClaim
from prism.mcp_server.relay import InProcessRelay, Relay, StreamOwner
from prism.mcp_server.relay_postgres import PostgresRelay
from prism.mcp_server.relay_redis import PREFIX, RedisRelay, claim_key
from prism.storage import Database
from tests.test_limits_limiter import redis_available
from tests.test_mcp_relay import Collected

OWNER = StreamOwner("tenant", "api_key", "key-1")
# A database of these tests' own, so that what they leave behind (nothing, when they pass) is theirs to remove.
REDIS_URL = "redis://127.0.0.1:6379/13"

Step = Callable[[], Awaitable[None]]


class Interleaving:
    """Steps of a test to run when the relay reaches a point of its refresh: `extend` (the open streams read, the
    claims not yet extended), `restore` (the lapsed claims known, not yet recorded again) and `record` (about to
    write claims)."""

    def __init__(self) -> None:
        self.steps: dict[str, Step] = {}

    async def reach(self, point: str) -> None:
        step = self.steps.pop(point, None)
        if step is not None:
            await step()


class InterleavedRefresh:
    """The refresh steps of a shared relay, each reaching its point of the `interleaving` first."""

    interleaving: Interleaving

    async def _extend(self, stream_ids: list[str]) -> list[str]:
        await self.interleaving.reach("extend")
        return await super()._extend(stream_ids)

    async def _restore(self, lapsed: list[str]) -> None:
        await self.interleaving.reach("restore")
        await super()._restore(lapsed)

    async def _record(self, owners: dict[str, StreamOwner]) -> None:
        await self.interleaving.reach("record")
        await super()._record(owners)


class InterleavedRedisRelay(InterleavedRefresh, RedisRelay):
    def __init__(self, url: str) -> None:
        super().__init__(url, Collected())
        self.interleaving = Interleaving()


class InterleavedPostgresRelay(InterleavedRefresh, PostgresRelay):
    def __init__(self, db: Database) -> None:
        super().__init__(db, Collected())
        self.interleaving = Interleaving()


Interleaved = InterleavedRedisRelay | InterleavedPostgresRelay


@pytest.fixture(params=["postgres", "redis"])
async def relays(request: pytest.FixtureRequest, db: Database) -> AsyncIterator[tuple[Interleaved, Relay]]:
    """(the owner's relay, another process's relay)."""
    owner: Interleaved
    other: Relay
    if request.param == "postgres":
        if db.is_sqlite:
            pytest.skip("the PostgreSQL relay needs the PostgreSQL run")
        owner, other = InterleavedPostgresRelay(db), PostgresRelay(db, Collected())
    else:
        if not redis_available():
            pytest.skip("no Redis on 127.0.0.1:6379")
        owner, other = InterleavedRedisRelay(REDIS_URL), RedisRelay(REDIS_URL, Collected())
    try:
        yield owner, other
    finally:
        await owner.close()
        await other.close()
        if request.param == "redis":
            with redis.Redis.from_url(REDIS_URL) as client:
                leftovers = list(client.scan_iter(f"{PREFIX}*"))
                if leftovers:
                    client.delete(*leftovers)


async def lapse(relay: Interleaved, db: Database, stream_id: str) -> None:
    """Leave the stream's claim as its expiry does (the store was out of reach longer than a claim lasts)."""
    if isinstance(relay, InterleavedPostgresRelay):
        async with db.write() as session:
            await session.execute(delete(LegacyStreamClaim).where(LegacyStreamClaim.id == stream_id))
    else:
        with redis.Redis.from_url(REDIS_URL) as client:
            client.delete(claim_key(stream_id))


def new_stream_id() -> str:
    return uuid.uuid4().hex + "0123abcd"


async def test_a_stream_closed_after_the_refresh_read_the_open_streams_stays_closed(
        relays: tuple[Interleaved, Relay]) -> None:
    owner, other = relays
    closing, staying = new_stream_id(), new_stream_id()
    await owner.claim(closing, OWNER)
    await owner.claim(staying, OWNER)

    async def close() -> None:
        await owner.release(closing)

    owner.interleaving.steps["extend"] = close
    await owner.refresh()
    assert "extend" not in owner.interleaving.steps  # the close did run between the read and the write
    assert await other.owner(closing) is None
    assert await other.owner(staying) == OWNER


async def test_a_stream_closed_before_its_lapsed_claim_is_recorded_again_stays_closed(
        relays: tuple[Interleaved, Relay], db: Database) -> None:
    owner, other = relays
    stream_id = new_stream_id()
    await owner.claim(stream_id, OWNER)
    await lapse(owner, db, stream_id)

    async def close() -> None:
        await owner.release(stream_id)

    owner.interleaving.steps["restore"] = close
    await owner.refresh()
    assert "restore" not in owner.interleaving.steps
    assert await other.owner(stream_id) is None


async def test_a_stream_closing_while_its_lapsed_claim_is_recorded_again_ends_unclaimed(
        relays: tuple[Interleaved, Relay], db: Database) -> None:
    """The close starts once the refresh decided the stream is open, and waits for the claim's write to end
    before dropping it: the other order would leave the claim written back after its stream closed."""
    owner, other = relays
    stream_id = new_stream_id()
    await owner.claim(stream_id, OWNER)
    await lapse(owner, db, stream_id)
    closing: list[asyncio.Task[None]] = []

    async def close_meanwhile() -> None:
        closing.append(asyncio.create_task(owner.release(stream_id)))
        done, _ = await asyncio.wait(closing, timeout=0.3)
        assert not done, "the claim was dropped while the refresh was about to write it"

    owner.interleaving.steps["record"] = close_meanwhile
    await owner.refresh()
    await asyncio.wait_for(closing[0], 5)
    assert await other.owner(stream_id) is None


async def test_a_claim_that_lapsed_while_its_stream_stayed_open_is_recorded_again(
        relays: tuple[Interleaved, Relay], db: Database) -> None:
    owner, other = relays
    lapsed, kept = new_stream_id(), new_stream_id()
    await owner.claim(lapsed, OWNER)
    await owner.claim(kept, OWNER)
    await lapse(owner, db, lapsed)
    assert await other.owner(lapsed) is None
    await owner.refresh()
    assert await other.owner(lapsed) == OWNER
    assert await other.owner(kept) == OWNER
    await owner.release(lapsed)
    await owner.release(kept)
    assert await other.owner(lapsed) is None and await other.owner(kept) is None


class FailingOnceRelay(InProcessRelay):
    """A relay whose first refresh fails in a way nobody foresaw (not RelayUnavailable)."""

    shared = True

    def __init__(self) -> None:
        self.refreshes = 0

    async def refresh(self) -> None:
        self.refreshes += 1
        if self.refreshes == 1:
            raise RuntimeError("a refresh that failed for a reason of its own")


async def test_a_refresh_that_fails_unexpectedly_does_not_end_the_refreshing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Nothing restarts the refresh task: had one failed round ended it, every open stream's claim would lapse
    after STREAM_TTL_SECONDS and its POSTs be refused as if it had closed."""
    monkeypatch.setattr(legacy_sse, "REFRESH_SECONDS", 0.001)
    db = Database(f"sqlite:///{tmp_path / 'relay.db'}")
    streams = legacy_sse.LegacyStreams(Settings(database_url=db.url), db)
    relay = streams.relay = FailingOnceRelay()
    refresher = asyncio.create_task(streams._refresh_forever())
    try:
        for _ in range(1000):
            await asyncio.sleep(0.001)
            if relay.refreshes >= 3:
                break
        assert not refresher.done(), "the first failure ended the refreshing"
        assert relay.refreshes >= 3
    finally:
        refresher.cancel()
        await db.dispose()
