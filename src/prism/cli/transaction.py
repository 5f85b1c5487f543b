"""One committed transaction for a CLI command, its errors turned into a clean exit 1 (prism.cli.output)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from prism.cli.output import USAGE_EXIT, fail
from prism.cli.preflight import database_error, database_settings
from prism.config import Settings
from prism.errors import PrismError
from prism.ledger.checkpoints import MalformedCheckpoint
from prism.ledger.sealer import BrokenLog
from prism.storage import Database
from prism.storage.errors import is_busy_database

T = TypeVar("T")


def in_transaction(as_json: bool, work: Callable[[AsyncSession], Awaitable[T]], *, read_only: bool = False,
                   usage_errors: tuple[type[PrismError], ...] = ()) -> T:
    """Run `work` in one committed transaction; bad settings, domain and database errors become a clean exit 1.

    `read_only` work takes no write lock, so it never holds up a running server's writers. `usage_errors`: the
    errors that mean the command's arguments are wrong, exit 2 (USAGE_EXIT) where the command's exit 1 means
    something else (`prism audit verify`: a broken log).
    """
    async def in_one_transaction(db: Database, _: Settings) -> T:
        async with db.read() if read_only else db.write() as session:
            return await work(session)

    return on_database(as_json, in_one_transaction, usage_errors=usage_errors)


def on_database(as_json: bool, work: Callable[[Database, Settings], Awaitable[T]], *,
                usage_errors: tuple[type[PrismError], ...] = ()) -> T:
    """Run `work` with the database, which it opens transactions on itself (a command that dispatches: the
    dispatcher commits its own); errors become a clean exit as in `in_transaction`."""
    try:
        settings = database_settings(may_create=False)
    except PrismError as exc:
        fail(as_json, exc)
    url = settings.database_url

    async def run() -> T:
        db = Database(url)
        try:
            return await work(db, settings)
        finally:
            await db.dispose()

    try:
        return asyncio.run(run())
    except PrismError as exc:
        fail(as_json, exc, exit_code=USAGE_EXIT if isinstance(exc, usage_errors) else 1)
    except DBAPIError as exc:
        if is_busy_database(exc):  # another process held the write lock past the busy timeout: not the schema
            fail(as_json, PrismError("the database is busy (another process holds its write lock); try again "
                                     "shortly", code="database_unavailable"))
        error = database_error(url, exc.orig)
        if error.code == "database_error":  # most often a schema older than this Prism
            error.message += ". Is the database migrated? Run `prism migrate`."
        fail(as_json, error)
    except OSError as exc:  # the server is not there: drivers raise these unwrapped
        fail(as_json, database_error(url, exc))
    except (BrokenLog, MalformedCheckpoint) as exc:  # a log rewritten in the database, or sealed with another key
        fail(as_json, PrismError(f"the audit log cannot be used: {exc}; run `prism audit verify`", code="log_broken"))
