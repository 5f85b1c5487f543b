"""Legacy SSE clients against a deployment of several real `prism serve` processes: a stream opened on one
process takes POSTs landing on any process (another worker, another node), relayed through PostgreSQL
LISTEN/NOTIFY or through Redis pub/sub, and only from the credential that opened it.

A deployment here is node A (`prism serve --workers 2`; one worker on SQLite, which serves from one process)
and node B (`prism serve`), both on the session's database. The official SDK's SSE client talks to it through a
load balancer in its transport: the stream's GET goes to node A, each POST to the next node in turn, every
request on a new connection (so node A's workers take turns as the kernel hands them connections).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import httpx2
import pytest
import redis
from mcp import Client
from mcp.client.sse import sse_client

from prism.mcp_server.relay_redis import channel, claim_key
from tests.factories import Factory
from tests.live_prism import GENEROUS_LIMITS
from tests.processes import TRACEBACK, Server, ServerPool, clean_env, postgres_test_url, query
from tests.test_limits_limiter import REDIS_URL, redis_available
from tests.test_mcp_protocol import PATH, rpc

CALLS = 20
# The listening connections of the deployment's processes, by the name each gives its own (their last statement may
# be a ping rather than a LISTEN).
POSTGRES_LISTENERS = ("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
                      "AND application_name LIKE 'prism-mcp-sse-%'")


@dataclass
class Deployment:
    relay: str
    database_url: str
    nodes: list[Server]

    @property
    def entry(self) -> str:
        return self.nodes[0].base_url + PATH

    def tracebacks(self) -> list[str]:
        return [node.stderr for node in self.nodes if TRACEBACK in node.stderr]


@pytest.fixture(scope="module", params=["postgres", "redis"])
def deployment(request: pytest.FixtureRequest, database_url: str,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    on_postgres = postgres_test_url() is not None
    if request.param == "postgres" and not on_postgres:
        pytest.skip("the PostgreSQL relay needs PRISM_TEST_DATABASE_URL naming a PostgreSQL server")
    if request.param == "redis" and not redis_available():
        pytest.skip("no Redis on 127.0.0.1:6379")
    settings = {"PRISM_DATABASE_URL": database_url, "PRISM_SEED_DEMO": "false", "PRISM_CREDENTIAL_CACHE_SECONDS": "0",
                "PRISM_MCP_SSE_KEEPALIVE_SECONDS": "0.5", "PRISM_WEBHOOK_WORKER_IN_PROCESS": "false",
                **GENEROUS_LIMITS}
    if request.param == "redis":
        settings["PRISM_REDIS_URL"] = REDIS_URL
    else:  # node A's two workers count on their own; the limits are raised out of the way anyway
        settings["PRISM_RATE_LIMIT_PER_PROCESS"] = "true"
    log_dir = tmp_path_factory.mktemp(f"legacy-sse-{request.param}")
    pool = ServerPool(log_dir)
    env = clean_env(**settings)
    try:
        # Same working directory: every process reads the deployment's master secret from the same file.
        node_a = pool.start("--workers", "2" if on_postgres else "1", env=env)
        yield Deployment(request.param, database_url, [node_a, pool.start(env=env)])
    finally:
        pool.stop_all()


class LoadBalancer(httpx2.AsyncBaseTransport):
    """The stream's GET to the first node, each POST to the next node in turn, each on a new connection."""

    def __init__(self, ports: list[int]) -> None:
        self._connections = httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_keepalive_connections=0))
        self._ports = itertools.cycle(ports)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            request.url = request.url.copy_with(port=next(self._ports))
        return await self._connections.handle_async_request(request)

    async def aclose(self) -> None:
        await self._connections.aclose()


@asynccontextmanager
async def sdk_client(deployment: Deployment, key: str) -> AsyncIterator[Client]:
    ports = [node.port for node in deployment.nodes]

    def behind_the_load_balancer(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                                 auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=LoadBalancer(ports))

    transport = sse_client(deployment.entry, headers={"Authorization": f"Bearer {key}"},
                           httpx_client_factory=behind_the_load_balancer)
    async with Client(transport, mode="legacy") as client:
        yield client


