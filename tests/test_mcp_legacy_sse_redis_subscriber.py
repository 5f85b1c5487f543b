"""Legacy SSE streams relayed through Redis by real `prism serve` processes: all the streams of one process share ONE
Redis connection (named `prism-mcp-sse-<host>-<pid>`, so CLIENT LIST tells it apart), answers still reach the
right stream from the other process, and when that connection is killed every stream it served ends, its POSTs
answer 404 on every process (never 202 and lost), and the next stream is served on a new connection.

A process's Redis connections are found by their addresses (the process's own sockets, read from /proc), not by
the name Prism gives them, so that what is counted is what the process holds."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from prism.mcp_server.relay_redis import channel, claim_key
from tests.factories import Factory
from tests.live_prism import GENEROUS_LIMITS
from tests.processes import TRACEBACK, Server, ServerPool, clean_env
from tests.test_limits_limiter import REDIS_URL, redis_available
from tests.test_mcp_legacy_sse_processes import _eventually, _next_event, _post
from tests.test_mcp_protocol import PATH, rpc

STREAMS = 6


@dataclass
class Nodes:
    owner: Server  # one process, which holds the streams
    other: Server  # one process, which takes their POSTs

    @property
    def listener_name(self) -> str:
        return f"prism-mcp-sse-{socket.gethostname()}-{self.owner.proc.pid}"


@pytest.fixture(scope="module")
def nodes(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    if not redis_available():
        pytest.skip("no Redis on 127.0.0.1:6379")
    if not Path("/proc/self/net/tcp").exists():
        pytest.skip("finding a process's connections reads /proc (Linux)")
    pool = ServerPool(tmp_path_factory.mktemp("legacy-sse-redis-subscriber"))
    env = clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false", PRISM_CREDENTIAL_CACHE_SECONDS="0",
                    PRISM_MCP_SSE_KEEPALIVE_SECONDS="0.5", PRISM_WEBHOOK_WORKER_IN_PROCESS="false",
                    PRISM_REDIS_URL=REDIS_URL, **GENEROUS_LIMITS)
    try:
        yield Nodes(pool.start("--workers", "1", env=env), pool.start("--workers", "1", env=env))
    finally:
        pool.stop_all()


def listeners(name: str) -> list[dict[str, Any]]:
    """The Redis connections of that name (the process's listening connection, when it holds one)."""
    with redis.Redis.from_url(REDIS_URL) as client:
        return [c for c in client.client_list() if c["name"] == name]


def local_addresses(pid: int) -> set[str]:
    """`127.0.0.1:<port>` of each IPv4 TCP socket the process holds (CLIENT LIST's `addr` of its connections)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with_target = os.readlink(fd) if fd.is_symlink() else ""
        if with_target.startswith("socket:["):
            inodes.add(with_target[len("socket:["):-1])
    addresses = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            host, port = fields[1].split(":")
            ip = ".".join(str(int(host[i:i + 2], 16)) for i in (6, 4, 2, 0))
            addresses.add(f"{ip}:{int(port, 16)}")
    return addresses


def subscribed_connections(pid: int) -> list[dict[str, Any]]:
    """The process's Redis connections subscribed to at least one channel."""
    mine = local_addresses(pid)
    with redis.Redis.from_url(REDIS_URL) as client:
        return [c for c in client.client_list() if c["addr"] in mine and int(c["sub"]) > 0]


def claims_and_subscribers(stream_id: str) -> int:
    with redis.Redis.from_url(REDIS_URL) as client:
        [(_, subscribers)] = client.pubsub_numsub(channel(stream_id))
        return int(client.exists(claim_key(stream_id))) + int(subscribers)


@dataclass
class OpenStream:
    endpoint: str
    lines: AsyncIterator[str]

    @property
    def id(self) -> str:
        return self.endpoint.split("session_id=")[1]


async def open_streams(http: httpx.AsyncClient, stack: AsyncExitStack, node: Server, key: str,
                       count: int) -> list[OpenStream]:
    opened = []
    for _ in range(count):
        response = await stack.enter_async_context(http.stream("GET", node.base_url + PATH, headers={
            "Authorization": f"Bearer {key}", "Accept": "text/event-stream"}))
        lines = response.aiter_lines()
        announced = await _next_event(lines)
        assert announced[0] == "event: endpoint"
        opened.append(OpenStream(announced[1].removeprefix("data: "), lines))
    return opened


async def ended(lines: AsyncIterator[str]) -> bool:
    """Whether the stream ends within a few seconds (keep-alives and nothing else until then)."""
    async with asyncio.timeout(10):
        async for line in lines:
            assert not line.startswith("event: message"), line
    return True


async def test_the_streams_of_a_process_share_one_redis_connection_and_answers_reach_each_from_another_process(
        nodes: Nodes, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    key = ws.keys["owner"]
    async with httpx.AsyncClient(timeout=30) as http, AsyncExitStack() as stack:
        streams = await open_streams(http, stack, nodes.owner, key, STREAMS)
        [listener] = subscribed_connections(nodes.owner.proc.pid)
        assert int(listener["sub"]) == STREAMS and listener["name"] == nodes.listener_name
        # Each answer reaches its own stream, in whichever order they are posted.
        for i, stream in reversed(list(enumerate(streams))):
            accepted = await _post(http, nodes.other, stream.endpoint, key, rpc("ping", request_id=i))
            assert accepted.status_code == 202, accepted.text
        for i, stream in enumerate(streams):
            assert await _next_event(stream.lines) == [
                "event: message", f'data: {{"jsonrpc":"2.0","id":{i},"result":{{}}}}']
        assert [c["id"] for c in listeners(nodes.listener_name)] == [listener["id"]]
    # The last stream gone, so is the connection.
    await _eventually(lambda: asyncio.to_thread(lambda: len(listeners(nodes.listener_name))), 0)
    assert TRACEBACK not in nodes.owner.stderr + nodes.other.stderr


async def test_killing_the_shared_connection_ends_its_streams_and_the_next_stream_is_served(
        nodes: Nodes, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    key = ws.keys["owner"]
    async with httpx.AsyncClient(timeout=30) as http, AsyncExitStack() as stack:
        streams = await open_streams(http, stack, nodes.owner, key, 3)
        subscribed = subscribed_connections(nodes.owner.proc.pid)
        assert subscribed != []
        with redis.Redis.from_url(REDIS_URL) as client:
            for connection in subscribed:
                assert client.client_kill_filter(_id=connection["id"]) == 1
            for stream in streams:
                assert await ended(stream.lines)
        # Nothing of them is left: no claim (dropped as the stream ends, in a round trip of its own), no subscription.
        for stream_id in [stream.id for stream in streams]:
            await _eventually(lambda stream_id=stream_id: asyncio.to_thread(claims_and_subscribers, stream_id), 0)
        for stream in streams:
            for node in (nodes.other, nodes.owner):
                gone = await _post(http, node, stream.endpoint, key, rpc("ping"))
                assert gone.status_code == 404, gone.text
                assert gone.json()["error"]["data"]["error"] == "session_not_found"

        # The client reconnects: its new stream gets a new connection and its answers.
        [fresh] = await open_streams(http, stack, nodes.owner, key, 1)
        [reconnected] = subscribed_connections(nodes.owner.proc.pid)
        assert reconnected["id"] not in {connection["id"] for connection in subscribed}
        assert reconnected["name"] == nodes.listener_name
        accepted = await _post(http, nodes.other, fresh.endpoint, key, rpc("ping", request_id=7))
        assert accepted.status_code == 202, accepted.text
        assert await _next_event(fresh.lines) == ["event: message", 'data: {"jsonrpc":"2.0","id":7,"result":{}}']
    assert TRACEBACK not in nodes.owner.stderr + nodes.other.stderr
