"""The MCP conformance suite (`@modelcontextprotocol/conformance`) against a live `prism serve`, for every server
scenario that applies to Prism; docs/mcp.md lists the others and why they do not apply.

The suite connects without credentials, while every request to Prism's MCP door is authenticated: a loopback
proxy in front of Prism adds one tenant key's `Authorization` header (and the tenant's host) and changes
nothing else."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tests.factories import Factory
from tests.mcp_clients import node, node_modules
from tests.processes import Server, ServerPool, clean_env, free_port
from tests.test_mcp_protocol import PATH

# The server scenarios of conformance 0.1.16 that apply to Prism, a tools-only server with its own fixed tool
# names: no server-initiated requests, notifications, logging, completions, resources or prompts, and none of
# the suite's fixture tools (docs/mcp.md, "Conformance", lists each skipped scenario and why).
SCENARIOS = ("server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "server-sse-polling")


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pool = ServerPool(tmp_path_factory.mktemp("conformance"))
    try:
        yield pool.start(env=clean_env(PRISM_DATABASE_URL=database_url, PRISM_SEED_DEMO="false"))
    finally:
        pool.stop_all()


class KeyedProxy:
    """A loopback HTTP proxy that adds one credential to every request (buffered: Prism's MCP answers are
    complete responses, never held-open streams, on the streamable HTTP transport)."""

    def __init__(self, upstream: str, key: str, host: str | None) -> None:
        self.upstream, self.key, self.host = upstream, key, host
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                        log_level="warning", interface="asgi3"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        # host None: the Host the suite sent goes on unchanged (a loopback name is served, the key names the tenant)
        headers.update({"authorization": f"Bearer {self.key}", "host": self.host or request.headers["host"]})
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.request(request.method, self.upstream + scope["path"], headers=headers,
                                        params=request.query_params, content=await request.body())
        passed = {k: v for k, v in answer.headers.items() if k not in ("content-length", "content-encoding")}
        await Response(answer.content, status_code=answer.status_code, headers=passed)(scope, receive, send)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            threading.Event().wait(0.05)
        return f"http://127.0.0.1:{self.port}{PATH}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def run_scenario(url: str, scenario: str, out: Path) -> tuple[int, list[dict[str, object]]]:
    script = node_modules() / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    done = subprocess.run([node(), str(script), "server", "--url", url, "--scenario", scenario, "-o", str(out)],
                          capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL)
    checks: list[dict[str, object]] = []
    for path in out.rglob("checks.json"):
        checks += json.loads(path.read_text())
    return done.returncode, checks


@pytest.mark.engine_independent
async def test_the_conformance_suite_passes_every_scenario_that_applies(
        server: Server, factory: Factory, tmp_path: Path) -> None:
    ws = await factory.workspace(roles=("owner",))
    with KeyedProxy(server.base_url, ws.keys["owner"], f"{ws.host}:{server.port}") as url:
        for scenario in SCENARIOS:
            code, checks = await asyncio.to_thread(run_scenario, url, scenario, tmp_path / scenario)
            failed = [(c.get("id"), c.get("status"), c.get("errorMessage")) for c in checks
                      if c.get("status") not in ("SUCCESS", "INFO")]
            assert code == 0 and checks and not failed, (scenario, failed)


@pytest.mark.engine_independent
async def test_the_dns_rebinding_scenario_passes_with_the_hosts_the_suite_sends(
        server: Server, factory: Factory, tmp_path: Path) -> None:
    """The suite sends a foreign Host (refused: 421, never answered as a tenant) and a loopback one (served); the
    proxy only adds the key, so the Host that reaches Prism is the suite's own."""
    ws = await factory.workspace(roles=("owner",))
    with KeyedProxy(server.base_url, ws.keys["owner"], None) as url:
        code, checks = await asyncio.to_thread(run_scenario, url, "dns-rebinding-protection",
                                               tmp_path / "dns-rebinding-protection")
    failed = [(c.get("id"), c.get("status"), c.get("errorMessage")) for c in checks
              if c.get("status") not in ("SUCCESS", "INFO")]
    assert code == 0 and len(checks) >= 2 and not failed, failed
