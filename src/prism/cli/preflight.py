"""Checks every command makes before it works: settings that parse, a database that is there, Redis when set.

Each failure is a `ConfigurationError` naming the setting to fix, so the command prints one line and exits
instead of a traceback from deep inside a driver.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from prism.config import Settings, get_settings
from prism.errors import PrismError
from prism.kit.secret import check_master_secret
from prism.storage import backend_of, one_shot_engine
from prism.storage.engines import postgres_connection

# How long a check waits for a database or Redis server before calling it unreachable.
CONNECT_TIMEOUT_SECONDS = 5.0

# PostgreSQL's SQLSTATE for a database that does not exist.
INVALID_CATALOG_NAME = "3D000"


class ConfigurationError(PrismError):
    code, status = "invalid_setting", 500


def env_name(field: str) -> str:
    return f"PRISM_{field.upper()}"


def load_settings() -> Settings:
    """The settings, or the first bad value named by its environment variable."""
    try:
        return get_settings()
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ConfigurationError(f"{env_name(field)}={first['input']!r} is not valid: {first['msg']}") from None


def database_settings(*, may_create: bool) -> Settings:
    """The settings of a command that works on the database, its URL checked (see check_database_url)."""
    settings = load_settings()
    check_database_url(settings, may_create=may_create)
    # Like the default database: only `serve` and `migrate` make a missing secret file (prism.kit.secret).
    check_master_secret(settings, may_create=may_create)
    return settings


def default_database_in_use(settings: Settings) -> bool:
    """True when PRISM_DATABASE_URL is not set: the SQLite file `prism.db` in the working directory."""
    return "database_url" not in settings.model_fields_set


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for an in-memory database)."""
    database = make_url(url).database
    return Path(database).resolve() if database and database != ":memory:" else None


