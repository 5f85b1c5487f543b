"""Engine set-up: URLs, connection pools, JSON columns, and engines for one-off commands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from prism.config import Settings
from prism.storage.sqlite_driver import DRIVER

SQLITE_URL_DRIVER = f"sqlite+{DRIVER}"


@dataclass(frozen=True, slots=True)
class StorageOptions:
    """How one process uses the database (docs/architecture.md "Storage" explains the sizing).

    `pool_size` connections stay open, `max_overflow` more are opened under load, and a transaction waits at
    most `pool_timeout_seconds` for one before it fails as `DatabaseUnavailable`. On SQLite a writer waits at
    most `busy_timeout_seconds` for another process's write lock.
    """

    pool_size: int
    max_overflow: int
    pool_timeout_seconds: float
    busy_timeout_seconds: float

    @classmethod
    def from_settings(cls, settings: Settings) -> StorageOptions:
        return cls(pool_size=settings.database_pool_size, max_overflow=settings.database_max_overflow,
                   pool_timeout_seconds=settings.database_pool_timeout_seconds,
                   busy_timeout_seconds=settings.database_busy_timeout_seconds)


def json_text(value: Any) -> str:
    """JSON columns (every ledger entry has one) through orjson: several times faster than json.dumps."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def json_value(text: str | bytes) -> Any:
    """JSON columns read back. orjson refuses some of what the databases store as JSON (a number past a double's
    range), and SQLite stores any text: written by hand in the database, such a value is read as the standard
    parser reads it, or as the text itself, so that the row is shown (and verification names it) rather than every
    read of it failing."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)
        except ValueError:
            return text if isinstance(text, str) else text.decode("utf-8", errors="replace")


JSON_OPTIONS: dict[str, Any] = {"json_serializer": json_text, "json_deserializer": json_value}


# libpq's connection parameters, as managed PostgreSQL services hand them out in URLs. asyncpg reads each with
# libpq's meaning from a libpq connection string (its `dsn`), but a URL's query reaches it through SQLAlchemy as
# keyword arguments, which it does not take (every connection failed with a TypeError): they travel in a `dsn` of
# their own, beside the host, user and database SQLAlchemy passes, which take precedence over it.
LIBPQ_PARAMETERS = frozenset({
    "sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl", "sslpassword", "sslnegotiation",
    "ssl_min_protocol_version", "ssl_max_protocol_version", "application_name", "passfile", "krbsrvname", "gsslib"})
# asyncpg's own keyword arguments, taken from the URL as they are (an explicit `ssl` wins over `sslmode`). `host`
# and `port` are SQLAlchemy's way to give asyncpg several hosts (`?host=h1:5432&host=h2:5432`, or
# `?host=h1,h2&port=5432,5433`: libpq's `h1:5432,h2:5432` in the authority is not a URL SQLAlchemy reads) or a Unix
# socket's directory (`?host=/var/run/postgresql`).
ASYNCPG_PARAMETERS = frozenset({"ssl", "prepared_statement_cache_size", "target_session_attrs", "host", "port"})
# libpq's `connect_timeout` (whole seconds to wait for a connection) is asyncpg's `timeout`.
CONNECT_TIMEOUT = "connect_timeout"
POSTGRES_URL_PARAMETERS = LIBPQ_PARAMETERS | ASYNCPG_PARAMETERS | {CONNECT_TIMEOUT}


def normalize_url(url: str) -> str:
    """Accept plain `postgresql://` and `sqlite:///` URLs and pick the async drivers: asyncpg, and Prism's own
    SQLite driver (prism.storage.sqlite_driver; `sqlite+aiosqlite://`, which earlier releases used, means it too)."""
    parsed = make_url(url)
    driver = {"postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg",
              "sqlite": SQLITE_URL_DRIVER, "sqlite+aiosqlite": SQLITE_URL_DRIVER}.get(parsed.drivername)
    if driver is None:
        return url
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def postgres_connection(url: str) -> tuple[URL, dict[str, Any]]:
    """The URL SQLAlchemy connects with and the `connect_args` carrying its libpq parameters (LIBPQ_PARAMETERS).
    ValueError names a parameter asyncpg cannot be given or a `connect_timeout` that is not a positive number."""
    parsed = make_url(normalize_url(url))
    unknown = sorted(set(parsed.query) - POSTGRES_URL_PARAMETERS)
    if unknown:
        raise ValueError(f"{', '.join(unknown)} cannot be passed to PostgreSQL by Prism's driver (asyncpg); a URL "
                         f"may carry {', '.join(sorted(POSTGRES_URL_PARAMETERS))}")
    connect_args: dict[str, Any] = {}
    libpq = {name: value for name, value in parsed.query.items() if name in LIBPQ_PARAMETERS}
    if libpq:
        connect_args["dsn"] = "postgresql://?" + urlencode(libpq, doseq=True)
    if CONNECT_TIMEOUT in parsed.query:
        connect_args["timeout"] = _connect_timeout(parsed.query[CONNECT_TIMEOUT])
    kept = {name: value for name, value in parsed.query.items() if name in ASYNCPG_PARAMETERS}
    return parsed.set(query=kept), connect_args


def _connect_timeout(value: str | tuple[str, ...]) -> float:
    text = value[-1] if isinstance(value, tuple) else value
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    # libpq waits forever for 0; asyncpg has no such setting, and a connection attempt that never ends would hold
    # a request (and a pool's place) forever, so it is refused rather than read another way.
    if not (0 < seconds < float("inf")):
        raise ValueError(f"connect_timeout={text!r} is not a positive number of seconds")
    return seconds


def backend_of(url: str) -> str:
    """"sqlite" or "postgresql"."""
    return make_url(normalize_url(url)).get_backend_name()


def pool_options(options: StorageOptions) -> dict[str, Any]:
    return {"pool_size": options.pool_size, "max_overflow": options.max_overflow,
            "pool_timeout": options.pool_timeout_seconds}


def postgres_engine(url: str, options: StorageOptions) -> AsyncEngine:
    target, connect_args = postgres_connection(url)
    return create_async_engine(target, connect_args=connect_args, **pool_options(options), **JSON_OPTIONS)


def one_shot_engine(url: str) -> AsyncEngine:
    """An engine without a pool, for migrations and CLI commands."""
    url = normalize_url(url)
    if backend_of(url) != "postgresql":
        return create_async_engine(url, poolclass=NullPool, **JSON_OPTIONS)
    target, connect_args = postgres_connection(url)
    return create_async_engine(target, connect_args=connect_args, poolclass=NullPool, **JSON_OPTIONS)
