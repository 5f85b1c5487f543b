"""The reference topology (deploy/topology.py) for tests: brought up once per module on a scratch PostgreSQL
database, and an HTTPS client that trusts its local CA and tells which node answered each request."""

from __future__ import annotations

import random
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from deploy.topology import Topology, find_nginx

from tests.factories import PASSWORD
from tests.processes import TRACEBACK, cli_json, postgres_test_url, scratch_database
from tests.test_limits_limiter import REDIS_URL, redis_available
from tests.webhooks_receiver import TlsFiles

DEMO_ORG = "demo-ops"
# The per-user ceiling of the `authenticated` tier: small enough to reach, through both nodes together.
USER_CEILING = 20
MEMBER_EMAIL = "member@demo.example.com"
OWNER_EMAIL = "owner@demo.example.com"


def requirements_missing() -> str | None:
    if find_nginx() is None:
        return "nginx is not installed (Debian: apt-get install nginx-light); .ci/run installs it"
    if postgres_test_url() is None:
        return "two nodes of `prism serve --workers 2` need PRISM_TEST_DATABASE_URL naming a PostgreSQL server"
    if not redis_available():
        return "no Redis on 127.0.0.1:6379"
    return None


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory, tls: TlsFiles) -> Iterator[Topology]:
    missing = requirements_missing()
    if missing:
        pytest.skip(missing)
    directory = tmp_path_factory.mktemp("topology")
    with scratch_database(directory, "topology") as url:
        settings = {
            "PRISM_RATE_LIMIT_AUTHENTICATED": str(USER_CEILING),
            # The owners' traffic (admin tier) and the MCP door's (per tenant) must not meet a ceiling here.
            "PRISM_RATE_LIMIT_ADMIN": "100000", "PRISM_RATE_LIMIT_MCP": "100000",
            # The webhook receiver is a loopback HTTPS server whose certificate a test CA signs.
            "PRISM_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "PRISM_WEBHOOK_CA_BUNDLE": str(tls.ca),
            "PRISM_WEBHOOK_POLL_SECONDS": "0.2", "PRISM_MCP_SSE_KEEPALIVE_SECONDS": "0.5",
            # 5 processes of 10 connections each: modest on a PostgreSQL server other suites share.
            "PRISM_DATABASE_POOL_SIZE": "5", "PRISM_DATABASE_MAX_OVERFLOW": "5", "PRISM_LOG_LEVEL": "warning"}
        deployment = Topology(directory, database_url=url, redis_url=REDIS_URL, settings=settings, show_upstream=True)
        deployment.start()
        try:
            for email, role in ((MEMBER_EMAIL, "member"), (OWNER_EMAIL, "owner")):
                cli("user", "create", email, "--password", PASSWORD, deployment=deployment)
                cli("user", "add-to-org", email, "--tenant", "demo", "--org", DEMO_ORG, "--role", role,
                    deployment=deployment)
            yield deployment
        finally:
            deployment.stop()
        tracebacks = [p.describe() for p in deployment.processes if TRACEBACK in p.err.read_text(errors="replace")]
        assert tracebacks == [], "\n".join(tracebacks)


def cli(*args: str, deployment: Topology) -> Any:
    """A `prism` command run as an operator would on a host of the deployment: same database, same secret."""
    settings = {k: v for k, v in deployment.env.items() if k.startswith("PRISM_") and k != "PRISM_DATABASE_URL"}
    return cli_json(*args, database_url=deployment.database_url, **settings)


def client_address() -> str:
    """A loopback address of our own (Linux answers on all of 127/8): nginx sees it as the client's and Prism,
    trusting only nginx (127.0.0.1), counts per-address limits for it, apart from other runs sharing Redis."""
    return f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"


@asynccontextmanager
async def https_client(deployment: Topology, *, headers: dict[str, str] | None = None,
                       **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Through nginx over TLS, as the demo tenant's host, trusting only the deployment's CA."""
    context = ssl.create_default_context(cafile=str(deployment.ca))
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    transport = httpx.AsyncHTTPTransport(verify=context, local_address=client_address(), limits=limits)
    async with httpx.AsyncClient(base_url=deployment.url, transport=transport, timeout=60,
                                 headers={"Host": deployment.host("demo"), **(headers or {})}, **options) as client:
        yield client


def node_of(answer: httpx.Response) -> str:
    """The node nginx passed the request to (the header the topology adds for tests)."""
    return answer.headers["x-prism-upstream"]


def nodes(deployment: Topology) -> set[str]:
    return {node.address for node in deployment.nodes}


def demo_key(deployment: Topology) -> str:
    key: str = deployment.nodes[0].banner["api_key"]
    return key