def check_database_url(settings: Settings, *, may_create: bool) -> None:
    """The URL parses, and a SQLite file exists unless this command may create it (`serve`, `migrate`).

    Without this an admin command run from another directory would silently create an empty `prism.db`
    there and then report that nothing exists.
    """
    try:
        backend = backend_of(settings.database_url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number (or libpq's h1:p1,h2:p2)
        raise ConfigurationError(f"PRISM_DATABASE_URL is not a database URL ({exc}): a port is a number from 1 to "
                                 f"65535, and {SEVERAL_HOSTS} (docs/deploy.md)") from None
    if backend not in ("sqlite", "postgresql"):
        raise ConfigurationError(f"PRISM_DATABASE_URL names a {backend} database: Prism runs on SQLite or "
                                 "PostgreSQL (sqlite:///path or postgresql://user@host/database)")
    if backend != "sqlite":
        _check_postgres_url(settings.database_url)
        _check_postgres_files(settings.database_url)
        return
    path = sqlite_path(settings.database_url)
    if path is None:
        return
    if not path.parent.is_dir():
        raise ConfigurationError(f"unable to open database file {path}: the directory {path.parent} does not "
                                 "exist (PRISM_DATABASE_URL)", code="database_not_found")
    if may_create or path.exists():
        return
    if default_database_in_use(settings):
        raise ConfigurationError(
            f"no Prism database at {path}: PRISM_DATABASE_URL is not set, so Prism looks for prism.db in the "
            "current directory. Run the command where `prism serve` runs, or set PRISM_DATABASE_URL.",
            code="database_not_found")
    raise ConfigurationError(f"no Prism database at {path} (PRISM_DATABASE_URL): create it with `prism migrate`",
                             code="database_not_found")


SEVERAL_HOSTS = "several PostgreSQL hosts are written ?host=h1:5432&host=h2:5432"


def _check_postgres_url(url: str) -> None:
    """Its parameters are ones asyncpg can be given, and its hosts and ports are what the driver reads from it,
    each port in range: the driver would otherwise fail on the first connection, in its own words."""
    try:
        target, _ = postgres_connection(url)
    except ValueError as exc:
        raise ConfigurationError(f"PRISM_DATABASE_URL: {exc} (docs/deploy.md)") from None
    try:
        _, options = target.get_dialect()().create_connect_args(target)
    except ArgumentError as exc:  # hosts and ports the driver cannot pair up
        raise ConfigurationError(f"PRISM_DATABASE_URL: {exc} ({SEVERAL_HOSTS}; docs/deploy.md)") from None
    ports = options.get("port")
    # The URL's own port too: the driver reads `:0` as no port at all (the default one).
    for port in [make_url(url).port, *(ports if isinstance(ports, list) else [ports])]:
        if port is not None and not 1 <= port <= 65535:
            raise ConfigurationError(f"PRISM_DATABASE_URL: port {port} is not a port (1 to 65535)")


# libpq's parameters naming a file, which asyncpg opens without saying which one it could not read.
POSTGRES_FILE_PARAMETERS = ("sslrootcert", "sslcert", "sslkey", "sslcrl", "passfile")


def _check_postgres_files(url: str) -> None:
    query = make_url(url).query
    for name in POSTGRES_FILE_PARAMETERS:
        value = query.get(name)
        path = Path(value[-1] if isinstance(value, tuple) else value) if value else None
        if path is not None and not (path.is_file() and os.access(path, os.R_OK)):
            raise ConfigurationError(f"PRISM_DATABASE_URL: {name}={path} is not a file this process can read")


def check_database_reachable(url: str) -> None:
    """One connection and a trivial query: a server that is down or a database that does not exist is named
    here, before migrations or workers report it in their own words."""

    async def probe() -> None:
        engine = one_shot_engine(url)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS), engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
        finally:
            await engine.dispose()

    try:
        asyncio.run(probe())
    except TimeoutError:
        raise ConfigurationError(f"no answer from the database at {_where(url)} within {CONNECT_TIMEOUT_SECONDS:g} s "
                                 "(PRISM_DATABASE_URL)", code="database_unreachable") from None
    except DBAPIError as exc:
        raise database_error(url, exc.orig) from None
    except (OSError, SQLAlchemyError) as exc:
        raise database_error(url, exc) from None


def database_error(url: str, exc: BaseException | None) -> ConfigurationError:
    """A driver's error in one line, with the setting to look at."""
    name = type(exc).__name__
    detail = str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else name
    if getattr(exc, "sqlstate", None) == INVALID_CATALOG_NAME:  # the server is up, the database is not there
        return ConfigurationError(f"database {make_url(url).database!r} does not exist at {_where(url)} "
                                  "(PRISM_DATABASE_URL): create it (createdb) or point the setting elsewhere",
                                  code="database_not_found")
    if isinstance(exc, OSError):
        return ConfigurationError(f"cannot reach the database at {_where(url)} (PRISM_DATABASE_URL): {detail}",
                                  code="database_unreachable")
    return ConfigurationError(f"database error at {_where(url)} (PRISM_DATABASE_URL): {detail}",
                              code="database_error")


def _where(url: str) -> str:
    """Where a URL points, without its password."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return str(sqlite_path(url) or ":memory:")
    hosts = parsed.query.get("host")
    if hosts and not parsed.host:  # several hosts (each with its port), or a Unix socket's directory
        return f"{','.join(hosts) if isinstance(hosts, tuple) else hosts}/{parsed.database or ''}"
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}/{parsed.database or ''}"


def check_redis(settings: Settings) -> None:
    """With PRISM_REDIS_URL set: the optional client is installed and the server answers a PING."""
    if not settings.redis_url:
        return
    try:
        from redis.asyncio import Redis
        from redis.exceptions import RedisError
    except ImportError:
        raise ConfigurationError("PRISM_REDIS_URL is set but the Redis client is not installed: "
                                 "pip install 'prism[redis]'", code="redis_not_installed") from None

    async def ping() -> None:
        client = Redis.from_url(settings.redis_url or "", socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
                                socket_timeout=CONNECT_TIMEOUT_SECONDS)
        try:
            await client.ping()
        finally:
            await client.aclose()

    try:
        asyncio.run(ping())
    except (RedisError, OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot reach Redis at {_redacted(settings.redis_url)} (PRISM_REDIS_URL): {exc}",
                                 code="redis_unreachable") from None


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def check_tracing(settings: Settings) -> None:
    """With PRISM_TRACING=otel: the optional OpenTelemetry packages are installed."""
    if settings.tracing != "otel":
        return
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        raise ConfigurationError("PRISM_TRACING=otel needs the OpenTelemetry packages: pip install 'prism[otel]'",
                                 code="tracing_not_installed") from None


def check_apps(settings: Settings) -> None:
    """Every PRISM_APPS entry imports and names a handler app, so a typo stops the start with its name."""
    from prism.registry.registry import load_app

    for spec in (s.strip() for s in settings.apps.split(",")):
        if not spec:
            continue
        try:
            load_app(spec)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"PRISM_APPS entry {spec!r} cannot be loaded: {exc}") from None
