"""The legacy SSE relays on their own, as two processes of a deployment would use them (two relays, one store):
a claim is seen by the other, a message of any size arrives whole and in order, and release leaves nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import redis

from prism.app import create_app
from prism.config import Settings
from prism.mcp_server.relay import Relay, StreamOwner
from prism.mcp_server.relay_postgres import CHUNK_BYTES, PostgresRelay, chunks
from prism.mcp_server.relay_redis import RedisRelay, channel, claim_key
from prism.storage import Database
from tests.factories import Factory
from tests.processes import free_port
from tests.test_limits_limiter import REDIS_URL, redis_available
from tests.test_mcp_protocol import PATH, rpc

OWNER = StreamOwner("tenant", "api_key", "key-1")
# Several NOTIFY payloads' worth, with characters of 2 and 3 bytes sitting on every possible chunk boundary.
LARGE = ('{"text":"' + "aé✓" * 30_000 + '"}').encode()


class Collected:
    """A sink that keeps what arrives, as the owning process's streams would write it."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.arrived = asyncio.Event()

    def deliver(self, stream_id: str, message: bytes) -> None:
        self.messages.append((stream_id, message))
        self.arrived.set()

    def lost(self, stream_id: str) -> None:
        raise AssertionError(f"stream {stream_id} lost")

    async def wait_for(self, count: int) -> list[bytes]:
        async with asyncio.timeout(10):
            while len(self.messages) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return [m for _, m in self.messages]


def test_chunks_fit_a_notify_payload_and_never_cut_a_character_in_two() -> None:
    pieces = chunks(LARGE)
    assert len(pieces) > 10 and all(len(p.encode()) <= CHUNK_BYTES for p in pieces)
    assert "".join(pieces).encode() == LARGE


@pytest.fixture(params=["postgres", "redis"])
async def relays(request: pytest.FixtureRequest, db: Database) -> AsyncIterator[tuple[Relay, Relay, Collected]]:
    """(the owner's relay, another process's relay, what reaches the owner)."""
    sink = Collected()
    owner: Relay
    other: Relay
    if request.param == "postgres":
        if db.is_sqlite:
            pytest.skip("the PostgreSQL relay needs the PostgreSQL run")
        owner, other = PostgresRelay(db, sink), PostgresRelay(db, Collected())
    else:
        if not redis_available():
            pytest.skip("no Redis on 127.0.0.1:6379")
        owner, other = RedisRelay(REDIS_URL, sink), RedisRelay(REDIS_URL, Collected())
    try:
        yield owner, other, sink
    finally:
        await owner.close()
        await other.close()


async def test_a_claimed_stream_gets_messages_of_any_size_from_another_process_in_order(
        relays: tuple[Relay, Relay, Collected]) -> None:
    owner, other, sink = relays
    stream_id = uuid.uuid4().hex + "abcdefgh"
    assert await other.owner(stream_id) is None
    await owner.claim(stream_id, OWNER)
    assert await other.owner(stream_id) == OWNER

    small = [f'{{"jsonrpc":"2.0","id":{i},"result":{{}}}}'.encode() for i in range(5)]
    for message in [small[0], LARGE, *small[1:], LARGE]:
        await other.publish(stream_id, message)
    assert await sink.wait_for(7) == [small[0], LARGE, *small[1:], LARGE]

    await owner.refresh()
    assert await other.owner(stream_id) == OWNER
    await owner.release(stream_id)
    assert await other.owner(stream_id) is None


async def test_closing_a_relay_drops_the_claims_of_the_streams_it_still_held(
        relays: tuple[Relay, Relay, Collected]) -> None:
    # The app's shutdown closes its streams without waiting for them, then the relay: the claims left must go with
    # it, or POSTs landing on another process are accepted (202) for a stream nobody holds until they expire.
    owner, other, _ = relays
    stream_id = uuid.uuid4().hex + "cccccccc"
    await owner.claim(stream_id, OWNER)
    assert await other.owner(stream_id) == OWNER
    await owner.close()
    assert await other.owner(stream_id) is None
    assert isinstance(owner, PostgresRelay | RedisRelay)
    assert not owner.listener.connected


async def test_releasing_the_last_stream_closes_what_listened_for_it(relays: tuple[Relay, Relay, Collected]) -> None:
    owner, _, _ = relays
    first, second = uuid.uuid4().hex + "00000000", uuid.uuid4().hex + "11111111"
    await owner.claim(first, OWNER)
    await owner.claim(second, OWNER)
    assert isinstance(owner, PostgresRelay | RedisRelay)
    assert owner.listener.listening() == {first, second} and owner.listener.connected
    await owner.release(first)
    assert owner.listener.listening() == {second} and owner.listener.connected
    await owner.release(second)
    assert owner.listener.listening() == set() and not owner.listener.connected
    if isinstance(owner, PostgresRelay):
        return
    await owner.claim(first, OWNER)
    await owner.claim(second, OWNER)
    with redis.Redis.from_url(REDIS_URL) as client:
        assert client.pubsub_numsub(channel(first), channel(second)) == [
            (channel(first).encode(), 1), (channel(second).encode(), 1)]
        await owner.release(first)
        await owner.release(second)
        for _ in range(50):  # Redis drops the subscriptions of a closed connection once it has read the close
            if client.pubsub_numsub(channel(first), channel(second)) == [
                    (channel(first).encode(), 0), (channel(second).encode(), 0)]:
                break
            await asyncio.sleep(0.1)
        assert client.pubsub_numsub(channel(first), channel(second)) == [
            (channel(first).encode(), 0), (channel(second).encode(), 0)]
        assert client.exists(claim_key(first), claim_key(second)) == 0


async def test_a_stream_that_cannot_be_shared_is_refused_with_503_in_the_json_rpc_shape(
        settings: Settings, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    # Limits fail open here, so that the request reaches the relay (closed, the edge refuses it first: docs/limits.md).
    unreachable = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0",
                                              "rate_limit_on_redis_failure": "open"})
    app = create_app(unreachable)
    headers = {"Authorization": f"Bearer {ws.keys['owner']}"}
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
        try:
            opened = await http.get(PATH, headers={**headers, "Accept": "text/event-stream"})
            posted = await http.post(f"{PATH}?session_id={'ab' * 20}", json=rpc("ping"),
                                     headers={**headers, "Content-Type": "application/json"})
        finally:
            await app.state.mcp_streams.aclose()
    for answer in (opened, posted):
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["data"]["error"] == "relay_unavailable"
        assert int(answer.headers["retry-after"]) > 0