def text_of(result: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(result.content[0].text)
    return value


async def every_tool(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            return tools


async def test_the_sdk_sse_client_makes_twenty_calls_in_a_row_whichever_process_each_post_lands_on(
        deployment: Deployment, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    async with asyncio.timeout(120), sdk_client(deployment, ws.keys["owner"]) as client:
        # Pages of tools are far larger than a NOTIFY payload (8000 bytes): listed twice, so that one of the
        # two listings' first page is answered by the node that does not hold the stream.
        first, second = await every_tool(client), await every_tool(client)
        assert [t.name for t in first] == [t.name for t in second] and "prism_entity_crud" in {t.name for t in first}
        assert len(json.dumps([t.model_dump(mode="json") for t in first[:50]])) > 8000
        for i in range(CALLS):
            created = await client.call_tool("prism_entity_crud", {
                "app": "spare_parts", "entity": "spare_part", "operation": "create",
                "arguments": {"sku": f"SSE-{i:02}", "name": f"relayed part {i} ✓"}})
            assert created.is_error is False, created
            assert text_of(created)["data"]["sku"] == f"SSE-{i:02}"
        listed = await client.call_tool("prism_entity_crud", {
            "app": "spare_parts", "entity": "spare_part", "operation": "list",
            "arguments": {"page_size": 100, "ordering": "sku"}})
        assert [p["sku"] for p in text_of(listed)["data"]["items"]] == [f"SSE-{i:02}" for i in range(CALLS)]
    assert deployment.tracebacks() == []


async def _next_event(lines: AsyncIterator[str]) -> list[str]:
    event: list[str] = []
    async for line in lines:
        if line == "":
            if event and event != [": keep-alive"]:
                return event
            event = []
            continue
        event.append(line)
    raise AssertionError("stream ended")


def _post(http: httpx.AsyncClient, node: Server, endpoint: str, key: str, message: dict[str, Any]) -> Any:
    return http.post(node.base_url + endpoint, json=message,
                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})


async def test_a_stream_takes_messages_only_from_its_own_credential_on_every_process(
        deployment: Deployment, factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner", "member"))
    other = await factory.workspace(roles=("owner",))
    intruders = [ws.keys["member"], other.keys["owner"]]
    # No keep-alive: each request is a new connection, so node A's workers both take some of them.
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as http:
        async with http.stream("GET", deployment.entry, headers={
                "Authorization": f"Bearer {ws.keys['owner']}", "Accept": "text/event-stream"}) as stream:
            lines = stream.aiter_lines()
            announced = await _next_event(lines)
            assert announced[0] == "event: endpoint"
            endpoint = announced[1].removeprefix("data: ")
            stream_id = endpoint.split("session_id=")[1]
            for turn in range(8):
                node = deployment.nodes[turn % 2]
                for key in intruders:
                    refused = await _post(http, node, endpoint, key, rpc("ping", request_id=turn))
                    assert refused.status_code == 404, refused.text
                    assert refused.json()["error"]["data"]["error"] == "session_not_found"
                accepted = await _post(http, node, endpoint, ws.keys["owner"], rpc("ping", request_id=100 + turn))
                assert accepted.status_code == 202, accepted.text
                assert await _next_event(lines) == [
                    "event: message", f'data: {{"jsonrpc":"2.0","id":{100 + turn},"result":{{}}}}']
            assert await _claims(deployment, stream_id) == 1
            assert await _subscriptions(deployment, stream_id) == 1
    # The client left: its claim and its subscription go with the stream, on every process.
    await _eventually(lambda: _claims(deployment, stream_id), 0)
    await _eventually(lambda: _subscriptions(deployment, stream_id), 0)
    async with httpx.AsyncClient(timeout=30) as http:
        for node in deployment.nodes:
            gone = await _post(http, node, endpoint, ws.keys["owner"], rpc("ping"))
            assert gone.status_code == 404, gone.text
    assert deployment.tracebacks() == []


async def _claims(deployment: Deployment, stream_id: str) -> int:
    if deployment.relay == "redis":
        with redis.Redis.from_url(REDIS_URL) as client:
            return int(client.exists(claim_key(stream_id)))
    rows = await asyncio.to_thread(query, deployment.database_url,
                                   "SELECT count(*) AS n FROM mcp_legacy_streams WHERE id = :id", id=stream_id)
    return int(rows[0]["n"])


async def _subscriptions(deployment: Deployment, stream_id: str) -> int:
    """Subscribers of the stream's channel (Redis), or connections listening for streams at all (PostgreSQL:
    the listening connection of a process closes with its last stream)."""
    if deployment.relay == "redis":
        with redis.Redis.from_url(REDIS_URL) as client:
            [(_, count)] = client.pubsub_numsub(channel(stream_id))
        return int(count)
    rows = await asyncio.to_thread(query, deployment.database_url, POSTGRES_LISTENERS)
    return int(rows[0]["n"])


async def _eventually(probe: Any, expected: int, seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.1)):
        found = await probe()
        if found == expected:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"still {found}, not {expected}, after {seconds} s")
