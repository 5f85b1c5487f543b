"""The pool limits come from the settings, and a transaction that cannot get the database in time fails as
`DatabaseUnavailable` (503, Retry-After): a read when the pool is exhausted, a governed call whose ledger batch
cannot begin."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
from sqlalchemy import text
from sqlalchemy.exc import TimeoutError as PoolTimeout

from prism.auth.authenticator import Authenticator
from prism.config import Settings
from prism.dispatch.dispatcher import Call, Dispatcher
from prism.registry.registry import build_registry
from prism.storage import Database, DatabaseUnavailable, StorageOptions, unavailable_error
from prism.tenancy.hosts import classify_host
from tests.factories import Factory

TIGHT = StorageOptions(pool_size=1, max_overflow=1, pool_timeout_seconds=0.3, busy_timeout_seconds=0.3)


@pytest.fixture
async def tight(database_url: str) -> AsyncIterator[Database]:
    db = Database(database_url, TIGHT)
    yield db
    await db.dispose()


def test_the_pool_limits_are_read_from_the_settings() -> None:
    settings = Settings(database_url="postgresql://nowhere/prism", database_pool_size=3, database_max_overflow=2,
                        database_pool_timeout_seconds=1.5, database_busy_timeout_seconds=4)
    assert StorageOptions.from_settings(settings) == StorageOptions(3, 2, 1.5, 4)
    assert Database(settings.database_url, StorageOptions.from_settings(settings)).engine.sync_engine.pool.status() \
        .startswith("Pool size: 3 ")


async def test_a_read_beyond_pool_size_and_overflow_fails_as_unavailable_after_the_pool_timeout(
        tight: Database) -> None:
    async with AsyncExitStack() as held:
        for _ in range(2):  # pool_size + max_overflow connections, each inside a transaction
            session = await held.enter_async_context(tight.read())
            await session.execute(text("SELECT 1"))
        started = time.monotonic()
        with pytest.raises(PoolTimeout) as raised:
            async with tight.read() as session:
                await session.execute(text("SELECT 1"))
        assert 0.25 <= time.monotonic() - started < 5
    error = unavailable_error(raised.value)
    assert isinstance(error, DatabaseUnavailable) and error.__cause__ is raised.value
    assert (error.status, error.code, error.headers) == (503, "database_unavailable", {"Retry-After": "2"})
    async with tight.read() as session:  # the connections are back
        assert (await session.execute(text("SELECT 1"))).scalar_one() == 1


async def test_a_governed_call_that_cannot_get_the_database_in_time_answers_database_unavailable(
        tight: Database, factory: Factory, settings: Settings) -> None:
    ws = await factory.workspace(roles=("owner",))
    auth = await Authenticator(factory.db, cache_seconds=0).authenticate(
        f"Bearer {ws.keys['owner']}", classify_host(ws.host, "localhost"))
    dispatcher = Dispatcher(tight, build_registry(), settings)
    whoami = Call("prism_whoami", "rest", {})
    try:
        assert (await dispatcher.dispatch(auth, whoami))[1]["user"]["email"] == ws.emails["owner"]
        # The sealer seals that call in a transaction of its own (PostgreSQL): stopped here, it cannot be holding one
        # of the pool's two connections when the test takes them (calls restart it).
        await dispatcher.ledger.sealer.close()
        async with AsyncExitStack() as held:
            # Every way in taken: SQLite's one writer (which the ledger waits for), or every pool connection.
            hold = tight.write if tight.is_sqlite else tight.read
            for _ in range(1 if tight.is_sqlite else 2):
                session = await held.enter_async_context(hold())
                await session.execute(text("SELECT 1"))
            with pytest.raises(DatabaseUnavailable):
                await asyncio.wait_for(dispatcher.dispatch(auth, whoami), 10)
        assert (await dispatcher.dispatch(auth, whoami))[1]["user"]["email"] == ws.emails["owner"]
    finally:
        await dispatcher.close()
