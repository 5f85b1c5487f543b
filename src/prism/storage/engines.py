"""Engine set-up: URLs, connection pools, JSON columns, and engines for one-off commands."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy.engine import make_url
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


def normalize_url(url: str) -> str:
    """Accept plain `postgresql://` and `sqlite:///` URLs and pick the async drivers: asyncpg, and Prism's own
    SQLite driver (prism.storage.sqlite_driver; `sqlite+aiosqlite://`, which earlier releases used, means it too)."""
    parsed = make_url(url)
    driver = {"postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg",
              "sqlite": SQLITE_URL_DRIVER, "sqlite+aiosqlite": SQLITE_URL_DRIVER}.get(parsed.drivername)
    if driver is None:
        return url
    parsed = parsed.set(drivername=driver)
    if driver == "postgresql+asyncpg" and "sslmode" in parsed.query and "ssl" not in parsed.query:
        # libpq's `sslmode` (what managed PostgreSQL services hand out) is asyncpg's `ssl`, with the same values.
        query = {**parsed.query, "ssl": parsed.query["sslmode"]}
        del query["sslmode"]
        parsed = parsed.set(query=query)
    return parsed.render_as_string(hide_password=False)


def backend_of(url: str) -> str:
    """"sqlite" or "postgresql"."""
    return make_url(normalize_url(url)).get_backend_name()


def pool_options(options: StorageOptions) -> dict[str, Any]:
    return {"pool_size": options.pool_size, "max_overflow": options.max_overflow,
            "pool_timeout": options.pool_timeout_seconds}


def postgres_engine(url: str, options: StorageOptions) -> AsyncEngine:
    return create_async_engine(url, **pool_options(options), **JSON_OPTIONS)


def one_shot_engine(url: str) -> AsyncEngine:
    """An engine without a pool, for migrations and CLI commands."""
    return create_async_engine(normalize_url(url), poolclass=NullPool, **JSON_OPTIONS)
