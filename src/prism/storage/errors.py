"""A busy or unreachable database, as the domain error every door renders: 503 with Retry-After.

Only failures that say "try again shortly" are mapped: the pool had no connection free within its timeout,
SQLite's write lock stayed with another connection past the busy timeout, PostgreSQL could not be reached,
refused or lost the connection or ran out of connection slots. Anything else (a constraint, a bad statement)
stays what it is.
"""

from __future__ import annotations

import socket
import sqlite3

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from prism.errors import PrismError
from prism.storage.sqlite_driver import is_busy

# Long enough for a burst to pass, short enough that a client does not give up on a healthy server.
RETRY_AFTER_SECONDS = 2

# PostgreSQL SQLSTATE classes and codes meaning "the server cannot take this now": connection exceptions,
# insufficient resources (too many connections), operator intervention (shutting down, starting up).
_POSTGRES_UNAVAILABLE_PREFIXES = ("08", "53", "57P")


class DatabaseUnavailable(PrismError):
    code, status = "database_unavailable", 503

    def __init__(self, message: str = "the database is busy; try again shortly") -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}


def unavailable_error(exc: BaseException) -> DatabaseUnavailable | None:
    """`DatabaseUnavailable` (caused by `exc`) when `exc` means the database is busy or unreachable, else None."""
    if isinstance(exc, DatabaseUnavailable):
        return exc
    if not _is_unavailable(exc):
        return None
    error = DatabaseUnavailable()
    error.__cause__ = exc
    return error


def is_busy_database(exc: DBAPIError) -> bool:
    """Whether the driver's error says SQLite's write lock stayed held past the busy timeout."""
    return isinstance(exc.orig, sqlite3.Error) and is_busy(exc.orig)


def _is_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, PoolTimeout):
        return True
    # asyncpg raises these from a connection attempt as they come, without SQLAlchemy's wrapping: the server
    # refused, could not be resolved, or did not answer in time.
    if isinstance(exc, ConnectionError | socket.gaierror | TimeoutError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    if is_busy_database(exc):
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate.startswith(_POSTGRES_UNAVAILABLE_PREFIXES)
