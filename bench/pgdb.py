"""A throwaway PostgreSQL database for a benchmark run: created before, dropped after."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

THROWAWAY_PREFIX = "prism_bench"


def database_name(url: str) -> str:
    name = urlsplit(url).path.lstrip("/")
    # The database is dropped at the end; refuse any name that could be someone's real data.
    if not name.startswith(THROWAWAY_PREFIX) or not name.replace("_", "").isalnum():
        raise SystemExit(f"--database-url must name a throwaway database {THROWAWAY_PREFIX}*, got {name!r}")
    return name


def psql(url: str, sql: str) -> None:
    """Run one statement through psql, connected to the server's `postgres` database."""
    parts = urlsplit(url)
    subprocess.run(["psql", "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432),
                    "-U", parts.username or "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q",
                    "-c", sql], check=True)


@contextmanager
def throwaway_database(url: str) -> Iterator[str]:
    """Create the database named by `url` (dropping a leftover first); drop it on the way out."""
    name = database_name(url)
    psql(url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    psql(url, f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        psql(url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
