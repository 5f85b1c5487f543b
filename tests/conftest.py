"""Test fixtures: a real database (SQLite file or PostgreSQL), the real app, data built through services.

PRISM_TEST_DATABASE_URL selects the engine (default: a fresh SQLite file). When it names PostgreSQL it names
the server only: the suite creates a database of its own there and drops it at the end, so no database the
suite did not create is ever changed. Every test builds its own tenant with a unique subdomain, so tests never
see each other's data and need no cleanup.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from argon2 import PasswordHasher

from prism.app import create_app
from prism.config import Settings
from prism.identity import passwords
from prism.migrate import upgrade
from prism.ratelimit import TIERS
from prism.registry import semantic
from prism.storage import Database, normalize_url
from tests.factories import Factory

# Fixtures of shared modules, registered here once for every module under tests/ instead of imported into each. A
# fixture runs only for a test that asks for it by name, so a module that never does starts nothing; a module that
# defines a fixture of the same name uses its own (the integrations modules' `tls`, a CA for each test).
# - imports_removed_after_the_module: module-scoped, so it still runs once for each integrations module that asks
#   for it (pytestmark) and removes that module's imports when the module ends.
# - the webhook tests' (a loopback HTTPS receiver, the CA that signs it, an app that trusts that CA, delivery
#   workers): the session-scoped ones (tls, receiver, hook_settings, hook_app, hook_db) are one each for the whole
#   run. Every test keeps to webhooks and receiver paths of its own (unique_path), and hook_client clears the
#   deliveries left to send before and after each test.
# - slow_dns: DNS answering when a test lets it, at Prism's resolver seam (function-scoped).
# - limiter_storage: the lockout tests' limiter in memory, then on Redis (function-scoped).
from tests.integrations_upstream import imports_removed_after_the_module_fixture  # noqa: F401 -- fixture
from tests.limits_support import limiter_storage_fixture  # noqa: F401 -- fixture
from tests.processes import TEST_SECRET_KEY_FILE, ServerPool, scratch_database
from tests.slow_dns import slow_dns_fixture  # noqa: F401 -- fixture
from tests.webhooks_fixtures import (  # noqa: F401 -- fixtures
    hook_app_fixture,
    hook_client_fixture,
    hook_db_fixture,
    hook_settings_fixture,
    make_worker_fixture,
    receiver_fixture,
    tls_fixture,
)

# Argon2 at its default cost (64 MiB, three passes) takes 50-350 ms a hash on a shared 2-core machine, and every
# workspace the factory builds hashes its users' passwords: it was most of the suite's time. The tests' own process
# hashes with the same algorithm at a low cost; verifying reads the cost from each hash, so hashes made at full cost
# by the CLI or a server process verify the same, and every password check still runs for real.
passwords._hasher = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)

UNTHROTTLED = {**{f"rate_limit_{tier}": 10**9 for tier in TIERS}, "lockout_failures": 10**9}


# Tests whose subject does not depend on the database engine: browsers, the official clients, contract
# fuzzing of the HTTP surface, the quickstart (always its own SQLite file), Redis-backed limits. `bin/test`
# runs them in its SQLite pass only (`-m "not engine_independent"` on PostgreSQL).
ENGINE_INDEPENDENT = frozenset({
    "test_openapi_fuzzing.py", "test_openapi_generated_client.py", "test_openapi_typescript_client.py",
    "test_oauth_browser.py", "test_limits_dashboard_browser.py", "test_webhooks_admin_browser.py",
    "test_oauth_authlib.py", "test_quickstart.py", "test_limits_redis_processes.py",
    "test_client_against_prism.py", "test_client_retries.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in ENGINE_INDEPENDENT:
            item.add_marker(pytest.mark.engine_independent)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with scratch_database(tmp_path_factory.mktemp("db"), "suite") as url:
        upgrade(url)
        yield normalize_url(url)


@pytest.fixture(scope="session")
def settings(database_url: str) -> Settings:
    # The shared app serves every test from one address (127.0.0.1): its ceilings and lockout are raised so
    # tests do not throttle each other. Tests of the limits themselves build apps with the real values.
    # Webhook deliveries are sent by the workers the webhook tests start themselves.
    # The shared app seals what its own calls write; it does not sweep for entries left waiting, so a test that
    # writes a waiting entry on purpose decides itself when it is sealed.
    return Settings(database_url=database_url, credential_cache_seconds=0, seed_demo=False,
                    key_touch_interval_seconds=3600, secret_key_file=str(TEST_SECRET_KEY_FILE),
                    webhook_worker_in_process=False, audit_seal_sweep_seconds=3600, **UNTHROTTLED)


@pytest.fixture(scope="session")
async def app(settings: Settings) -> AsyncIterator[object]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="session")
async def db(app: object) -> Database:
    database: Database = app.state.db  # type: ignore[attr-defined]
    return database


@pytest.fixture
async def client(app: object) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
        yield c


@pytest.fixture
def factory(db: Database) -> Factory:
    return Factory(db)


@pytest.fixture
def server_pool(tmp_path: Path) -> Iterator[ServerPool]:
    """`prism serve` processes a test starts, each stopped when the test ends."""
    pool = ServerPool(tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(params=[True, False], ids=["model", "lexical"])
def search_model(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Capability search with the embedding model and without it: a reading rule must hold for both rankers."""
    if request.param and not semantic.AVAILABLE:
        pytest.skip("the semantic extra is not installed")
    monkeypatch.setattr(semantic, "AVAILABLE", request.param)
    return bool(request.param)
